"""The side-by-side table and the traffic-per-level table, as text.

``build_table(cmp, series)`` turns each variant's values (``paprof.explain.series``)
into rows of cells: the value's text, its change from the variant the step starts at and
whether that change moved past its threshold. ``fold_same_rows`` leaves out a row that
repeats another's values.
"""

from __future__ import annotations

from dataclasses import dataclass

from paprof.explain import fmt
from paprof.explain.compare import Comparison, VariantResult, bound_words


@dataclass
class Cell:
    """One variant's value in one table row, and its change from the previous variant."""

    value: object
    """Raw value (None where absent)."""
    text: str
    delta: float | None = None
    """Raw change from the previous variant: points for percentages, a ratio - 1 otherwise."""
    delta_text: str = ""
    trend: str = ""
    """``better``, ``worse`` (duration only), ``moved`` (past its threshold) or empty."""
    spread: float | None = None
    """Half the range over several profiled launches (``value`` is then their median)."""


@dataclass
class TableRow:
    key: str
    label: str
    meaning: str
    cells: list[Cell]
    text: bool = False
    """A row of words rather than numbers (the template lets it wrap)."""
    note: str = ""
    """Why its numbers hold together with another row's that seem to contradict them
    (``paprof.explain.contradictions``), printed beside the row."""


@dataclass
class TableSection:
    title: str
    rows: list[TableRow]

    def row(self, key: str) -> TableRow:
        return next(r for r in self.rows if r.key == key)


# -- the side-by-side table --------------------------------------------------------------
@dataclass(frozen=True)
class RowSpec:
    key: str
    label: str
    kind: str
    """A ``paprof.explain.fmt.FORMATTERS`` key, or ``text``."""
    delta: str = "rel"
    """``rel`` (percent change), ``pts`` (points), ``text`` (changed or not) or ``none``."""
    better: str | None = None
    """``lower`` or ``higher`` when one direction is plainly better (duration)."""
    meaning: str = ""
    compare_key: str | None = None
    """For a text row: the series key whose change counts (default: ``key``)."""


