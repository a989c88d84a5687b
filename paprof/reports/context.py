"""The one object the report templates display.

``build_context(comparison)`` turns a ``paprof.analysis.compare.Comparison`` into a
``ReportContext``: plain dataclasses holding, for every number, its raw value (for tests
and for the charts) and its text (for the templates). The HTML and the Markdown
templates read the same context; neither computes anything.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone

from paprof import __version__
from paprof.analysis import fmt
from paprof.analysis.compare import (
    STALL_COLUMNS,
    Comparison,
    RuleChange,
    VariantResult,
    binding_limits,
    bound_words,
    code_path,
    limiter_name,
    verdict_words,
)
from paprof.reports import charts as chart_lib
from paprof.reports.charts import ChartView

# -- the context's parts ----------------------------------------------------------------


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


@dataclass
class TableSection:
    title: str
    rows: list[TableRow]

    def row(self, key: str) -> TableRow:
        return next(r for r in self.rows if r.key == key)


@dataclass
class KernelView:
    name: str
    duration_us: float | None
    duration: str
    share: float | None
    share_text: str
    grid: str
    block: str
    bottleneck: str


@dataclass
class VariantView:
    label: str
    variant: str
    family: str | None
    idea: str | None
    shape: str | None
    gpu: str | None
    duration_us: float | None
    duration: str
    bottleneck: str | None
    bottleneck_text: str
    evidence: list[str]
    kernels: list[KernelView]
    report: str | None
    code_path: str | None = None
    """The code path the run took at launch (``launch_details``, kernel names), if recorded."""

    @property
    def multi_kernel(self) -> bool:
        return len(self.kernels) > 1


@dataclass
class RuleView:
    kind: str
    id: str
    title: str
    text: str
    before: str
    after: str
    message: str
    kernel: str | None = None
    """The kernel the rule is about (a variant of several kernels only)."""


@dataclass
class StepView:
    before: str
    after: str
    title: str
    """``v2 -> v3``"""
    headline: str
    speedup: float | None
    speedup_text: str
    verdict: str
    """``faster``, ``slower`` or ``same``."""
    bottleneck_before: str | None
    bottleneck_after: str | None
    bottleneck_before_text: str
    bottleneck_after_text: str
    sentences: list[str]
    summary: str
    evidence_after: list[str]
    rules: list[RuleView]
    cause: str | None = None
    """The mechanism (also ``sentences[0]``), None when the counters name none."""
    traffic: str | None = None
    """The largest traffic change in words (a detail after the cause)."""
    kernels: list = field(default_factory=list)
    """Where either side runs several kernels: one row per kernel as matched across the
    step (``KernelRowView``), matched pairs first, then gone, then new; empty otherwise."""
    kernels_total: tuple = ()
    """(before, after) step totals as text, beside ``kernels``."""
    story: list[str] = field(default_factory=list)
    """``sentences`` less those the side-by-side table already shows (a duration, launch,
    registers, occupancy, throughput, stall, traffic or bandwidth change): what the HTML
    step lists, so that no number is on the page twice."""


@dataclass
class KernelRowView:
    """One kernel of a step's kernel view: matched, gone or new, with its time each side."""

    before: str
    after: str
    before_time: str
    after_time: str
    status: str
    """``matched``, ``gone`` or ``new``."""
    launches: str
    """Launches of it in a step, before -> after (``"3 -> 3"``), where more than one."""


