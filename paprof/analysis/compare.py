"""Variants side by side: the deltas of each step and the story of why it got faster.

Input is the loader's tidy frame (``paprof.analysis.load``): one row per kernel launch,
and ``variant_rows`` of it, where a variant made of several kernels (split-KV partial +
merge) is summed into one row. ``compare`` turns those into a ``Comparison``: one
``VariantResult`` per variant in the order given, and one ``Step`` per consecutive pair
(v2 -> v3), each with its deltas and its story as sentences.

Every kind of sentence has its own function below (``duration_sentence``,
``occupancy_sentence`` ...); ``STORY`` lists them in the order a step tells them. When a
metric counts as having moved is decided in one place, ``Thresholds``.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from paprof.analysis import fmt
from paprof.analysis.gpus import Ceiling, ceiling_for

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
"""The DESIGN.md columns a comparison reads (after the identifying ones)."""

EXTRA_COLUMNS = (
    "issue_active_pct",
    "top_stall_reason",
    "top_stall_cycles",
    "sm_count",
    "work_bytes",
    "work_flops",
    "work_tbs",
    "work_tflops",
)
"""Catalogue columns beyond DESIGN.md that the stories and the table use when present."""

THROUGHPUT_UNITS = (
    ("sm_throughput_pct", "SM"),
    ("dram_throughput_pct", "DRAM"),
    ("l1_throughput_pct", "L1"),
    ("l2_throughput_pct", "L2"),
)
"""Units whose throughput (% of peak) a story mentions when it moved. Memory % is left
out of the sentences: it is the max over DRAM, L1 and L2, so it says nothing new."""

BOUND_WORDS = {
    "dram-bound": "DRAM-bound",
    "l2/l1-bound": "L2/L1-bound",
    "compute-bound": "compute-bound",
    "latency-bound": "latency-bound",
    "occupancy/launch-bound": "occupancy/launch-bound",
}
"""How a bottleneck label reads in a sentence: the label itself, only capitalised."""

BOUND_UNITS = {
    "dram-bound": ("dram_throughput_pct",),
    "l2/l1-bound": ("l1_throughput_pct", "l2_throughput_pct"),
    "compute-bound": ("sm_throughput_pct",),
}
"""The throughput columns that carry each unit-bound label: the sentence about the one
that moved ends with the conclusion (": the kernel is now DRAM-bound")."""

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
    """An ncu rule result attached to a variant (its highest estimate across kernels)."""

    id: str
    title: str
    type: str
    message: str
    speedup_pct: float | None
    kernel: str


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

    @property
    def text(self) -> str:
        if self.kind == "appeared":
            est = f" (estimated speedup {fmt.pct(self.after_pct)})" if self.after_pct is not None else ""
            return f"ncu rule appeared: {self.title}{est}"
        if self.kind == "disappeared":
            est = f" (had estimated {fmt.pct(self.before_pct)})" if self.before_pct is not None else ""
            return f"ncu rule gone: {self.title}{est}"
        return (f"ncu rule {self.title}: estimated speedup "
                f"{fmt.pct(self.before_pct)} -> {fmt.pct(self.after_pct)}")


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
    sidecar: dict | None
    idea: str | None
    ceiling: Ceiling | None

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
    provenance: list[dict]
    """One dict per variant: label, gpu, driver, ncu_version, clock_control, shape, date ..."""
    warnings: list[str]
    """Visible warnings: mismatched GPUs, ncu versions, clock settings, shapes; failed checks."""
    notes: list[str]
    """Quieter remarks (reports without a provenance sidecar)."""
    thresholds: Thresholds

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
def _clean(value):
    """A plain Python value: NaN/NA and "" -> None, numpy scalars -> float/int/str."""
    if value is None:
        return None
    if isinstance(value, (list, tuple, dict)):
        return value
    if isinstance(value, str):
        return value or None
    try:
        if value != value:  # NaN, pd.NA raises TypeError below
            return None
    except (TypeError, ValueError):
        return None
    if hasattr(value, "item"):
        value = value.item()
    return value


def _num(value) -> float | None:
    value = _clean(value)
    if value is None or isinstance(value, (list, tuple, dict, bool)):
        return None
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(out) else out


def limiter_name(raw) -> str | None:
    """Normalise the loader's occupancy limiter (``"shared_mem"``, ``"Shared Memory"``,
    ``"block_limit_registers"`` ...) to a key of ``LIMITERS``; unknown text passes through."""
    raw = _clean(raw)
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


def bound_words(label) -> str:
    label = _clean(label)
    if label is None:
        return "n/a"
    return BOUND_WORDS.get(str(label), str(label))


def _delta(column: str, before, after, moved: Callable[[float, float], bool]) -> Delta:
    b, a = _num(before), _num(after)
    if b is None or a is None:
        return Delta(column, _clean(before), _clean(after), None, None, False)
    rel = (a - b) / b if b else (None if a == b else math.inf)
    return Delta(column, b, a, a - b, rel, moved(b, a))


def _rel_moved(threshold: float) -> Callable[[float, float], bool]:
    def moved(b: float, a: float) -> bool:
        if b == a:
            return False
        if b == 0 or a == 0:
            return True
        return abs(a - b) / abs(b) >= threshold
    return moved


def _pts_moved(threshold: float) -> Callable[[float, float], bool]:
    return lambda b, a: abs(a - b) >= threshold


def _exact_moved(b: float, a: float) -> bool:
    return b != a


def movers(t: Thresholds) -> dict[str, Callable[[float, float], bool]]:
    """Column -> "did it move" under thresholds ``t``."""
    pts = _pts_moved(t.throughput_pts)
    occ = _pts_moved(t.occupancy_pts)
    traffic = _rel_moved(t.traffic_rel)
    return {
        "duration_us": _rel_moved(t.duration_rel),
        "duration_us_event": _rel_moved(t.duration_rel),
        "elapsed_cycles": _rel_moved(t.duration_rel),
        "sm_throughput_pct": pts,
        "memory_throughput_pct": pts,
        "dram_throughput_pct": pts,
        "l1_throughput_pct": pts,
        "l2_throughput_pct": pts,
        "dram_active_cycles": traffic,
        "dram_bytes": traffic,
        "achieved_bandwidth_gbs": _rel_moved(t.bandwidth_rel),
        "work_tbs": _rel_moved(t.bandwidth_rel),
        "work_tflops": _rel_moved(t.bandwidth_rel),
        "theoretical_occupancy_pct": occ,
        "achieved_occupancy_pct": occ,
        "waves_per_sm": _rel_moved(t.waves_rel),
        "top_stall_cycles": _rel_moved(t.stall_rel),
        "issue_active_pct": _pts_moved(t.issue_pts),
    }


def step_deltas(before: VariantResult, after: VariantResult, t: Thresholds = THRESHOLDS) -> dict[str, Delta]:
    """Every compared column across one step, with its "moved" verdict."""
    rules = movers(t)
    out = {}
    for column in (*METRIC_COLUMNS, *EXTRA_COLUMNS, "duration_us_event"):
        if column == "occupancy_limiter":
            b, a = limiter_name(before.get(column)), limiter_name(after.get(column))
            out[column] = Delta(column, b, a, None, None, b != a and None not in (b, a))
            continue
        out[column] = _delta(column, before.get(column), after.get(column), rules.get(column, _exact_moved))
    return out


def speedup(before: VariantResult, after: VariantResult) -> float | None:
    b, a = _num(before.get("duration_us")), _num(after.get("duration_us"))
    if not b or not a:
        return None
    return b / a


# -- the sentences, one function per kind ---------------------------------------------
# Each takes (before, after, deltas, thresholds) and returns a sentence, a list of them,
# or None when it has nothing to say.

def duration_sentence(before, after, d, t) -> str | None:
    """"duration 4.95 ms -> 3.35 ms: 1.48x faster"."""
    delta = d["duration_us"]
    if delta.change is None:
        return None
    text = f"duration {fmt.duration_us(delta.before)} -> {fmt.duration_us(delta.after)}"
    if not delta.moved:
        return f"{text}: as fast (within {fmt.pct(t.duration_rel * 100)})"
    ratio = delta.before / delta.after
    if ratio >= 1:
        return f"{text}: {fmt.ratio(ratio)} faster"
    return f"{text}: {fmt.ratio(1 / ratio)} slower"


def kernels_sentence(before, after, d, t) -> str | None:
    """For a split variant after the step: "v4 runs 2 kernels, compared as their sum:
    paged_decode_v4_partial 3.92 ms (99.4 %) + paged_decode_v4_merge 22.6 us (0.6 %)"."""
    if not after.multi_kernel:
        return None
    listed = " + ".join(
        f"{k.kernel} {fmt.duration_us(k.duration_us)}"
        + (f" ({fmt.pct(k.share * 100)})" if k.share is not None else "")
        for k in after.kernels
    )
    return f"{after.label} runs {len(after.kernels)} kernels, compared as their sum: {listed}"