TABLE: tuple[tuple[str, tuple[RowSpec, ...]], ...] = (
    ("Time", (
        RowSpec("duration_us", "Duration (ncu)", "duration_us", better="lower"),
        RowSpec("duration_us_event", "Duration (CUDA events, no profiler)", "duration_us", better="lower",
                meaning="Median CUDA-event time of the launch sequence without ncu (from the run's sidecar)"),
        RowSpec("speedup_prev", "Speedup over the previous variant", "ratio", delta="none",
                meaning="Previous variant's ncu duration over this one's"),
        RowSpec("speedup_first", "Speedup over the first variant", "ratio", delta="none",
                meaning="First variant's ncu duration over this one's"),
        RowSpec("elapsed_cycles", "Elapsed cycles", "big"),
    )),
    ("Speed of light (% of peak)", (
        RowSpec("sm_throughput_pct", "SM throughput", "pct", "pts"),
        RowSpec("memory_throughput_pct", "Memory throughput", "pct", "pts"),
        RowSpec("dram_throughput_pct", "DRAM throughput", "pct", "pts"),
        RowSpec("l1_throughput_pct", "L1 throughput", "pct", "pts"),
        RowSpec("l2_throughput_pct", "L2 throughput", "pct", "pts"),
    )),
    ("DRAM", (
        RowSpec("dram_active_cycles", "DRAM active cycles", "big"),
        RowSpec("dram_bytes", "DRAM bytes", "bytes"),
        RowSpec("achieved_bandwidth_gbs", "Achieved bandwidth", "bandwidth_gbs"),
        RowSpec("bandwidth_of_ceiling_pct", "Of the bandwidth ceiling", "pct", "pts",
                meaning="Achieved bandwidth over the GPU's measured read ceiling (or datasheet)"),
    )),
    ("Work model (the family's bytes and FLOPs over the duration)", (
        RowSpec("work_bytes", "Bytes that must move", "bytes"),
        RowSpec("work_gbs", "Useful bandwidth", "bandwidth_gbs",
                meaning="The bytes the problem must move over the duration (ncu's): what the "
                "kernel achieves of the work, whatever extra traffic it makes"),
        RowSpec("work_of_ceiling_pct", "Useful bandwidth, of the ceiling", "pct", "pts",
                meaning="Useful bandwidth over the GPU's measured read ceiling (or datasheet)"),
        RowSpec("work_tflops", "Useful FLOP rate", "flop_rate"),
    )),
    ("Occupancy", (
        RowSpec("theoretical_occupancy_pct", "Theoretical occupancy", "pct", "pts"),
        RowSpec("achieved_occupancy_pct", "Achieved occupancy", "pct", "pts"),
        RowSpec("limited_by", "Limited by", "text", "text",
                meaning="The per-SM block limit(s) that bind: the smallest of the four below"),
        RowSpec("registers_per_thread", "Registers per thread", "count"),
        RowSpec("shared_mem_per_block_bytes", "Shared memory per block", "bytes_binary"),
        RowSpec("block_limit_registers", "Block limit: registers", "count"),
        RowSpec("block_limit_shared_mem", "Block limit: shared memory", "count"),
        RowSpec("block_limit_warps", "Block limit: warps", "count"),
        RowSpec("block_limit_blocks", "Block limit: blocks per SM", "count"),
    )),
    ("Launch", (
        RowSpec("grid_size", "Grid size (CTAs)", "count"),
        RowSpec("block_size", "Block size (threads)", "count"),
        RowSpec("waves_per_sm", "Waves per SM", "number"),
    )),
    ("Warps", (
        RowSpec("issue_active_pct", "Issue active", "pct", "pts"),
        RowSpec("top_stall", "Top warp stall", "text", "text",
                meaning="The stall reason with the most warp cycles per issued instruction "
                "(in parentheses: those cycles)", compare_key="top_stall_reason"),
    )),
    ("Verdict", (
        RowSpec("bottleneck", "Bottleneck", "text", "text"),
    )),
)
"""The table's sections and rows, in display order."""

_TRAFFIC_ROWS = (
    ("SM <-> L1 (global memory)", (
        ("global_load_instructions", "Global load instructions", "big"),
        ("l1_global_load_requests", "Load requests to L1", "big"),
        ("l1_global_load_bytes", "Bytes loaded from L1", "bytes"),
        ("bytes_per_global_load", "Bytes per load instruction", "number",
         "Bytes loaded from L1 over the global load instructions (512 for a warp of 16-byte "
         "loads, 32 when every lane reads the same 4 bytes)"),
        ("l1_load_per_dram_byte", "Bytes loaded from L1 per DRAM byte", "number",
         "SM <- L1 load bytes over DRAM bytes: how often each byte from DRAM is read by the SMs"),
        ("global_store_instructions", "Global store instructions", "big"),
        ("l1_global_store_bytes", "Bytes stored through L1", "bytes"),
    )),
    ("Shared memory", (
        ("shared_load_instructions", "Load instructions", "big"),
        ("shared_store_instructions", "Store instructions", "big"),
        ("shared_load_wavefronts", "Load wavefronts", "big"),
        ("shared_store_wavefronts", "Store wavefronts", "big"),
        ("shared_bank_conflicts", "Bank conflicts (loads + stores)", "big",
         "Extra wavefronts that bank conflicts cost, loads and stores"),
    )),
    ("L1 <-> L2", (
        ("l1_global_load_hit_rate_pct", "L1 hit rate, global loads", "pct"),
        ("l1_hit_rate_pct", "L1 hit rate, all", "pct"),
        ("l2_to_l1_bytes", "Bytes L2 -> SM (L1)", "bytes"),
        ("l2_to_sm_per_dram_byte", "L2 -> SM bytes per DRAM byte", "number",
         "Bytes the crossbar delivered to the SMs over DRAM bytes: 1 when each byte from DRAM "
         "reaches one SM once"),
        ("l2_read_sectors_from_l1", "L2 sectors read for L1", "big"),
        ("l1_to_l2_bytes", "Bytes L1 -> L2", "bytes"),
        ("l2_write_sectors_from_l1", "L2 sectors written by L1", "big"),
    )),
    ("L2 <-> DRAM", (
        ("l2_hit_rate_pct", "L2 hit rate", "pct"),
        ("dram_bytes_read", "DRAM bytes read", "bytes"),
        ("dram_bytes_write", "DRAM bytes written", "bytes"),
    )),
    ("Instructions", (
        ("instructions_executed", "Warp instructions executed", "big"),
        ("instructions_per_dram_byte", "Warp instructions per DRAM byte", "number",
         "Warp-level instructions executed over DRAM bytes"),
    )),
)