def kernel_rows(dec) -> list[KernelRowView]:
    """The kernel view of one step from its decomposition's pairing (``decompose``): every
    kernel name once, its launches in a step summed."""
    if dec is None or dec.pairing is None:
        return []
    p = dec.pairing
    if len(p.pairs) + len(p.gone) + len(p.new) <= 1 and not p.gone and not p.new:
        return []
    dash = "-"

    def n(k):
        return getattr(k, "launches", 1)

    rows = [KernelRowView(a.kernel, b.kernel, fmt.duration_us(a.duration_us), fmt.duration_us(b.duration_us),
                          "matched", f"{n(a)} -> {n(b)}" if max(n(a), n(b)) > 1 else "")
            for a, b in p.pairs]
    rows += [KernelRowView(a.kernel, dash, fmt.duration_us(a.duration_us), dash, "gone",
                           str(n(a)) if n(a) > 1 else "") for a in p.gone]
    rows += [KernelRowView(dash, b.kernel, dash, fmt.duration_us(b.duration_us), "new",
                           str(n(b)) if n(b) > 1 else "") for b in p.new]
    return rows


@dataclass
class ProvenanceView:
    columns: list[tuple[str, str]]
    """(key, heading) of each column of ``rows``."""
    rows: list[dict]
    """One per variant: key -> text."""
    common: list[tuple[str, str]]
    """(heading, text) of the fields every variant shares."""
    varying: list[tuple[str, str]]
    """(key, heading) of the columns worth a per-variant table: those that differ, and
    the ones that always identify a run (date, commit, verification, report file)."""


@dataclass
class StallView:
    """Warp stalls per variant, in cycles per issued instruction: the top reasons named,
    the rest summed as "other"."""

    reasons: list[str]
    """Reason names as shown (``long scoreboard`` ...), then ``other`` when any are grouped."""
    values: dict[str, list[float | None]]
    """label -> one value per reason (None: not recorded)."""
    rows: list[tuple[str, list[str]]]
    """(reason, text per variant) for the tables."""
    totals: dict[str, float | None]
    """label -> the sum of every stall reason shown (selected excluded)."""


@dataclass
class ReportContext:
    """Everything the templates show."""

    title: str
    subtitle: str
    summary: str
    generated: str
    paprof_version: str
    labels: list[str]
    variants: list[VariantView]
    steps: list[StepView]
    table: list[TableSection]
    charts: list[ChartView]
    provenance: ProvenanceView
    warnings: list[str]
    notes: list[str]
    ceiling_text: str
    thresholds_text: str
    absent: list[str] = field(default_factory=list)
    """Table rows left out: no variant's report or sidecar records them."""
    stalls: StallView | None = None
    """The warp-stall breakdown; None when no variant recorded WarpStateStats."""
    raw: dict = field(default_factory=dict, repr=False)
    """Raw per-variant series the charts were drawn from (label -> column -> value)."""
    ledgers: list = field(default_factory=list)
    """One ``LedgerView`` per step with both durations (``paprof.analysis.ledger``)."""
    roofline: object = None
    """The roofline's tables (``paprof.reports.views.RooflineView``); None without points."""
    hotspots: object = None
    """The source hot spots (``paprof.reports.views.HotspotsView``); None without
    SourceCounters in the runs."""
    traffic: list[TableSection] = field(default_factory=list)
    """Traffic per memory level (:data:`TRAFFIC_TABLE`); empty when no variant's report
    records it (runs of the ``basic`` preset)."""
    traffic_note: str = ""
    """Why some variant has no traffic figures, when one has none."""
    verdict: object = None
    """The verdict table (``paprof.reports.verdict_view.VerdictView``): every variant
    against the baseline; None without variants."""
    star: bool = False
    """Every step starts at the baseline (``compare --baseline``): deltas are against it,
    not against the variant to the left."""

    def section(self, title: str) -> TableSection:
        return next(s for s in self.table if s.title == title)

    def row(self, key: str) -> TableRow:
        for s in self.table:
            for r in s.rows:
                if r.key == key:
                    return r
        raise KeyError(key)


# -- the side-by-side table --------------------------------------------------------------
@dataclass(frozen=True)
class RowSpec:
    key: str
    label: str
    kind: str
    """A ``paprof.analysis.fmt.FORMATTERS`` key, or ``text``."""
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
        from paprof.analysis.metrics import BY_COLUMN
    except ImportError:  # pragma: no cover - the catalogue always ships
        return ""
    entry = BY_COLUMN.get(spec.key)
    return entry.meaning if entry else ""