def launch_sentence(before, after, d, t) -> str | None:
    """"grid 2,048 -> 512 CTAs, block 32 -> 128 threads, waves per SM 1.94 -> 0.97"."""
    parts = []
    if d["grid_size"].moved and d["grid_size"].change is not None:
        parts.append(f"grid {fmt.count(d['grid_size'].before)} -> {fmt.count(d['grid_size'].after)} CTAs")
    if d["block_size"].moved and d["block_size"].change is not None:
        parts.append(f"block {fmt.count(d['block_size'].before)} -> {fmt.count(d['block_size'].after)} threads")
    w = d["waves_per_sm"]
    if w.moved and w.change is not None and parts:
        parts.append(f"waves per SM {fmt.number(w.before)} -> {fmt.number(w.after)}")
    return ", ".join(parts) or None


def registers_sentence(before, after, d, t) -> str | None:
    """"registers 64 -> 39"."""
    r = d["registers_per_thread"]
    if not r.moved or r.change is None:
        return None
    return f"registers {fmt.count(r.before)} -> {fmt.count(r.after)} per thread"


def shared_memory_sentence(before, after, d, t) -> str | None:
    """"shared memory 0 B -> 16 KiB per block"."""
    s = d["shared_mem_per_block_bytes"]
    if not s.moved or s.change is None:
        return None
    before, after = fmt.bytes_binary(s.before), fmt.bytes_binary(s.after)
    if before == after:  # a few bytes (v6's merge flag): nothing a reader should weigh
        return None
    return f"shared memory {before} -> {after} per block"


