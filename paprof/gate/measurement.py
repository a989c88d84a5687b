"""Measuring a table of runs the same way on both sides: one value per profiled launch, the
latest report per (family, variant, shape), median and half-range."""

from __future__ import annotations

import math
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Sequence

from paprof.errors import UserError
from paprof.gate import environment, same_code
from paprof.gate.baseline import Baseline, Entry, Provenance, Stat
from paprof.gate.rules import DEFAULT_METRICS, GATE_RULES, rule
from paprof.read.record import as_record
from paprof.progress import tick
from paprof.model.gpus import ceiling_for
from paprof.gate.cause import with_counters
from paprof.read.store import Scan


def _text(value: object) -> str | None:
    if value is None or value == "" or (isinstance(value, float) and math.isnan(value)):
        return None
    return str(value)


def _sidecar(row) -> dict:
    side = row.get("sidecar") if hasattr(row, "get") else None
    return as_record(side) or {}


def _created(report: object, side: dict) -> float:
    """When a report was made: the sidecar's ``created``, else the file's mtime."""
    text = side.get("created")
    if text:
        try:
            stamp = datetime.fromisoformat(str(text))
        except ValueError:
            pass
        else:
            if stamp.tzinfo is None:
                stamp = stamp.replace(tzinfo=timezone.utc)
            return stamp.timestamp()
    try:
        return os.path.getmtime(str(report))
    except (OSError, TypeError):
        return 0.0


def _provenance(row) -> Provenance:
    side = _sidecar(row)
    sections = side.get("sections")
    return Provenance(
        gpu=_text(side.get("gpu")) or _text(row.get("gpu")),
        ncu_version=_text(side.get("ncu_version")) or _text(row.get("ncu_version")),
        clock_control=_text(side.get("clock_control")),
        sections=tuple(sections) if isinstance(sections, (list, tuple)) else None,
        preset=_text(side.get("preset")),
        driver=_text(side.get("driver")),
        git_commit=_text(side.get("git_commit")),
        report=_text(row.get("report_path")),
        created=_text(side.get("created")),
        **same_code.provenance_fields(side), **environment.provenance_fields(side),
    )


def measure(table, metrics: Sequence[str] | None, missing_ok: bool = False) -> list[Entry]:
    """One ``Entry`` per (family, variant, shape) of ``table``.

    ``metrics`` None: each entry's family's own gate metrics (its sidecar's
    ``gate_metrics``, the family's hint), else ``DEFAULT_METRICS``.

    ``table`` has one row per profiled launch of a variant (``variant_rows``'s output):
    columns ``variant``, ``shape``, the metric columns and, where known, ``family``,
    ``gpu``, ``report_path`` and ``sidecar``. Only the latest report of each
    (family, variant, shape) counts (sidecar ``created``, else file mtime).

    A metric column that is absent or all-NaN for an entry is a ``UserError`` naming the
    section that would supply it, unless ``missing_ok`` (then the entry just lacks it).
    """
    import numpy as np
    import pandas as pd

    for col in ("variant", "shape"):
        if col not in table.columns:
            raise UserError(f"the runs table has no {col!r} column; is this a paprof table?")
    if table.empty:
        raise UserError("no profiled kernels found in the runs")
    sections = getattr(table, "attrs", {}).get("missing", {}) or {}
    # The groups are numbered by pandas (first appearance, NaN keys together, as a
    # groupby) and walked over plain arrays: indexing a frame per group and row took
    # 4.5 s for 10,000 runs.
    n = len(table)
    keys = pd.DataFrame({
        "family": (table["family"].fillna("").astype(str).to_numpy() if "family" in table
                   else np.full(n, "", dtype=object)),
        "variant": table["variant"].to_numpy(),
        "shape": table["shape"].to_numpy(),
        "report_path": (table["report_path"].to_numpy() if "report_path" in table
                        else np.full(n, None, dtype=object)),
    })
    entry_of = keys.groupby(["family", "variant", "shape"], sort=False,
                            dropna=False).ngroup().to_numpy()
    report_of = keys.groupby(["family", "variant", "shape", "report_path"], sort=False,
                             dropna=False).ngroup().to_numpy()
    rows = _Rows(table, keys["report_path"].to_numpy())
    named = [keys[k].to_numpy() for k in ("family", "variant", "shape")]
    order = np.argsort(entry_of, kind="stable")
    bounds = np.concatenate(([0], np.cumsum(np.bincount(entry_of))))

    entries = []
    for g in range(len(bounds) - 1):
        tick("measuring each variant and shape", g, len(bounds) - 1)
        members = order[bounds[g]: bounds[g + 1]]
        family, variant, shape = (_group_key(column[members[0]]) for column in named)
        reports = {}  # report group -> its rows, in first appearance
        for i, code in zip(members.tolist(), report_of[members].tolist()):
            reports.setdefault(code, []).append(i)
        latest = max(reports.values(),
                     key=lambda r: _created(rows.report[r[0]], _sidecar(rows.first(r))))
        first = rows.first(latest)
        stats = {}
        hinted = (_sidecar(first) or {}).get("gate_metrics")
        chosen = metrics or [m for m in (hinted or DEFAULT_METRICS) if m in GATE_RULES]
        for metric in chosen:
            values = _values(rows, latest, metric)
            if len(values):
                stats[metric] = Stat.of(values)
            elif not missing_ok:
                name = f"{family}/{variant}" if family else str(variant)
                hint = f" (section {sections[metric]} supplies it)" if metric in sections else ""
                raise UserError(f"{name} at {shape}: the report has no {metric}{hint}")
        entries.append(Entry(str(family), str(variant), str(shape), stats, _provenance(first)))
    return entries