def _series(cmp: Comparison) -> dict[str, dict]:
    """label -> column -> raw value, including the derived rows of the table."""
    out: dict[str, dict] = {}
    first = cmp.variants[0].get("duration_us") if cmp.variants else None
    prev = None
    for v in cmp.variants:
        values = dict(v.values)
        dur = values.get("duration_us")
        values["speedup_prev"] = (prev / dur) if (prev and dur) else None
        values["speedup_first"] = (first / dur) if (first and dur) else None
        values["bottleneck"] = v.bottleneck
        reason, cycles = values.get("top_stall_reason"), values.get("top_stall_cycles")
        values["top_stall"] = (f"{reason.replace('_', ' ')} ({fmt.number(cycles, 2)})"
                               if reason else None)
        names, blocks = binding_limits(v)
        values["limited_by"] = " + ".join(limiter_short(n) for n in names) or None
        values["limited_by_blocks"] = blocks
        out[v.label] = values
        prev = dur
    return out


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


# -- variants, steps, provenance ----------------------------------------------------------
def _variant_view(v: VariantResult) -> VariantView:
    kernels = [
        KernelView(
            name=k.kernel,
            duration_us=k.duration_us,
            duration=fmt.duration_us(k.duration_us),
            share=k.share,
            share_text=fmt.pct(k.share * 100) if k.share is not None else fmt.MISSING,
            grid=fmt.count(k.grid_size),
            block=fmt.count(k.block_size),
            bottleneck=bound_words(k.bottleneck),
        )
        for k in v.kernels
    ]
    return VariantView(
        label=v.label,
        variant=v.variant,
        family=v.family,
        idea=v.idea,
        shape=v.shape,
        gpu=v.gpu,
        duration_us=v.get("duration_us"),
        duration=fmt.duration_us(v.get("duration_us")),
        bottleneck=v.bottleneck,
        bottleneck_text=verdict_words(v),
        evidence=list(v.evidence),
        kernels=kernels,
        report=v.report_path,
        code_path=code_path(v),
    )


def _rule_view(c: RuleChange) -> RuleView:
    def est(p):
        if p is not None and 0 < p < 0.05:  # a small kernel's share of a variant's time
            return "< 0.1 %"
        return fmt.pct(p) if p is not None else ("-" if c.kind != "changed" else fmt.MISSING)

    return RuleView(c.kind, c.id, c.title, c.text,
                    est(c.before_pct) if c.kind != "appeared" else "absent",
                    est(c.after_pct) if c.kind != "disappeared" else "absent",
                    c.message, c.kernel)


def table_sentences(cmp: Comparison, step) -> set[str]:
    """The sentences of ``step`` that repeat rows of the side-by-side table (told again
    by the same sentence functions ``tell`` used: ``TABLE_SENTENCES``)."""
    from paprof.analysis.compare import sentences as told

    before, after = cmp.variant(step.before), cmp.variant(step.after)
    out: set[str] = set()
    for name in TABLE_SENTENCES:
        said = getattr(told, name)(before, after, step.deltas, cmp.thresholds)
        if isinstance(said, str):
            out.add(said)
        elif said:
            out.update(said)
    return out


TABLE_SENTENCES = ("duration_sentence", "launch_sentence", "registers_sentence",
                   "shared_memory_sentence", "occupancy_sentence", "throughput_sentences",
                   "stall_sentence", "dram_traffic_sentence", "bandwidth_sentence", "work_sentence")
"""The sentence functions (``paprof.analysis.compare.sentences``) whose sentences say a
change the side-by-side table shows in its rows."""