def binding_limits(v: VariantResult) -> tuple[list[str], float | None]:
    """The occupancy limiters that bind (every block limit equal to the smallest, so ties
    are named together; the loader's ``occupancy_limiter`` first) and that block count."""
    first = limiter_name(v.get("occupancy_limiter"))
    limits = {name: _num(v.get(column)) for name, (_, column) in LIMITERS.items()}
    known = {n: x for n, x in limits.items() if x is not None}
    if not known:
        return ([first] if first else []), None
    low = min(known.values())
    tied = [n for n, x in known.items() if x == low]
    if first in tied:
        tied.remove(first)
        tied.insert(0, first)
    elif first is not None:
        return [first], known.get(first)
    return tied, low


def _limit_words(v: VariantResult) -> str | None:
    names, _ = binding_limits(v)
    return " and ".join(LIMITERS.get(n, (n, None))[0] for n in names) or None


def _limit_text(v: VariantResult) -> str | None:
    words = _limit_words(v)
    _, blocks = binding_limits(v)
    if words is None:
        return None
    return f"{words} ({fmt.count(blocks)} blocks per SM)" if blocks is not None else words


def occupancy_sentence(before, after, d, t) -> list[str]:
    """"theoretical occupancy 50 % -> 41.7 %, now limited by shared memory (5 blocks per SM)"."""
    out = []
    theo = d["theoretical_occupancy_pct"]
    names_before, names_after = binding_limits(before)[0], binding_limits(after)[0]
    changed = bool(names_before) and bool(names_after) and names_before != names_after
    limit_after = _limit_text(after)
    if theo.change is not None and theo.moved:
        text = f"theoretical occupancy {fmt.pct(theo.before)} -> {fmt.pct(theo.after)}"
        if changed and limit_after:
            text += f", now limited by {limit_after}"
        elif limit_after:
            text += f", limited by {limit_after}"
        out.append(text)
    elif changed and limit_after:
        out.append(f"theoretical occupancy {fmt.pct(theo.after)}, now limited by {limit_after} "
                   f"instead of {_limit_words(before)}")
    ach = d["achieved_occupancy_pct"]
    if ach.change is not None and ach.moved:
        out.append(f"achieved occupancy {fmt.pct(ach.before)} -> {fmt.pct(ach.after)}")
    return out