def _group_key(value):
    """A group's key as pandas gives it: NaN for every missing value (None too)."""
    import pandas as pd

    return math.nan if pd.isna(value) else value


class _Rows:
    """The columns of a runs table as arrays, read per group of row numbers."""

    _ROW = ("sidecar", "gpu", "ncu_version", "report_path")
    """The columns a group's first row is asked for (``_provenance``, ``_ceiling_tbs``)."""

    def __init__(self, table, report):
        self.table = table
        self.report = report
        self.columns = set(table.columns)
        self._arrays: dict = {}

    def array(self, column: str):
        if column not in self._arrays:
            self._arrays[column] = self.table[column].to_numpy()
        return self._arrays[column]

    def first(self, members: list[int]) -> dict:
        """The first row of ``members``: its ``_ROW`` columns that the table has."""
        i = members[0]
        row = {c: self.array(c)[i] for c in self._ROW if c in self.columns}
        row["report_path"] = self.report[i]
        return row

    def values(self, members: list[int], column: str) -> list[float] | None:
        """``column``'s values in ``members`` that are not missing, as floats (None
        without the column)."""
        import pandas as pd

        if column not in self.columns:
            return None
        values = self.array(column)[members]
        return [float(v) for v in values[~pd.isna(values)]]


def _event_samples(side: dict) -> list[float]:
    """The launcher's CUDA-event-timed durations the sidecar kept (``duration_us_all``),
    else its median alone."""
    samples = side.get("duration_us_event_all")
    if isinstance(samples, list) and samples:
        return [float(v) for v in samples]
    median = side.get("duration_us_event")
    return [float(median)] if isinstance(median, (int, float)) and median > 0 else []


def _ceiling_tbs(row) -> float | None:
    ceiling = ceiling_for(_text(row.get("gpu")), _sidecar(row))
    return ceiling.tbs if ceiling else None


