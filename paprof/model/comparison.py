"""The comparison's data: what one variant, one step and the whole comparison hold.

``VariantResult`` (one variant's summed values, its kernels, rules and provenance),
``Delta`` and ``Step`` (one step v2 -> v3: its deltas and story), ``Comparison`` (all of
it, before formatting); the column lists the comparison reads; ``Thresholds``, the one
place that decides when a metric counts as having moved; and the value helpers every
other part of the comparison uses.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from paprof.model.numbers import finite, plain
from paprof.model.bottleneck import LABELS, UNKNOWN, Tie
from paprof.read.metrics import (RATIO_COLUMNS, ROOFLINE_INPUTS, STALL_REASONS,
                                     TRAFFIC_COLUMNS)
from paprof.model.gpus import Ceiling
from paprof.read.record import RunRecord

METRIC_COLUMNS = (
    "duration_us",
    "elapsed_cycles",
    "sm_throughput_pct",
    "memory_throughput_pct",
    "dram_throughput_pct",
    "l1_throughput_pct",
    "l2_throughput_pct",
    "dram_active_cycles",
    "dram_bytes",
    "achieved_bandwidth_gbs",
    "registers_per_thread",
    "shared_mem_per_block_bytes",
    "theoretical_occupancy_pct",
    "achieved_occupancy_pct",
    "block_limit_registers",
    "block_limit_shared_mem",
    "block_limit_warps",
    "block_limit_blocks",
    "occupancy_limiter",
    "waves_per_sm",
    "grid_size",
    "block_size",
)
"""The documented columns (docs/architecture.md) a comparison reads (after the identifying ones)."""

EXTRA_COLUMNS = (
    "issue_active_pct",
    "top_stall_reason",
    "top_stall_cycles",
    "sm_count",
    "issue_slots_busy_pct",
    "work_bytes",
    "work_flops",
    "work_tbs",
    "work_tflops",
    "warps_active_per_sm",
    "fma_pipe_pct",
    "tensor_pipe_pct",
    "fp64_pipe_pct",
    "lsu_pipe_pct",
    "alu_pipe_pct",
    "xu_pipe_pct",
    "smsp_cycles_active",
    "warps_active_per_scheduler",
    "warps_eligible_per_scheduler",
    "warp_cycles_per_issue",
    "threads_per_instruction",
    "spill_instructions",
    *(c for c in TRAFFIC_COLUMNS if c not in METRIC_COLUMNS),
    *RATIO_COLUMNS,
    "bandwidth_of_ceiling_pct",
    "work_gbs",
    "work_of_ceiling_pct",
)
"""Catalogue columns beyond the documented ones that the stories and the tables use when present
(the traffic per level among them)."""

ROOFLINE_COLUMNS = tuple(m.column for m in ROOFLINE_INPUTS)
"""The roofline's inputs (FLOP rates, bytes per level, peaks, clocks: ``paprof.model.
roofline``) and the source counters' totals, kept on each variant and kernel."""

STALL_COLUMNS = tuple(f"stall_{reason}" for reason in STALL_REASONS)
"""Warp cycles per issued instruction stalled on each reason (WarpStateStats), kept on
each variant for the stall breakdown (``stall_selected`` is issuing, not stalling)."""

KEPT_COLUMNS = (*METRIC_COLUMNS, *EXTRA_COLUMNS, *STALL_COLUMNS, *ROOFLINE_COLUMNS)
"""The columns each compared variant and kernel keeps (``VariantResult.values``,
``KernelPart.values``): what the comparison, its decomposition and the gate's counters
(``paprof.gate.cause``) can read of a run."""

THROUGHPUT_UNITS = (
    ("sm_throughput_pct", "SM"),
    ("dram_throughput_pct", "DRAM"),
    ("l1_throughput_pct", "L1"),
    ("l2_throughput_pct", "L2"),
)
"""Units whose throughput (% of peak) a story mentions when it moved. Memory % is left
out of the sentences: it is the max over DRAM, L1 and L2, so it says nothing new."""

BOUND_WORDS = {label: label for label in LABELS if label != UNKNOWN}
"""How a bottleneck label reads in a sentence: as ``paprof table`` prints it, so that the
table, the report and the JSON spell it one way (``dram-bound``)."""

BOUND_UNITS = {
    "dram-bound": ("dram_throughput_pct",),
    "l2-bound": ("l2_throughput_pct",),
    "l1-bound": ("l1_throughput_pct",),
    "compute-bound": ("sm_throughput_pct",),
    "issue-bound": ("issue_slots_busy_pct",),
}
"""The throughput columns that carry each unit-bound label: the sentence about the one
that moved ends with the conclusion (": the kernel is now dram-bound")."""

LIMITERS = {
    "registers": ("registers", "block_limit_registers"),
    "shared memory": ("shared memory", "block_limit_shared_mem"),
    "warps": ("warps per SM", "block_limit_warps"),
    "blocks": ("the blocks-per-SM limit", "block_limit_blocks"),
}
"""Occupancy limiter (normalised) -> (words, block-limit column)."""