def _conclusion_unit(before: VariantResult, after: VariantResult, d: dict) -> str | None:
    """The throughput column whose sentence carries "the kernel is now X-bound", if any."""
    b, a = _clean(before.bottleneck), _clean(after.bottleneck)
    if a is None or a == b or a not in BOUND_UNITS:
        return None
    moved = [c for c in BOUND_UNITS[a] if d[c].moved and (d[c].change or 0) > 0]
    if not moved:
        return None
    return max(moved, key=lambda c: d[c].after)


def throughput_sentences(before, after, d, t) -> list[str]:
    """"DRAM throughput 57.4 % -> 84.9 %: the kernel is now DRAM-bound"."""
    conclude = _conclusion_unit(before, after, d)
    out = []
    for column, unit in THROUGHPUT_UNITS:
        delta = d[column]
        if delta.change is None or not delta.moved:
            continue
        text = f"{unit} throughput {fmt.pct(delta.before)} -> {fmt.pct(delta.after)}"
        if column == conclude:
            text += f": the kernel is now {bound_words(after.bottleneck)}"
        out.append(text)
    return out


def bottleneck_sentence(before, after, d, t) -> str | None:
    """"now latency-bound (was DRAM-bound): <evidence>" or "still DRAM-bound"; nothing when a
    throughput sentence already drew the conclusion."""
    b, a = _clean(before.bottleneck), _clean(after.bottleneck)
    if a is None:
        return None
    if a == b:
        return f"still {bound_words(a)}"
    if _conclusion_unit(before, after, d):
        return None
    text = f"now {bound_words(a)}, was {bound_words(b)}"
    if after.evidence:
        text += f"; {after.evidence[0]}"
    return text


def stall_sentence(before, after, d, t) -> str | None:
    """"top warp stall long scoreboard -> barrier (3.2 cycles per issued instruction)", or
    for the same reason "long scoreboard stalls 8.1 -> 3.2 cycles per issued instruction";
    with the issue rate when it moved."""
    rb, ra = _clean(before.get("top_stall_reason")), _clean(after.get("top_stall_reason"))
    cyc, issue = d["top_stall_cycles"], d["issue_active_pct"]
    parts = []
    if ra is not None and rb is not None and ra != rb:
        parts.append(f"top warp stall {rb.replace('_', ' ')} -> {ra.replace('_', ' ')} "
                     f"({fmt.number(cyc.after, 2)} cycles per issued instruction)")
    elif ra is not None and ra == rb and cyc.change is not None and cyc.moved:
        parts.append(f"{ra.replace('_', ' ')} stalls {fmt.number(cyc.before, 2)} -> "
                     f"{fmt.number(cyc.after, 2)} cycles per issued instruction")
    if issue.change is not None and issue.moved:
        parts.append(f"schedulers issue in {fmt.pct(issue.before)} -> {fmt.pct(issue.after)} of active cycles")
    return ", ".join(parts) or None


def dram_traffic_sentence(before, after, d, t) -> str | None:
    """"DRAM bytes 4.29 GB -> 2.15 GB", or when neither bytes nor active cycles moved while
    the duration did: "DRAM bytes (2.15 GB) and active cycles (39.1 M) unchanged: the same
    traffic in less time"."""
    by, cy = d["dram_bytes"], d["dram_active_cycles"]
    parts = []
    if by.change is not None and by.moved:
        parts.append(f"DRAM bytes {fmt.bytes_decimal(by.before)} -> {fmt.bytes_decimal(by.after)}")
    if cy.change is not None and cy.moved:
        parts.append(f"DRAM active cycles {fmt.big(cy.before)} -> {fmt.big(cy.after)}")
    if parts:
        return ", ".join(parts)
    dur = d["duration_us"]
    if by.change is None or cy.change is None or not dur.moved:
        return None
    when = "less" if dur.change < 0 else "more"
    return (f"DRAM bytes ({fmt.bytes_decimal(by.after)}) and active cycles ({fmt.big(cy.after)}) "
            f"unchanged: the same traffic in {when} time")