def _step_views(cmp: Comparison) -> list[StepView]:
    views = []
    for s in cmp.steps:
        after = cmp.variant(s.after)
        repeats = table_sentences(cmp, s)
        if s.speedup is None:
            verdict = "same"
        elif not s.deltas["duration_us"].moved:
            verdict = "same"
        else:
            verdict = "faster" if s.speedup >= 1 else "slower"
        views.append(StepView(
            before=s.before,
            after=s.after,
            title=f"{s.before} -> {s.after}",
            headline=s.headline,
            speedup=s.speedup,
            speedup_text=fmt.ratio(s.speedup),
            verdict=verdict,
            bottleneck_before=s.bottleneck_before,
            bottleneck_after=s.bottleneck_after,
            bottleneck_before_text=verdict_words(cmp.variant(s.before)),
            bottleneck_after_text=verdict_words(after),
            sentences=list(s.sentences),
            story=[x for x in s.sentences if x not in repeats],
            summary=s.summary,
            evidence_after=list(after.evidence),
            rules=[_rule_view(c) for c in s.rule_changes],
            cause=s.cause,
            traffic=s.traffic,
            kernels=kernel_rows(s.decomposition),
            kernels_total=((fmt.duration_us(s.decomposition.before_us),
                            fmt.duration_us(s.decomposition.after_us))
                           if s.decomposition is not None else ()),
        ))
    return views


PROVENANCE_COLUMNS = (
    ("gpu", "GPU"),
    ("driver", "Driver"),
    ("ncu_version", "ncu"),
    ("clock_control", "Clock control"),
    ("shape", "Shape"),
    ("preset", "Preset"),
    ("date", "Profiled"),
    ("git_commit", "Commit"),
    ("verified", "Verified"),
    ("report", "Report"),
)


PER_RUN = ("date", "git_commit", "verified", "report")
"""Provenance columns shown per variant even when they agree."""


def _date_text(value) -> str | None:
    if not value:
        return None
    try:
        when = datetime.fromisoformat(str(value))
    except ValueError:
        return str(value)
    if when.tzinfo is not None:
        when = when.astimezone(timezone.utc)
        return when.strftime("%Y-%m-%d %H:%M UTC")
    return when.strftime("%Y-%m-%d %H:%M")


def _provenance_view(cmp: Comparison) -> ProvenanceView:
    rows = []
    for p in cmp.provenance:
        row = {"label": p.label}
        for key, _ in PROVENANCE_COLUMNS:
            if key == "date":
                value = _date_text(p.created)
            elif key == "git_commit":
                value = p.commit_text
            elif key == "verified":
                value = {True: "passed", False: "FAILED", None: None}[p.verified]
                if p.unverified:
                    value = "not verified"
                if p.rel_error is not None and value:
                    value += f" (rel. error {float(p.rel_error):.1e})"
            else:
                value = getattr(p, key)
            row[key] = "unknown" if value is None else str(value)
        rows.append(row)
    common, varying = [], []
    for key, heading in PROVENANCE_COLUMNS:
        values = {r[key] for r in rows}
        if key not in PER_RUN and len(values) == 1 and rows:
            common.append((heading, rows[0][key]))
        else:
            varying.append((key, heading))
    dates = sorted({r["date"][:10] for r in rows if r["date"] != "unknown"})
    if dates:
        common.append(("Profiled", dates[0] if len(dates) == 1 else f"{dates[0]} to {dates[-1]}"))
    return ProvenanceView(list(PROVENANCE_COLUMNS), rows, common, varying)


SHORT_LIMITERS = {"registers": "registers", "shared memory": "shared mem", "warps": "warps",
                  "blocks": "blocks/SM"}
"""Occupancy limiters as a table cell or a chart tick says them."""


def limiter_short(raw) -> str | None:
    name = limiter_name(raw)
    return None if name is None else SHORT_LIMITERS.get(name, name)


# -- warp stalls -------------------------------------------------------------------------
TOP_STALLS = 5
"""Stall reasons named in the breakdown; the others are summed as "other"."""