def _traffic_row(key: str, label: str, kind: str, meaning: str = "") -> RowSpec:
    """A traffic row: percentages change in points, everything else relatively."""
    return RowSpec(key, label, kind, "pts" if kind == "pct" else "rel", meaning=meaning)


TRAFFIC_TABLE: tuple[tuple[str, tuple[RowSpec, ...]], ...] = tuple(
    (title, tuple(_traffic_row(*row) for row in rows)) for title, rows in _TRAFFIC_ROWS)
"""The traffic-per-level table: each memory level's counters, from the SM outwards."""


SAME_ROWS = (
    ("global_load_instructions", "l1_global_load_requests"),
    ("l1_global_load_hit_rate_pct", "l1_hit_rate_pct"),
    ("l1_global_store_bytes", "l1_to_l2_bytes"),
    ("achieved_bandwidth_gbs", "work_gbs"),
    ("bandwidth_of_ceiling_pct", "work_of_ceiling_pct"),
)
"""Rows that often say the same thing (each load instruction one L1 request; only global
loads through L1; every stored byte on to L2; DRAM moving the bytes the work model asks
for): where every variant's values agree, the second row is folded into the first."""


def _agree(a, b, pct: bool) -> bool:
    if a is None or b is None:
        return a is None and b is None
    a, b = float(a), float(b)
    if pct:
        return abs(a - b) <= 0.5
    return a == b or abs(a - b) <= 0.01 * max(abs(a), abs(b))


def fold_same_rows(sections: list[TableSection], pairs=SAME_ROWS) -> list[TableSection]:
    """``sections`` with the second row of each pair of ``pairs`` left out where every
    variant's value agrees with the first's (within 1 %, or 0.5 points for percentages);
    the first row's label then names both, so no number is shown twice."""
    rows = {r.key: r for sec in sections for r in sec.rows}
    drop = set()
    for keep, other in pairs:
        a, b = rows.get(keep), rows.get(other)
        if a is None or b is None or a.key in drop:
            continue
        pct = keep.endswith("_pct")
        if all(_agree(x.value, y.value, pct) for x, y in zip(a.cells, b.cells)):
            drop.add(other)
            other_label = b.label if b.label[1:2].isupper() else b.label[0].lower() + b.label[1:]
            a.label = f"{a.label} = {other_label}"
            a.meaning = (f"{a.meaning} Equal here, for every variant, to: {b.label}"
                         f"{' (' + b.meaning + ')' if b.meaning else ''}.").strip()
    out = []
    for sec in sections:
        kept = [r for r in sec.rows if r.key not in drop]
        if kept:
            out.append(TableSection(sec.title, kept))
    return out


def _meaning(spec: RowSpec) -> str:
    if spec.meaning:
        return spec.meaning
    try:
        from paprof.read.metrics import BY_COLUMN
    except ImportError:  # pragma: no cover - the catalogue always ships
        return ""
    entry = BY_COLUMN.get(spec.key)
    return entry.meaning if entry else ""