def _of_ceiling(gbs: float, ceiling: Ceiling | None) -> str | None:
    if ceiling is None or gbs is None:
        return None
    return fmt.pct(gbs / ceiling.gbs * 100)


def bandwidth_sentence(before, after, d, t) -> str | None:
    """"achieved bandwidth 2.62 TB/s -> 3.87 TB/s, 57.8 % -> 85.4 % of the measured 4.53 TB/s ceiling"."""
    bw = d["achieved_bandwidth_gbs"]
    if bw.change is None or not bw.moved:
        return None
    text = f"achieved bandwidth {fmt.bandwidth_gbs(bw.before)} -> {fmt.bandwidth_gbs(bw.after)}"
    cb, ca = before.ceiling, after.ceiling
    if ca is None:
        return text
    kind = "measured" if ca.measured else "datasheet"
    if cb is not None and cb.tbs == ca.tbs:
        text += (f", {_of_ceiling(bw.before, cb)} -> {_of_ceiling(bw.after, ca)} of the {kind} "
                 f"{fmt.sig(ca.tbs)} TB/s ceiling")
    else:
        text += f", {_of_ceiling(bw.after, ca)} of the {kind} {fmt.sig(ca.tbs)} TB/s ceiling"
    return text


def work_sentence(before, after, d, t) -> str | None:
    """The family's work model over the duration: "useful bandwidth (the work model's
    537 MB) 2.3 -> 4.2 TB/s, 51 % -> 92.7 % of the measured 4.53 TB/s ceiling; useful FLOP
    rate 1.4 -> 2.6 TFLOP/s". Said when both variants have a work model (schema-2 runs)."""
    tbs = d["work_tbs"]
    if tbs.before is None or tbs.after is None:
        return None
    amount = _num(after.get("work_bytes"))
    text = (f"useful bandwidth (the work model's {fmt.bytes_decimal(amount)}) "
            f"{fmt.bandwidth_gbs(tbs.before * 1e3)} -> {fmt.bandwidth_gbs(tbs.after * 1e3)}")
    cb, ca = before.ceiling, after.ceiling
    if ca is not None and cb is not None and cb.tbs == ca.tbs:
        kind = "measured" if ca.measured else "datasheet"
        text += (f", {_of_ceiling(tbs.before * 1e3, cb)} -> {_of_ceiling(tbs.after * 1e3, ca)} "
                 f"of the {kind} {fmt.sig(ca.tbs)} TB/s ceiling")
    fl = d["work_tflops"]
    if fl.before is not None and fl.after is not None:
        text += f"; useful FLOP rate {fmt.flop_rate(fl.before)} -> {fmt.flop_rate(fl.after)}"
    return text


def rule_sentences(before, after, d, t) -> list[str]:
    """One line per ncu rule that appeared, disappeared or whose estimate moved."""
    return [c.text for c in rule_changes(before, after, t)]


STORY: tuple[Callable, ...] = (
    duration_sentence,
    kernels_sentence,
    launch_sentence,
    registers_sentence,
    shared_memory_sentence,
    occupancy_sentence,
    throughput_sentences,
    bottleneck_sentence,
    stall_sentence,
    dram_traffic_sentence,
    bandwidth_sentence,
    work_sentence,
)
"""The sentence functions, in the order a step tells them. Rule changes are listed apart
(``Step.rules_*``); ``rule_sentences`` gives them as text for callers that want them inline."""


