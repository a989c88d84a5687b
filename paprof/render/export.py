"""The loaded table as text, CSV, JSON or Parquet (what ``paprof table`` prints or writes).

Text is a fixed-width table of the key columns followed by one "why" line per row (the
bottleneck's first evidence). CSV, JSON and Parquet carry every scalar column: the list
columns ``bottleneck_evidence`` and ``kernels`` become " | "-joined strings, and the
nested ``rules`` and ``sidecar`` are left out (they stay in the DataFrame API).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from paprof import outputs
from paprof.explain import fmt
from paprof.read import metrics as M
from paprof.errors import UserError
from paprof import safetext
from paprof.read.store import input_files

FORMATS = ("text", "csv", "json", "parquet")

#: Columns of the text table, with their short headers.
TEXT_COLUMNS = {
    "variant": "variant",
    "kernel": "kernel",
    "launch": "#",
    "step": "step",
    "shape": "shape",
    "gpu": "gpu",
    "duration_us": "time_us",
    "sm_throughput_pct": "sm%",
    "dram_throughput_pct": "dram%",
    "l1_throughput_pct": "l1%",
    "l2_throughput_pct": "l2%",
    "achieved_bandwidth_gbs": "GB/s",
    "registers_per_thread": "regs",
    "theoretical_occupancy_pct": "theo%",
    "achieved_occupancy_pct": "occ%",
    "occupancy_limiter": "limiter",
    "waves_per_sm": "waves",
    "grid_size": "grid",
    "block_size": "block",
    "bottleneck": "bottleneck",
}

#: Columns of the text table with ``traffic=True`` (``paprof table --traffic``): the
#: traffic per memory level, from the SM outwards, with short headers.
TRAFFIC_TEXT_COLUMNS = {
    "variant": "variant",
    "kernel": "kernel",
    "launch": "#",
    "step": "step",
    "step": "step",
    "shape": "shape",
    "gpu": "gpu",
    "global_load_instructions": "ld_inst",
    "l1_global_load_bytes": "L1->SM",
    "l1_global_store_bytes": "SM->L1",
    "shared_load_wavefronts": "shm_ld_wf",
    "shared_store_wavefronts": "shm_st_wf",
    "shared_load_bank_conflicts": "shm_ld_cfl",
    "shared_store_bank_conflicts": "shm_st_cfl",
    "l1_hit_rate_pct": "L1hit%",
    "l2_to_l1_bytes": "L2->SM",
    "l1_to_l2_bytes": "SM->L2",
    "l2_hit_rate_pct": "L2hit%",
    "dram_bytes_read": "DRAM->L2",
    "dram_bytes_write": "L2->DRAM",
    "instructions_executed": "inst",
}

#: Columns left out, in this order, while the text table is wider than its width (the
#: terminal's; ``paprof table --wide`` keeps them all). What tells rows apart (variant,
#: kernel, time, the label) stays; the kernel name is shortened before any of these go.
_DROP_FIRST = ("block_size", "grid_size", "waves_per_sm", "theoretical_occupancy_pct",
               "registers_per_thread", "occupancy_limiter", "achieved_bandwidth_gbs",
               "sm_throughput_pct", "l2_throughput_pct", "l1_throughput_pct",
               "achieved_occupancy_pct", "gpu", "step", "launch", "shape")
_DROP_FIRST_TRAFFIC = ("shared_store_bank_conflicts", "shared_store_wavefronts", "l1_to_l2_bytes",
                       "l1_global_store_bytes", "dram_bytes_write", "l1_hit_rate_pct",
                       "l2_hit_rate_pct", "shared_load_bank_conflicts", "global_load_instructions",
                       "gpu", "step", "launch", "shape")
_KERNEL_NARROW = (24, 16)
"""The kernel column's width on a narrow terminal; the second when the columns left out
were not enough (``fmt.abbreviated``: the rows' common prefix goes first)."""
_VARIANT_NARROW = 16

#: Columns shown only when the rows differ in them.
_OPTIONAL_TEXT = ("shape", "gpu", "launch", "step")
_JOINED = ("bottleneck_evidence", "kernels")
_NESTED = ("rules", "sidecar")
_KERNEL_WIDTH = 40


def parse_columns(spec, df: pd.DataFrame) -> list[str] | None:
    """Column names from ``--columns`` values ("a,b" or several); None when not given.
    UserError naming the unknown ones."""
    if not spec:
        return None
    items = spec if isinstance(spec, (list, tuple)) else [spec]
    names = [n.strip() for item in items for n in str(item).split(",") if n.strip()]
    unknown = [n for n in names if n not in df.columns]
    if unknown:
        raise UserError(f"unknown column(s): {', '.join(unknown)}; "
                        f"known: {', '.join(df.columns)}")
    return names


def scalar_frame(df: pd.DataFrame, columns: list[str] | None = None) -> pd.DataFrame:
    """The scalar columns (list columns joined with " | ", nested ones dropped)."""
    chosen = [c for c in (columns or list(df.columns)) if c not in _NESTED]
    out = df[chosen].copy()
    for column in _JOINED:
        if column in out:
            out[column] = out[column].map(
                lambda v: " | ".join(map(str, v)) if isinstance(v, (list, tuple)) else "")
    return out


def _format_value(column: str, value, compact: bool = False) -> str:
    if isinstance(value, float):
        if math.isnan(value):
            return "-"
        entry = M.BY_COLUMN.get(column)
        unit = entry.unit if entry else ""
        if compact and unit == "byte":
            return fmt.bytes_decimal(value)
        if compact and unit in ("inst", "sector", "request", "wavefront", "conflict"):
            return fmt.big(value)
        if unit in ("block", "thread", "register", "cycle", "byte", "SM"):
            return f"{value:,.0f}" if abs(value) >= 1e5 else f"{value:.0f}"
        if column == "waves_per_sm":
            return f"{value:.2f}"
        if column == "duration_us":
            return f"{value:,.1f}"
        return f"{value:.1f}"
    if column == "kernel" and isinstance(value, str) and len(value) > _KERNEL_WIDTH:
        return safetext.shown(fmt.shorten_identifier(value, _KERNEL_WIDTH))
    return safetext.shown(value)


def _table_text(df: pd.DataFrame, columns: list[str], headers: dict, compact: bool,
                kernel_width: int) -> str:
    shown = scalar_frame(df, columns)
    cells = {}
    for c in shown:
        values = [_format_value(c, v, compact=compact) for v in shown[c]]
        if c in ("variant", "kernel") and kernel_width < _KERNEL_WIDTH:
            short = fmt.abbreviated(values, kernel_width if c == "kernel" else _VARIANT_NARROW)
            values = [short[v] for v in values]
        cells[headers.get(c, c)] = values
    return pd.DataFrame(cells).to_string(index=False)


def to_text(df: pd.DataFrame, columns: list[str] | None = None, why: bool = True,
            traffic: bool = False, width: int | None = None) -> str:
    """A fixed-width table (key columns, the traffic per level with ``traffic``, or
    ``columns``), then a "why" line per row. ``width``: the widest a line may be (a
    terminal's): the kernel name is shortened, then the least telling key columns are
    left out (``_DROP_FIRST``), the "why" lines wrapped; None: everything, unwrapped."""
    if df.empty:
        return "(no kernels)\n"
    headers = TRAFFIC_TEXT_COLUMNS if traffic else TEXT_COLUMNS
    named = columns is not None
    if columns is None:
        columns = [c for c in headers if c in df.columns and not (
            c in _OPTIONAL_TEXT and df[c].astype(str).nunique() <= 1)]
    table = _table_text(df, columns, headers, traffic, _KERNEL_WIDTH)
    if width is not None and not named:
        columns = list(columns)
        kernel_width = _KERNEL_NARROW[0]
        table = _table_text(df, columns, headers, traffic, kernel_width)
        for column in (*(_DROP_FIRST_TRAFFIC if traffic else _DROP_FIRST), None):
            if max(map(len, table.splitlines())) <= width:
                break
            if column is None:
                kernel_width = _KERNEL_NARROW[1]
            elif column in columns and len(columns) > 3:
                columns.remove(column)
            table = _table_text(df, columns, headers, traffic, kernel_width)
    lines = [table]
    if why and "bottleneck_evidence" in df and "bottleneck" in df:
        lines.append("")
        several_shapes = df["shape"].nunique() > 1
        per_case = df.groupby(["variant", "shape"])["kernel"].transform("nunique")
        for (_, row), kernels in zip(df.iterrows(), per_case):
            evidence = row["bottleneck_evidence"] or []
            name = safetext.shown(row["variant"])
            if several_shapes:
                name += f" [{safetext.shown(_short_shape(row))}]"
            if kernels > 1:
                name += f"/{_format_value('kernel', row['kernel'])}"
            said = safetext.shown(f"{name}: {row['bottleneck']}: " + "; ".join(evidence[:2]),
                                  limit=None)
            lines.extend([said] if width is None else fmt.wrapped(said, width))
    return "\n".join(lines) + "\n"


def _short_shape(row) -> str:
    """The run store's shape slug when the sidecar has one, else the shape text."""
    side = row.get("sidecar") if hasattr(row, "get") else None
    if isinstance(side, Mapping) and side.get("shape_slug"):
        return str(side["shape_slug"])
    return str(row["shape"])


def missing_note(df: pd.DataFrame, columns: list[str] | None = None) -> str | None:
    """One line naming the absent columns (of ``columns``, else the
    docs/architecture.md ones, ``metrics.DESIGN_COLUMNS``) and
    the sections that would supply them; None when nothing is missing."""
    missing = df.attrs.get("missing", {})
    wanted = columns if columns is not None else list(M.DESIGN_COLUMNS)
    by_section: dict[str, list[str]] = {}
    for column in wanted:
        if column in missing and missing[column] not in M.OPT_IN_SECTIONS:
            by_section.setdefault(missing[column], []).append(column)
    if not by_section:
        return None
    parts = [f"{', '.join(cols)} (section {section})" for section, cols in by_section.items()]
    return "note: not recorded in these reports, shown as NaN/-: " + "; ".join(parts)


PARQUET_EXTRA = ("--format parquet needs pyarrow, which paprof installs only with its parquet "
                 "extra: pip install 'paprof[parquet]'")
"""The one line a missing pyarrow gives (exit 2): pyarrow (170 MB) is an extra, not a
dependency, since only this format needs it."""


def have_pyarrow() -> bool:
    """Whether ``import pyarrow`` works here (it is the ``parquet`` extra)."""
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return False
    return True


STDOUT = "-"
"""``out`` for stdout (``paprof.commands.STDOUT``)."""


def check_output(fmt: str, out: Path | str | None, force: bool = False, inputs=()) -> None:
    """UserError now (before any loading) for an output ``fmt`` cannot be written to:
    see ``paprof.outputs.check_target`` (an existing ``out`` needs ``force``)."""
    if fmt not in FORMATS:
        raise UserError(f"unknown format {fmt!r}; known: {', '.join(FORMATS)}")
    if fmt == "parquet":
        if out is None:
            raise UserError("--format parquet writes a binary file: give --out FILE.parquet "
                            "(or --out - for stdout)")
        if not have_pyarrow():
            raise UserError(PARQUET_EXTRA)
    if out not in (None, STDOUT):
        outputs.check_target(out, force=force, inputs=inputs)


def render(df: pd.DataFrame, fmt: str, columns: list[str] | None = None,
           out: Path | str | None = None, force: bool = False,
           traffic: bool = False, width: int | None = None) -> str | bytes | None:
    """The table in ``fmt``; written to ``out`` when given (then returns None; atomically,
    never over one of the reports read, an existing file only with ``force``), else
    returned as text (``out`` None or "-"; parquet: bytes, for "-"). Parquet needs ``out``
    and pyarrow (UserError otherwise). ``traffic``:
    the traffic-per-level columns (text: compact units), unless ``columns`` names others."""
    reports = df["report_path"].dropna().unique() if "report_path" in df else []
    check_output(fmt, out, force, input_files(reports))
    if traffic and columns is None and fmt != "text":
        columns = [c for c in TRAFFIC_TEXT_COLUMNS if c in df.columns]
    if fmt == "text":
        text = to_text(df, columns, why=not traffic, traffic=traffic, width=width)
    elif fmt == "csv":
        text = scalar_frame(df, columns).to_csv(index=False)
        if out is None:  # to a terminal: no cell may act on it
            text = safetext.shown(text, limit=None, newlines=True)
    elif fmt == "json":
        text = scalar_frame(df, columns).to_json(orient="records", indent=1) + "\n"
    else:
        frame = scalar_frame(df, columns)
        if out == STDOUT:
            import io

            buffer = io.BytesIO()
            frame.to_parquet(buffer, index=False, engine="pyarrow")
            return buffer.getvalue()
        outputs.write(out, lambda tmp: frame.to_parquet(tmp, index=False, engine="pyarrow"))
        return None
    if out in (None, STDOUT):
        return text
    outputs.write(out, text)
    return None