@dataclass(frozen=True)
class Thresholds:
    """When a metric counts as having moved between two variants."""

    duration_rel: float = 0.02
    """Relative change of duration below which two variants are "as fast"."""
    throughput_pts: float = 5.0
    """Percentage points a unit's throughput (% of peak) must move to be mentioned."""
    occupancy_pts: float = 2.0
    """Percentage points theoretical or achieved occupancy must move."""
    traffic_rel: float = 0.05
    """Relative change of DRAM bytes or DRAM active cycles."""
    bandwidth_rel: float = 0.05
    """Relative change of achieved bandwidth."""
    waves_rel: float = 0.10
    """Relative change of waves per SM."""
    rule_speedup_pts: float = 5.0
    """Points an ncu rule's estimated speedup must move to count as changed."""
    stall_rel: float = 0.25
    """Relative change of the top stall reason's cycles per issued instruction."""
    issue_pts: float = 5.0
    """Percentage points the schedulers' issue-active rate must move."""


THRESHOLDS = Thresholds()


# -- the data --------------------------------------------------------------------------
@dataclass
class KernelPart:
    """One kernel of a variant (a single-kernel variant has exactly one)."""

    kernel: str
    duration_us: float | None
    share: float | None
    """Fraction of the variant's summed duration."""
    grid_size: float | None
    block_size: float | None
    bottleneck: str | None
    values: dict


@dataclass
class RuleHit:
    """An ncu rule result attached to a variant.

    ncu estimates a rule's speedup per kernel; for a variant of several kernels the
    variant's estimate is each kernel's weighted by its share of the variant's time (a
    4 us merge kernel's 87 % is worth 0.1 % of the variant), and ``kernel`` names the
    kernel that contributes most of it."""

    id: str
    title: str
    type: str
    message: str
    speedup_pct: float | None
    kernel: str
    per_kernel: list[tuple[str, float | None, float | None]] = field(default_factory=list)
    """(kernel, its own estimate %, its share of the variant's time) for each kernel the
    rule fired on; empty for a single-kernel variant."""


@dataclass
class RuleChange:
    """A rule that appeared, disappeared or whose estimated speedup moved in one step."""

    id: str
    title: str
    kind: str
    """``appeared``, ``disappeared`` or ``changed``."""
    before_pct: float | None
    after_pct: float | None
    message: str
    kernel: str | None = None
    """The kernel the rule is about, for a variant of several kernels (None for one)."""


@dataclass
class VariantResult:
    """One variant as compared: its (summed) values, its kernels, rules and provenance."""

    label: str
    """Unique name in this comparison (the variant id, disambiguated if needed)."""
    variant: str
    family: str | None
    shape: str | None
    gpu: str | None
    report_path: str | None
    values: dict
    """Raw values of ``METRIC_COLUMNS`` (None where absent) plus ``duration_us_event``."""
    kernels: list[KernelPart]
    bottleneck: str | None
    evidence: list[str]
    rules: dict[str, RuleHit]
    sidecar: RunRecord | None
    """The run's record as read from its sidecar (None for a report paprof did not write)."""
    idea: str | None
    ceiling: Ceiling | None
    provenance: RunRecord | None = None
    """The same record as this comparison shows it: under the variant's label, with the
    table's GPU and shape where no sidecar names them (a foreign report's record)."""
    tie: Tie | None = None
    """When the label was decided by less than the tie threshold: the runner-up."""
    spread: dict = field(default_factory=dict)
    """Over several profiled launches: column -> half-range ((max - min) / 2) of the
    launches' values (``values`` then holds their medians); empty for one launch."""
    launches: int = 1
    """Profiled launches the values summarise."""

    @property
    def multi_kernel(self) -> bool:
        return len(self.kernels) > 1

    def get(self, column: str):
        return self.values.get(column)


@dataclass
class Delta:
    """One metric across one step."""

    column: str
    before: object
    after: object
    change: float | None
    """after - before (points for percentages)."""
    rel: float | None
    """(after - before) / before."""
    moved: bool


@dataclass
class Step:
    """v_before -> v_after: the deltas and the story."""

    before: str
    after: str
    speedup: float | None
    """before duration / after duration (> 1: faster)."""
    headline: str
    bottleneck_before: str | None
    bottleneck_after: str | None
    sentences: list[str]
    deltas: dict[str, Delta]
    rules_appeared: list[RuleChange] = field(default_factory=list)
    rules_disappeared: list[RuleChange] = field(default_factory=list)
    rules_changed: list[RuleChange] = field(default_factory=list)
    cause: str | None = None
    """The mechanism, from the counters (the first sentence; ``compare.causes``)."""
    limit: str | None = None
    """What limits the variant after the step now."""
    next_move: str | None = None
    """What would move it next, by ncu's rule estimates."""
    decomposition: object = None
    """The step's time difference as terms that add up to it
    (``paprof.model.decompose.Decomposition``); None without durations."""
    traffic: str | None = None
    """The largest traffic change in words (what ``cause`` said before the
    decomposition): a detail, no longer the cause."""
    differs: str = ""
    """What differs between the two runs of a cross comparison (parameters, GPU:
    ``assembly.pair_differences``); empty for like with like."""

    @property
    def rule_changes(self) -> list[RuleChange]:
        return self.rules_appeared + self.rules_disappeared + self.rules_changed

    @property
    def summary(self) -> str:
        """The sentences as one paragraph."""
        if not self.sentences:
            return ""
        text = "; ".join(self.sentences)
        return text[0].upper() + text[1:] + "."