def rule_changes(before: VariantResult, after: VariantResult, t: Thresholds = THRESHOLDS) -> list[RuleChange]:
    """ncu rules that appeared, disappeared, or whose estimated speedup moved."""
    out = []
    for rid, hit in after.rules.items():
        if rid not in before.rules:
            out.append(RuleChange(rid, hit.title, "appeared", None, hit.speedup_pct, hit.message))
    for rid, hit in before.rules.items():
        if rid not in after.rules:
            out.append(RuleChange(rid, hit.title, "disappeared", hit.speedup_pct, None, hit.message))
    for rid, hit in after.rules.items():
        old = before.rules.get(rid)
        if old is None:
            continue
        b, a = old.speedup_pct, hit.speedup_pct
        if b is not None and a is not None and abs(a - b) >= t.rule_speedup_pts:
            out.append(RuleChange(rid, hit.title, "changed", b, a, hit.message))
    return out


def tell(before: VariantResult, after: VariantResult, t: Thresholds = THRESHOLDS) -> Step:
    """The step before -> after: deltas, sentences and rule changes."""
    d = step_deltas(before, after, t)
    sentences: list[str] = []
    for fn in STORY:
        said = fn(before, after, d, t)
        if isinstance(said, str):
            sentences.append(said)
        elif said:
            sentences.extend(said)
    s = speedup(before, after)
    if s is None:
        headline = f"{after.label} vs {before.label}: no duration to compare"
    elif not d["duration_us"].moved:
        headline = f"{after.label} is as fast as {before.label} ({fmt.ratio(s)})"
    elif s >= 1:
        headline = f"{after.label} is {fmt.ratio(s)} faster than {before.label}"
    else:
        headline = f"{after.label} is {fmt.ratio(1 / s)} slower than {before.label}"
    changes = rule_changes(before, after, t)
    return Step(
        before=before.label,
        after=after.label,
        speedup=s,
        headline=headline,
        bottleneck_before=_clean(before.bottleneck),
        bottleneck_after=_clean(after.bottleneck),
        sentences=sentences,
        deltas=d,
        rules_appeared=[c for c in changes if c.kind == "appeared"],
        rules_disappeared=[c for c in changes if c.kind == "disappeared"],
        rules_changed=[c for c in changes if c.kind == "changed"],
    )


# -- provenance ------------------------------------------------------------------------
PROVENANCE_CHECKS = (
    ("gpu", "GPUs"),
    ("ncu_version", "ncu versions"),
    ("clock_control", "clock settings"),
    ("shape_key", "shapes"),
)
"""Provenance fields that must agree for a comparison to be fair, and their plural.
Shapes are compared by slug (a store layout without sidecar only knows the slug)."""


def provenance_of(v: VariantResult) -> dict:
    """The footer's row for one variant (None where unknown)."""
    s = v.sidecar or {}
    verification = s.get("verification") or {}
    commit = s.get("git_commit")
    if s.get("git_dirty"):
        commit = f"{commit or 'unknown'} (dirty)"
    created = s.get("created")
    return {
        "label": v.label,
        "gpu": s.get("gpu") or v.gpu,
        "driver": s.get("driver"),
        "ncu_version": s.get("ncu_version"),
        "clock_control": s.get("clock_control"),
        "shape": s.get("shape") or v.shape,
        "shape_key": s.get("shape_slug") or v.shape,
        "preset": s.get("preset"),
        "date": created,
        "git_commit": commit,
        "verified": verification.get("passed"),
        "unverified": bool(s) and s.get("verified") is False and not verification,
        "kind": s.get("kind"),
        "rel_error": verification.get("rel_error"),
        "report": "/".join(Path(v.report_path).parts[-3:]) if v.report_path else None,
        "has_sidecar": bool(v.sidecar),
    }