def build_stalls(cmp: Comparison, top: int = TOP_STALLS) -> StallView | None:
    """The stall breakdown: the ``top`` reasons by their largest value over the variants,
    then "other" (``selected`` is left out: that is issuing, not stalling)."""
    columns = [c for c in STALL_COLUMNS if c != "stall_selected"]
    got = {v.label: {c: v.get(c) for c in columns if v.get(c) is not None} for v in cmp.variants}
    if not any(got.values()):
        return None
    peak = {c: max((vals.get(c) or 0.0) for vals in got.values()) for c in columns}
    named = [c for c in sorted(columns, key=lambda c: -peak[c]) if peak[c] > 0][:top]
    rest = [c for c in columns if c not in named]
    reasons = [c[len("stall_"):].replace("_", " ") for c in named]
    values: dict[str, list[float | None]] = {}
    totals: dict[str, float | None] = {}
    for label, vals in got.items():
        row = [vals.get(c) for c in named]
        if rest:
            others = [vals[c] for c in rest if c in vals]
            row.append(sum(others) if others else None)
        values[label] = row
        totals[label] = sum(vals.values()) if vals else None
    if rest:
        reasons.append("other")
    rows = [(reason, [fmt.number(values[v.label][i], 2) for v in cmp.variants])
            for i, reason in enumerate(reasons)]
    rows.append(("all stalls", [fmt.number(totals[v.label], 3) for v in cmp.variants]))
    return StallView(reasons, values, rows, totals)


# -- the time ledger ---------------------------------------------------------------------
@dataclass
class LedgerView:
    """One step's time ledger: each term (and the residual) in microseconds and as text."""

    title: str
    before_us: float
    after_us: float
    difference_text: str
    rows: list[tuple[str, str, float, str]]
    """(key, words, microseconds, text) of each term, then the residual."""
    missing: list[str]


def _signed_us(us: float) -> str:
    return ("+" if us > 0 else "-" if us < 0 else "") + fmt.duration_us(abs(us))


def build_ledgers(cmp: Comparison) -> list[LedgerView]:
    from paprof.analysis.ledger import step_ledgers

    views = []
    for led in step_ledgers(cmp):
        if led is None:
            continue
        views.append(LedgerView(
            f"{led.before} -> {led.after}", led.before_us, led.after_us, _signed_us(led.difference),
            [(k, words, us, _signed_us(us)) for k, words, us in led.rows()], list(led.missing)))
    return views


# -- charts ------------------------------------------------------------------------------
TICK_LIMITERS = {"registers": "regs", "shared memory": "smem", "warps": "warps", "blocks": "blocks"}
"""Occupancy limiters as the occupancy chart's tick labels say them (narrow columns)."""


def _limiter_tick(v: VariantResult) -> str:
    names, blocks = binding_limits(v)
    if not names:
        return ""
    text = "+".join(TICK_LIMITERS.get(n, n) for n in names)
    return f"{text}\n{fmt.count(blocks)} per SM" if blocks is not None else text


PIPE_UNITS = (("tensor pipe", "tensor_pipe_pct"), ("FMA pipe", "fma_pipe_pct"),
              ("issue active", "issue_active_pct"))
"""The units a compute-bound family's chart shows in place of DRAM bandwidth."""


LOW_DRAM_PCT = 25.0
"""A family whose DRAM throughput stays under this (% of peak) in every variant while a
math pipe works harder is not told by its DRAM bandwidth."""