def _values(rows: _Rows, members: list[int], metric: str) -> list[float]:
    """One report's per-launch values of ``metric`` (``members``: its rows): a table
    column, or one the gate derives (the sidecar's event-timed samples; a throughput as
    % of the read ceiling, the one recorded with the run when ``check --profile``
    measured it)."""
    if metric == "duration_us_event":
        return _event_samples(_sidecar(rows.first(members)))
    if metric in ("work_tbs_pct_of_ceiling", "dram_bandwidth_pct_of_ceiling"):
        column, scale = (("work_tbs", 1.0) if metric.startswith("work")
                         else ("achieved_bandwidth_gbs", 1e-3))
        ceiling = _ceiling_tbs(rows.first(members))
        values = rows.values(members, column)
        if values is None or not ceiling:
            return []
        return [v * scale / ceiling * 100 for v in values]
    return rows.values(members, metric) or []


def make_baseline(
    source, metrics: Sequence[str] | None = None, variants: Sequence[str] | None = None,
    scan=None, counters: bool = True, kernels=None,
) -> Baseline:
    """A ``Baseline`` from a runs table (``variant_rows`` output) or report/runs paths.

    ``metrics`` None: each family's gate metrics (``measure``). ``counters``: record each
    entry's compact counters (``paprof.gate.cause``) from the loader's per-kernel frame
    (``load_runs``; ``kernels`` with a table as ``source``), so that a later check can name
    the cause of a regression from the baseline file alone.

    ``variants`` keeps only those (``v3`` or ``paged_decode/v3``; ``all`` or None keeps
    every variant); a name matching nothing is a ``UserError``. ``scan``: the command's
    ``store.Scan`` (``load_table``).
    """
    metrics = tuple(dict.fromkeys(metrics or ())) or None
    for metric in metrics or ():
        rule(metric)
    if hasattr(source, "columns"):
        table = source
    else:
        kernels, table = load_runs(source, variants, scan)
    entries = select_variants(measure(table, metrics), variants)
    if counters and kernels is not None:
        entries = with_counters(entries, kernels, table)
    stamp = datetime.now(timezone.utc).isoformat(timespec="seconds")
    return Baseline(entries=entries, created=stamp)


def select_variants(entries: list[Entry], variants: Sequence[str] | None) -> list[Entry]:
    """Entries whose ``variant`` or ``family/variant`` is named; all for None or ``all``."""
    if not variants or "all" in variants:
        return entries
    chosen = [e for e in entries if e.variant in variants or e.name in variants]
    unknown = [v for v in variants if not any(v in (e.variant, e.name) for e in entries)]
    if unknown:
        have = ", ".join(sorted({e.name for e in entries}))
        raise UserError(f"no runs of {', '.join(unknown)}; the runs hold: {have}")
    return chosen


def load_runs(paths, variants: Sequence[str] | None = None, scan=None):
    """``(kernels, table)`` of report files or run folders: the loader's frame (one row per
    kernel launch, what the cause decomposes) and the per-launch variant table
    (``variant_rows``, what is measured).

    With ``variants`` (``v3`` or ``paged_decode/v3``; ``all`` for every one) only those
    variants' reports are read, so that an unrelated broken report cannot block the gate.
    ``scan``: the command's ``store.Scan`` (a new one by default), so that the store is
    read once: its runs are chosen, then loaded, without reading each sidecar again.
    """
    scan = scan if scan is not None else Scan()
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    paths = [Path(p) for p in paths]
    if variants and "all" not in variants:
        runs = [run for p in paths for run in scan.find_runs(p)]
        chosen = [r.report for r in runs if r.variant in variants or r.name in variants]
        if not chosen:
            held = ", ".join(sorted({r.name for r in runs})) or "no runs"
            where = ", ".join(map(str, paths))
            raise UserError(f"no runs of {', '.join(variants)} in {where}; it holds: {held}")
        if len(chosen) < len(runs):  # else the folders themselves: scanned once, not 10,000 paths
            paths = chosen
    from paprof.model.load import load_reports, variant_rows  # pandas: only when runs are read

    kernels = load_reports(paths, scan=scan)
    return kernels, variant_rows(kernels)


def load_table(paths, variants: Sequence[str] | None = None, scan=None):
    """The per-launch variant table (``variant_rows``) of report files or run folders
    (``load_runs``)."""
    return load_runs(paths, variants, scan)[1]