def provenance_warnings(rows: list[dict]) -> tuple[list[str], list[str]]:
    """(warnings, notes): mismatched settings are warnings; unknown ones are notes."""
    warnings, notes = [], []
    for key, plural in PROVENANCE_CHECKS:
        groups: dict[str, list[str]] = {}
        shown: dict[str, str] = {}
        for r in rows:
            if r[key] is not None:
                groups.setdefault(str(r[key]), []).append(r["label"])
                shown.setdefault(str(r[key]), str(r["shape"] if key == "shape_key" else r[key]))
        if len(groups) > 1:
            listed = "; ".join(f"{shown[val]} ({', '.join(labels)})" for val, labels in groups.items())
            warnings.append(f"Profiled with different {plural}: {listed}. "
                            "The numbers are not directly comparable.")
    for r in rows:
        if r["verified"] is False:
            warnings.append(f"{r['label']} failed verification against the float64 reference "
                            f"(relative error {r['rel_error']}): its timing is of a wrong kernel.")
        if r.get("unverified"):
            what = "an external command" if r.get("kind") == "command" else "this run"
            warnings.append(f"{r['label']} is not verified: {what} was profiled without a "
                            "reference check, so nothing says its output is right.")
        if not r["has_sidecar"]:
            notes.append(f"{r['label']}: no provenance sidecar beside {r['report'] or 'the report'}; "
                         "its ncu version and clock control are unknown and were not checked.")
    return warnings, notes


# -- assembling ------------------------------------------------------------------------
def _norm_path(p) -> str:
    return os.path.realpath(str(p)) if p is not None else ""


def _rules_of(rows: list[dict]) -> dict[str, RuleHit]:
    hits: dict[str, RuleHit] = {}
    for row in rows:
        for r in row.get("rules") or ():
            rid = str(r.get("id") or r.get("title") or "")
            if not rid:
                continue
            sp = _num(r.get("speedup_pct"))
            hit = RuleHit(rid, str(r.get("title") or rid), str(r.get("type") or ""),
                          str(r.get("message") or ""), sp, str(row.get("kernel") or ""))
            old = hits.get(rid)
            if old is None or (sp or -1) > (old.speedup_pct or -1):
                hits[rid] = hit
    return hits


def _variant_result(summed: dict, kernels: list[dict]) -> VariantResult:
    values = {c: _clean(summed.get(c)) for c in (*METRIC_COLUMNS, *EXTRA_COLUMNS)}
    sidecar = _clean(summed.get("sidecar"))
    sidecar = sidecar if isinstance(sidecar, dict) else None
    values["duration_us_event"] = _num((sidecar or {}).get("duration_us_event"))
    total = _num(values["duration_us"])
    parts = []
    for k in kernels:
        dur = _num(k.get("duration_us"))
        parts.append(KernelPart(
            kernel=str(k.get("kernel")),
            duration_us=dur,
            share=(dur / total) if (dur is not None and total) else None,
            grid_size=_num(k.get("grid_size")),
            block_size=_num(k.get("block_size")),
            bottleneck=_clean(k.get("bottleneck")),
            values={c: _clean(k.get(c)) for c in (*METRIC_COLUMNS, *EXTRA_COLUMNS)},
        ))
    bottleneck = _clean(summed.get("bottleneck"))
    evidence = _clean(summed.get("bottleneck_evidence"))
    if bottleneck is None and kernels:
        longest = max(kernels, key=lambda k: _num(k.get("duration_us")) or 0)
        bottleneck = _clean(longest.get("bottleneck"))
        evidence = _clean(longest.get("bottleneck_evidence"))
    rules = _rules_of(kernels) if any("rules" in k for k in kernels) else _rules_of([summed])
    gpu = _clean(summed.get("gpu"))
    variant = str(_clean(summed.get("variant")) or "?")
    idea = (sidecar or {}).get("idea")  # a foreign report has no sidecar, so no idea line
    return VariantResult(
        label=variant,
        variant=variant,
        family=_clean(summed.get("family")),
        shape=_clean(summed.get("shape")),
        gpu=gpu,
        report_path=_clean(summed.get("report_path")),
        values=values,
        kernels=parts,
        bottleneck=bottleneck,
        evidence=list(evidence or []),
        rules=rules,
        sidecar=sidecar,
        idea=idea,
        ceiling=ceiling_for(gpu, sidecar),
    )