def compute_family(cmp: Comparison) -> bool:
    """Whether the variants' chart is pipe utilisation rather than DRAM bandwidth: most of
    them are compute-bound, or DRAM stays under ``LOW_DRAM_PCT`` in every one while the
    tensor or FMA pipe is busier (a flash-attention family would draw 1 % DRAM bars)."""
    bound = [v.bottleneck for v in cmp.variants]
    if bound.count("compute-bound") * 2 > len(bound):
        return True

    def peak(key):
        return max((float(v.get(key)) for v in cmp.variants if v.get(key) is not None), default=None)

    dram = peak("dram_throughput_pct")
    math_pipe = max((x for x in (peak("tensor_pipe_pct"), peak("fma_pipe_pct")) if x is not None),
                    default=None)
    return dram is not None and math_pipe is not None and dram < LOW_DRAM_PCT and math_pipe > dram


def build_charts(cmp: Comparison, series: dict[str, dict], stalls: StallView | None = None,
                 ledgers: list[LedgerView] | None = None, roofline=None) -> list[ChartView]:
    labels = [v.label for v in cmp.variants]
    col = {key: [series[lab].get(key) for lab in labels] for key in (
        "sm_throughput_pct", "memory_throughput_pct", "dram_throughput_pct", "l1_throughput_pct",
        "l2_throughput_pct", "duration_us", "duration_us_event", "speedup_first",
        "achieved_bandwidth_gbs", "theoretical_occupancy_pct", "achieved_occupancy_pct")}
    ceilings = [v.ceiling for v in cmp.variants]
    measured = any(c and c.measured for c in ceilings)
    made = [
        chart_lib.speed_of_light(labels, {
            "SM": col["sm_throughput_pct"], "Memory": col["memory_throughput_pct"],
            "DRAM": col["dram_throughput_pct"], "L1": col["l1_throughput_pct"],
            "L2": col["l2_throughput_pct"]}),
        chart_lib.duration(labels, col["duration_us"], col["speedup_first"],
                        [len(v.kernels) for v in cmp.variants], col["duration_us_event"]),
        chart_lib.pipes(labels, {name: [series[lab].get(key) for lab in labels]
                                 for name, key in PIPE_UNITS})
        if compute_family(cmp) else
        chart_lib.bandwidth(labels, col["achieved_bandwidth_gbs"],
                            [c.tbs if c else None for c in ceilings],
                            [c.datasheet_tbs if c else None for c in ceilings],
                            "measured read ceiling" if measured else "datasheet bandwidth"),
        chart_lib.occupancy(labels, col["theoretical_occupancy_pct"], col["achieved_occupancy_pct"],
                         [_limiter_tick(v) for v in cmp.variants]),
    ]
    if stalls is not None:
        made.append(chart_lib.stalls(labels, stalls.reasons, [stalls.values[lab] for lab in labels]))
    if ledgers:
        made.append(chart_lib.ledger([(led.title, led.before_us, led.after_us,
                                       [(k, words, us) for k, words, us, _ in led.rows
                                        if abs(us) >= 0.01 * max(led.before_us, led.after_us)])
                                      for led in ledgers]))
    if roofline is not None:
        made.append(roofline_chart(roofline))
    return made


def roofline_chart(rl) -> ChartView:
    """The roofline chart of a ``paprof.analysis.roofline.Roofline``."""
    from paprof.analysis.roofline import LEVEL_NAMES

    return chart_lib.roofline(
        [v.label for v in rl.variants],
        [(r.key, r.name, r.kind, r.rate, r.source) for r in rl.roofs.values()],
        [(v.label, p.level, p.intensity, p.flop_rate) for v in rl.variants for p in v.points],
        LEVEL_NAMES)


# -- the whole thing ---------------------------------------------------------------------
def _ceiling_text(cmp: Comparison) -> str:
    seen = []
    for v in cmp.variants:
        c = v.ceiling
        if c is None:
            continue
        text = f"{fmt.sig(c.tbs)} TB/s ({c.source})"
        if c.datasheet_tbs and c.datasheet_tbs != c.tbs:
            text += f"; datasheet {fmt.sig(c.datasheet_tbs)} TB/s"
        if text not in seen:
            seen.append(text)
    if not seen:
        return "No bandwidth ceiling is known for this GPU (add it to paprof/analysis/gpus.py)."
    return "Bandwidth ceiling: " + " | ".join(seen) + "."