@dataclass
class Comparison:
    """Everything the reports show, before formatting."""

    variants: list[VariantResult]
    steps: list[Step]
    provenance: list[RunRecord]
    """One per variant, in order: GPU, driver, ncu version, clock control, shape, date ..."""
    warnings: list[str]
    """Visible warnings: mismatched GPUs, ncu versions, clock settings, shapes; failed checks."""
    notes: list[str]
    """Quieter remarks (reports without a provenance sidecar)."""
    thresholds: Thresholds
    hotspots: object = None
    """The source hot spots (``paprof.model.source.Hotspots``) when the runs were
    profiled with SourceCounters and someone read them; None otherwise."""
    cross: list[str] = field(default_factory=list)
    """What differs between the compared runs (parameters, GPUs) when the user asked for
    a cross comparison; empty for a comparison of like with like."""
    roofline: object = None
    """The roofline (``paprof.model.roofline.Roofline``), set by
    ``paprof.model.analysis.complete``; None before, or without points."""
    ledgers: list | None = None
    """One time ledger per step (``paprof.model.ledger.step_ledgers``; None for a step
    without both durations), set by ``complete``."""
    stalls: object = None
    """The warp-stall ranking (``paprof.model.stalls.StallRanking``), set by ``complete``."""
    contradictions: list = field(default_factory=list)
    """Numbers that look contradictory side by side, with the reason
    (``paprof.explain.contradictions``), set by ``finish``."""
    finished: bool = False
    """Whether the explain stage told it (``paprof.explain.finish``)."""
    told: object = None
    """What the renderers show beyond the explanation document
    (``paprof.explain.told.Told``), set by ``finish``."""

    def variant(self, label: str) -> VariantResult:
        for v in self.variants:
            if v.label == label:
                return v
        raise KeyError(label)

    @property
    def fastest(self) -> VariantResult | None:
        timed = [v for v in self.variants if v.get("duration_us")]
        return min(timed, key=lambda v: v.get("duration_us")) if timed else None


# -- value helpers ---------------------------------------------------------------------


def limiter_name(raw) -> str | None:
    """Normalise the loader's occupancy limiter (``"shared_mem"``, ``"Shared Memory"``,
    ``"block_limit_registers"`` ...) to a key of ``LIMITERS``; unknown text passes through."""
    raw = plain(raw)
    if raw is None:
        return None
    text = str(raw).strip().lower().replace("_", " ")
    if text.startswith("block limit "):
        text = text[len("block limit "):]
    aliases = {
        "shared mem": "shared memory", "smem": "shared memory", "shared": "shared memory",
        "register": "registers", "regs": "registers",
        "warp": "warps", "block": "blocks", "sm": "blocks", "blocks per sm": "blocks",
    }
    return aliases.get(text, text)


def verdict_words(v: "VariantResult") -> str:
    """A variant's label in words, a tie said as one: "compute-bound (a tie with
    l2-bound: issue slots 77 % ~ L2 throughput 76.9 %)"."""
    text = bound_words(v.bottleneck)
    if v.tie is not None and v.tie.label == v.bottleneck:
        text += f" (a tie with {bound_words(v.tie.other)}: {v.tie.text.split(': a tie')[0]})"
    return text


def bound_words(label) -> str:
    label = plain(label)
    if label is None:
        return "n/a"
    return BOUND_WORDS.get(str(label), str(label))



def binding_limits(v: VariantResult) -> tuple[list[str], float | None]:
    """The occupancy limiters that bind (every block limit equal to the smallest, so ties
    are named together; the loader's ``occupancy_limiter`` first) and that block count."""
    first = limiter_name(v.get("occupancy_limiter"))
    limits = {name: finite(v.get(column)) for name, (_, column) in LIMITERS.items()}
    known = {n: x for n, x in limits.items() if x is not None}
    if not known:
        return ([first] if first else []), None
    low = min(known.values())
    tied = [n for n, x in known.items() if x == low]
    if len(tied) > 1 and "shared memory" in tied and finite(v.get("shared_mem_per_block_bytes")) == 0:
        # 0 B of shared memory: its "limit" is the driver's 1 KiB reserve per block, which
        # ties with the blocks-per-SM cap (32 on the H200); the kernel's own use limits nothing
        tied.remove("shared memory")
    if first in tied:
        tied.remove(first)
        tied.insert(0, first)
    elif first is not None:
        return [first], known.get(first)
    return tied, low