def _unique_labels(variants: list[VariantResult]) -> None:
    """Make labels unique: add the shape, then the GPU, then a counter where ids repeat."""
    for extra in ("shape", "gpu", None):
        seen: dict[str, int] = {}
        for v in variants:
            seen[v.label] = seen.get(v.label, 0) + 1
        clashes = {label for label, n in seen.items() if n > 1}
        if not clashes:
            return
        counter: dict[str, int] = {}
        for v in variants:
            if v.label not in clashes:
                continue
            if extra is None:
                counter[v.label] = counter.get(v.label, 0) + 1
                v.label = f"{v.label} #{counter[v.label]}"
            elif getattr(v, extra):
                v.label = f"{v.label} [{getattr(v, extra)}]"


def _records(frame) -> list[dict]:
    return [dict(r) for r in frame.to_dict(orient="records")]


def _one_launch_each(rows: list[dict]) -> tuple[list[dict], list[str]]:
    """Keep one launch per (variant, shape, report): the one of median duration.

    A run profiled with ``--profile-launches N`` holds N launches of the same work; a
    comparison shows one of them (a real row, so its metrics stay consistent) and says so.
    """
    groups: dict[tuple, list[dict]] = {}
    for row in rows:
        key = tuple(_clean(row.get(c)) for c in ("variant", "shape", "report_path"))
        groups.setdefault(key, []).append(row)
    kept, notes = [], []
    for key, members in groups.items():
        if len(members) == 1:
            kept.append(members[0])
            continue
        ranked = sorted(members, key=lambda r: _num(r.get("duration_us")) or 0.0)
        choice = ranked[(len(ranked) - 1) // 2]
        kept.append(choice)
        notes.append(f"{key[0]}: {len(members)} profiled launches in "
                     f"{Path(str(key[2])).name if key[2] else 'the report'}; "
                     f"shown: launch {_clean(choice.get('launch'))}, the one of median duration.")
    return kept, notes


def compare(df, summed=None, order: Iterable | None = None, thresholds: Thresholds = THRESHOLDS) -> Comparison:
    """Compare the variants in the loader's frame ``df``.

    ``summed`` is ``variant_rows(df)`` (computed here when None). ``order`` lists report
    paths in the order the user named them; a report holding several variants contributes
    them in the frame's order. Without ``order`` the frame's order is kept.
    """
    if summed is None:
        from paprof.analysis.load import variant_rows

        summed = variant_rows(df)
    kernel_rows = _records(df)
    summed_rows, launch_notes = _one_launch_each(_records(summed))
    if order is not None:
        rank = {}
        for i, p in enumerate(order):
            rank.setdefault(_norm_path(p), i)
        summed_rows = sorted(
            enumerate(summed_rows),
            key=lambda ir: (rank.get(_norm_path(ir[1].get("report_path")), len(rank)), ir[0]),
        )
        summed_rows = [r for _, r in summed_rows]

    def same(k: dict, s: dict) -> bool:
        return all(_clean(k.get(c)) == _clean(s.get(c)) for c in ("variant", "shape", "report_path", "launch"))

    variants = [_variant_result(s, [k for k in kernel_rows if same(k, s)] or [s]) for s in summed_rows]
    _unique_labels(variants)
    steps = [tell(a, b, thresholds) for a, b in zip(variants, variants[1:])]
    provenance = [provenance_of(v) for v in variants]
    warnings, notes = provenance_warnings(provenance)
    return Comparison(variants, steps, provenance, warnings,
                      family_notes(variants) + notes + launch_notes, thresholds)


def family_notes(variants: list[VariantResult]) -> list[str]:
    """The families' own sentences for the story (``Family.notes``, kept in the sidecars),
    once each: "softmax: the read ceiling is a read-only kernel's ..."."""
    seen: dict[str, None] = {}
    for v in variants:
        side = v.sidecar or {}
        for note in side.get("family_notes") or ():
            if isinstance(note, str) and note.strip():
                seen.setdefault(f"{side.get('family') or v.family}: {note.strip()}")
    return list(seen)


def compare_reports(paths: list, thresholds: Thresholds = THRESHOLDS) -> Comparison:
    """Load ``.ncu-rep`` files with the loader and compare them in the order given."""
    from paprof.analysis.load import load_reports, variant_rows

    df = load_reports([Path(p) for p in paths])
    return compare(df, variant_rows(df), order=paths, thresholds=thresholds)