def _thresholds_text(cmp: Comparison) -> str:
    t = cmp.thresholds
    return (f"A metric counts as moved past: duration {fmt.pct(t.duration_rel * 100)}, throughput "
            f"{fmt.number(t.throughput_pts)} pts, occupancy {fmt.number(t.occupancy_pts)} pts, "
            f"DRAM traffic {fmt.pct(t.traffic_rel * 100)}, bandwidth {fmt.pct(t.bandwidth_rel * 100)}, "
            f"waves {fmt.pct(t.waves_rel * 100)}, rule estimates {fmt.number(t.rule_speedup_pts)} pts.")


def build_context(cmp: Comparison, charts: bool = True, generated: str | None = None) -> ReportContext:
    """The report's context. ``charts=False`` skips matplotlib (the Markdown report has none)."""
    labels = [v.label for v in cmp.variants]
    series = _series(cmp)
    families = sorted({v.family for v in cmp.variants if v.family})
    shapes = sorted({str(v.shape) for v in cmp.variants if v.shape})
    gpus = sorted({str(v.gpu) for v in cmp.variants if v.gpu})
    subtitle = " · ".join(x for x in (
        ", ".join(families), ", ".join(gpus), ", ".join(shapes)) if x)
    table, absent = build_table(cmp, series)
    table = fold_same_rows(table)
    traffic = fold_same_rows(build_table(cmp, series, TRAFFIC_TABLE)[0])
    stalls = build_stalls(cmp)
    ledgers = build_ledgers(cmp)
    from paprof.analysis import roofline as roofline_lib
    from paprof.reports.views import hotspots_view, roofline_view

    roofline = roofline_lib.build(cmp)
    from paprof.analysis.verdict import is_star, verdict
    from paprof.reports.verdict_view import verdict_view

    star = is_star(cmp)
    if star:  # every step starts at the baseline: "over the previous variant" says nothing
        table = [TableSection(sec.title, [r for r in sec.rows if r.key != "speedup_prev"])
                 for sec in table]
    verdicts = verdict_view(verdict(cmp))
    title = (f"paprof: {', '.join(labels[1:])} against {labels[0]}" if star
             else "paprof: " + " -> ".join(labels))
    return ReportContext(
        title=title,
        subtitle=subtitle,
        summary=verdicts.summary if verdicts else "",
        verdict=verdicts,
        star=star,
        generated=generated or datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        paprof_version=__version__,
        labels=labels,
        variants=[_variant_view(v) for v in cmp.variants],
        steps=_step_views(cmp),
        table=table,
        charts=build_charts(cmp, series, stalls, ledgers, roofline) if charts else [],
        provenance=_provenance_view(cmp),
        warnings=list(cmp.warnings),
        notes=list(cmp.notes),
        ceiling_text=_ceiling_text(cmp),
        thresholds_text=_thresholds_text(cmp),
        absent=absent,
        stalls=stalls,
        raw=series,
        ledgers=ledgers,
        roofline=roofline_view(roofline, {v.label: v.bottleneck for v in cmp.variants}),
        hotspots=hotspots_view(cmp.hotspots),
        traffic=traffic,
        traffic_note=_traffic_note(cmp),
    )


def _traffic_note(cmp: Comparison) -> str:
    """Names the variants whose reports lack the traffic sections, and those sections."""
    from paprof.analysis.metrics import BY_COLUMN

    lacking = [v.label for v in cmp.variants if v.get("l2_to_l1_bytes") is None]
    if not lacking:
        return ""
    sections = sorted({BY_COLUMN[c].section for c in ("l2_to_l1_bytes", "l1_global_load_sectors")})
    return (f"No traffic counters for {', '.join(lacking)}: profile with the default preset "
            f"(sections {', '.join(sections)}).")