def _cell_text(spec: RowSpec, value) -> str:
    if spec.key == "bottleneck":
        return bound_words(value)
    if spec.kind == "text":
        return fmt.MISSING if value is None else str(value)
    return fmt.FORMATTERS[spec.kind](value)


def _cell(spec: RowSpec, value, before, moved: bool | None) -> Cell:
    cell = Cell(value=value, text=_cell_text(spec, value))
    if before is _FIRST or spec.delta == "none":
        return cell
    if spec.delta == "text":
        if value is not None and before is not None and value != before:
            cell.delta_text = "changed"
            cell.trend = "moved"
        return cell
    if fmt.is_missing(value) or fmt.is_missing(before):
        return cell
    value, before = float(value), float(before)
    if spec.delta == "pts":
        cell.delta = value - before
        cell.delta_text = fmt.signed_pts(cell.delta)
    else:
        if before == 0:
            cell.delta = None
            cell.delta_text = "" if value == 0 else "new"
        else:
            cell.delta = value / before - 1
            # one unit per row: a relative change is always a percentage (+1,500 %, not 16x)
            cell.delta_text = fmt.signed_pct(cell.delta * 100)
        if value == before:
            cell.delta_text = "="
    if moved is None:
        moved = value != before
    if moved:
        if spec.better == "lower":
            cell.trend = "better" if value < before else "worse"
        elif spec.better == "higher":
            cell.trend = "better" if value > before else "worse"
        else:
            cell.trend = "moved"
    return cell


_FIRST = object()


def _with_spread(cell: Cell, spec: RowSpec, v: VariantResult) -> Cell:
    """A number over several profiled launches reads as median ± half-range (a number
    every launch agrees on reads as itself)."""
    spread = v.spread.get(spec.key) if v.launches > 1 else None
    if spread is not None and spec.kind != "text" and not fmt.is_missing(cell.value):
        cell.spread = spread
        if spread > 0:
            cell.text = f"{cell.text} ± {fmt.FORMATTERS[spec.kind](spread)}"
    return cell


def build_table(cmp: Comparison, series: dict[str, dict], layout=TABLE
                ) -> tuple[list[TableSection], list[str]]:
    """The side-by-side table (or another ``layout`` of sections and rows: the traffic
    table), and the labels of rows left out because no variant has them."""
    sections, absent = [], []
    steps_to = {s.after: s for s in cmp.steps}
    for title, specs in layout:
        rows = []
        for spec in specs:
            cells = []
            for i, v in enumerate(cmp.variants):
                value = series[v.label].get(spec.key)
                if i == 0:
                    cells.append(_with_spread(_cell(spec, value, _FIRST, None), spec, v))
                    continue
                step = steps_to.get(v.label)
                if step is None:  # the baseline of a star: no step ends at it
                    cells.append(_with_spread(_cell(spec, value, _FIRST, None), spec, v))
                    continue
                prev_values = series[step.before]
                if spec.compare_key:
                    cell = _cell(spec, value, _FIRST, None)
                    now, then = series[v.label].get(spec.compare_key), prev_values.get(spec.compare_key)
                    if now is not None and then is not None and now != then:
                        cell.delta_text, cell.trend = "changed", "moved"
                    cells.append(cell)
                    continue
                delta = step.deltas.get(spec.key)
                cells.append(_with_spread(_cell(spec, value, prev_values.get(spec.key),
                                                delta.moved if delta else None), spec, v))
            if all(c.value is None for c in cells):
                absent.append(spec.label)
                continue
            rows.append(TableRow(spec.key, spec.label, _meaning(spec), cells, spec.kind == "text"))
        if rows:
            sections.append(TableSection(title, rows))
    return sections, absent


def attach_notes(sections: list[TableSection], contradictions) -> None:
    """Each contradiction's reason on the row it is about (``Contradiction.key``)."""
    notes = {c.key: c.text for c in contradictions}
    for sec in sections:
        for row in sec.rows:
            if row.key in notes:
                row.note = notes[row.key]
