"""A bottleneck label and its evidence for one kernel (one table row).

Labels (docs/architecture.md): ``dram-bound``, ``l2-bound``, ``l1-bound``, ``compute-bound``,
``issue-bound``, ``latency-bound``, ``occupancy/launch-bound``; plus ``unknown`` when the report lacks the SpeedOfLight
throughputs every decision needs (the evidence then names the missing columns and the
section that would supply them).

The decision, in order (all numbers in :class:`Thresholds`):

1. ``unknown``: none of DRAM, L1, L2 or SM throughput % was recorded.
2. ``occupancy/launch-bound``: the grid has fewer blocks than the GPU has SMs.
3. A unit at or above its mark decides, the busiest one winning, and the label names
   that unit: DRAM (``dram-bound``); L2 (``l2-bound``); L1/TEX or the LSU pipe
   (``l1-bound``); the FMA, ALU, FP64, XU or tensor pipe (``compute-bound``; SM
   throughput % stands in when no pipe was recorded); the issue slots (``issue-bound``:
   the schedulers issue nearly every cycle while no pipe is near its peak).
   The cache and compute marks are 60 %, ncu's own line between "throughput" and
   "latency issue" in its SOLBottleneck rule; DRAM's is 70 %. DRAM at or above its mark
   wins unless another unit is more than ``dram_top_margin_pct`` busier; L2 does not
   count against DRAM when its hit rate is under ``l2_reuse_hit_rate_pct``, because then
   its traffic is the DRAM traffic passing through (a streaming kernel on the H200 shows
   L2 ~87 % with DRAM ~75 %). A math pipe (tensor, FMA, ALU, FP64) at its mark makes
   ``compute-bound`` even when L1/TEX or the LSU pipe is busier: on Hopper the tensor
   cores read their operands through shared memory, so a well-tuned GEMM shows both
   near peak, and the evidence names both. Against DRAM a math pipe needs no margin: at
   its mark and at least as busy as DRAM it makes ``compute-bound`` (a flash-attention
   or GEMM kernel busy on the tensor pipe that also streams from DRAM is limited by the
   tensor pipe, and the evidence starts with it).
4. ``occupancy/launch-bound``: less than ``min_waves`` waves, or achieved occupancy under
   ``min_achieved_occupancy_pct`` (too few warps to fill the GPU).
5. ``latency-bound``: every unit well under its peak with enough blocks; the evidence
   names the busiest unit, the issue rate and the top stall reason.

A tie: when the comparison that decided the label was won by less than ``tie_pts`` (the
busiest bound unit over the busiest one of another label; or, for DRAM, a rival's lead
against ``dram_top_margin_pct``), the label is kept (the rules above are deterministic)
but the evidence starts with the tie, "issue slots 77.0 % ~ L2 throughput 76.9 %: a tie
(within 1 pt)", and :func:`tie` returns it, so reports say the label is a coin toss between
launches rather than a finding. A comparison shows the median-duration launch of a run,
so a run's label is that launch's.

Memory Throughput % is never evidence: it is the max over DRAM, L1 and L2, so a kernel
hammering L1 shows ~95 % there with DRAM idle. The evidence cites the rule messages of
ncu's own rules that bear on the label (:data:`LABEL_RULES`).
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass
from typing import Mapping

from paprof.read import metrics as M
from paprof.read.ncu_reader import ncu_plain

DRAM_BOUND = "dram-bound"
L2_BOUND = "l2-bound"
L1_BOUND = "l1-bound"
COMPUTE_BOUND = "compute-bound"
ISSUE_BOUND = "issue-bound"
LATENCY_BOUND = "latency-bound"
OCCUPANCY_BOUND = "occupancy/launch-bound"
UNKNOWN = "unknown"

#: Every label :func:`classify` can return.
LABELS = (DRAM_BOUND, L2_BOUND, L1_BOUND, COMPUTE_BOUND, ISSUE_BOUND, LATENCY_BOUND,
          OCCUPANCY_BOUND, UNKNOWN)


@dataclass(frozen=True)
class Thresholds:
    """The numbers behind the labels; every field is a percentage of peak unless noted."""

    dram_bound_pct: float = 70.0
    """DRAM throughput at or above this makes a kernel ``dram-bound`` (HBM rarely
    sustains more than ~90 %; 70 % means the DRAM pipe is the limiter, not latency)."""

    dram_top_margin_pct: float = 10.0
    """DRAM near its peak still loses to a cache or pipe more than this many points
    busier (that unit saturates first)."""

    l2_reuse_hit_rate_pct: float = 50.0
    """L2 hit rate (%) below which L2 throughput is DRAM traffic passing through and
    cannot out-rank a busy DRAM."""

    cache_bound_pct: float = 60.0
    """L1/TEX, L2 or LSU-pipe throughput at or above this makes ``l1-bound`` or ``l2-bound`` (ncu's
    SOLBottleneck rule calls under 60 % of peak a latency issue)."""

    compute_bound_pct: float = 60.0
    """An SM pipe (FMA, ALU, FP64, XU, tensor) at or above this makes ``compute-bound``,
    the issue slots ``issue-bound`` (same 60 % line as ncu's SOLBottleneck rule)."""

    min_waves: float = 1.0
    """Fewer waves per SM than this (the grid cannot fill every SM's block slots once)
    makes ``occupancy/launch-bound`` when no unit is near its peak."""

    min_achieved_occupancy_pct: float = 15.0
    """Achieved occupancy under this (about 10 of 64 warps per SM) makes
    ``occupancy/launch-bound`` when no unit is near its peak: too few warps to hide
    memory latency."""

    max_rule_messages: int = 2
    """At most this many ncu rule messages are quoted in the evidence."""

    tie_pts: float = 1.0
    """Percentage points under which the comparison that decided a label is a tie: two
    launches of the same kernel differ by about that much (a 0.1-point lead is noise)."""


#: Rule messages never quoted as evidence: ncu's notes about its own collection.
RULE_NOISE = (re.compile(r"optional metric .* could not be found", re.I),)


DEFAULT_THRESHOLDS = Thresholds()

# (column, human name, threshold field, label) per family, in tie-break order: the label
# names the unit at its limit.
_DRAM_UNITS = (("dram_throughput_pct", "DRAM throughput", "dram_bound_pct", DRAM_BOUND),)
_CACHE_UNITS = (
    ("l1_throughput_pct", "L1/TEX throughput", "cache_bound_pct", L1_BOUND),
    ("l2_throughput_pct", "L2 throughput", "cache_bound_pct", L2_BOUND),
    ("lsu_pipe_pct", "LSU pipe", "cache_bound_pct", L1_BOUND),
)
_PIPE_UNITS = (
    ("fma_pipe_pct", "FMA pipe", "compute_bound_pct", COMPUTE_BOUND),
    ("alu_pipe_pct", "ALU pipe", "compute_bound_pct", COMPUTE_BOUND),
    ("fp64_pipe_pct", "FP64 pipe", "compute_bound_pct", COMPUTE_BOUND),
    ("xu_pipe_pct", "XU pipe", "compute_bound_pct", COMPUTE_BOUND),
    ("tensor_pipe_pct", "tensor pipe", "compute_bound_pct", COMPUTE_BOUND),
    ("issue_slots_busy_pct", "issue slots", "compute_bound_pct", ISSUE_BOUND),
)
UNIT_NAMES: tuple[tuple[str, str], ...] = tuple(
    (c, name) for c, name, _f, _l in (*_DRAM_UNITS, *_CACHE_UNITS, *_PIPE_UNITS))
"""(column, human name) of every unit a label can name, DRAM first: the units whose
throughput times duration measures their work (``decompose``'s fallback)."""
_SM_FALLBACK = (("sm_throughput_pct", "SM throughput", "compute_bound_pct", COMPUTE_BOUND),)

#: The columns whose unit each unit-bound label names (the verdict table shows the
#: busiest of them beside the label).
LABEL_COLUMNS: dict[str, tuple[str, ...]] = {
    label: tuple(c for c, _n, _f, lab in (*_DRAM_UNITS, *_CACHE_UNITS, *_PIPE_UNITS) if lab == label)
    for label in (DRAM_BOUND, L2_BOUND, L1_BOUND, COMPUTE_BOUND, ISSUE_BOUND)
}

_MATH_PIPES = ("fma_pipe_pct", "alu_pipe_pct", "fp64_pipe_pct", "tensor_pipe_pct")
"""Pipes that do arithmetic: at their mark they out-rank the units feeding them."""
_OPERAND_UNITS = ("l1_throughput_pct", "lsu_pipe_pct")
"""L1/shared memory and the pipe that loads from it: where the math pipes' operands come
from, so busy alongside a busy math pipe rather than instead of it."""

#: The SpeedOfLight columns of which at least one must be present to decide anything.
REQUIRED_ANY = ("dram_throughput_pct", "l1_throughput_pct", "l2_throughput_pct",
                "sm_throughput_pct")

#: ncu rule identifiers whose messages support each label (quoted as evidence).
LABEL_RULES: dict[str, tuple[str, ...]] = {
    DRAM_BOUND: ("SOLBottleneck", "MemoryL2Compression", "UncoalescedGlobalAccess",
                 "MemoryCacheAccessPattern"),
    L2_BOUND: ("SOLBottleneck", "UncoalescedGlobalAccess", "MemoryCacheAccessPattern",
               "MemoryL2Compression"),
    L1_BOUND: ("SOLBottleneck", "SharedMemoryConflicts", "UncoalescedSharedAccess",
               "UncoalescedGlobalAccess", "MemoryCacheAccessPattern",
               "HighPipeUtilization"),
    COMPUTE_BOUND: ("SOLBottleneck", "HighPipeUtilization", "IssueSlotUtilization",
                    "SOLFPRoofline"),
    ISSUE_BOUND: ("SOLBottleneck", "IssueSlotUtilization", "HighPipeUtilization"),
    LATENCY_BOUND: ("SOLBottleneck", "CPIStall", "IssueSlotUtilization",
                    "AchievedOccupancy"),
    OCCUPANCY_BOUND: ("SOLBottleneck", "LaunchConfiguration", "AchievedOccupancy",
                      "TheoreticalOccupancy", "Occupancy"),
    UNKNOWN: (),
}


def _num(row: Mapping, column: str) -> float:
    value = row.get(column, math.nan) if hasattr(row, "get") else math.nan
    if type(value) is float:  # most values: float() would return it as it is
        return value
    try:
        value = float(value)
    except (TypeError, ValueError):
        return math.nan
    return value


def _pct(value: float) -> str:
    return f"{value:.1f} %"


@functools.lru_cache(maxsize=4096)
def _first_sentence(text: str, limit: int = 220) -> str:
    """The first sentence of a rule's message, as plain text cut to ``limit`` characters;
    worked out once per text (the same messages come back kernel after kernel, run after
    run: 15 us a row otherwise)."""
    text = " ".join(ncu_plain(text).split())
    match = re.match(r"(.+?[.!?])(\s|$)", text)
    sentence = match.group(1) if match else text
    return sentence if len(sentence) <= limit else sentence[: limit - 1] + "…"


def _rule_evidence(row: Mapping, label: str, limit: int) -> list[str]:
    rules = row.get("rules") if hasattr(row, "get") else None
    if not isinstance(rules, (list, tuple)):
        return []
    wanted = LABEL_RULES.get(label, ())
    chosen = [r for r in rules if (type(r) is dict or isinstance(r, Mapping))
              and r.get("id") in wanted
              and r.get("type") in ("WARNING", "OPTIMIZATION", "ERROR")
              and not _noise(str(r.get("message", "")))]
    chosen.sort(key=lambda r: (wanted.index(r["id"]), -_speedup(r)))
    kernels = row.get("kernels")
    several = isinstance(kernels, (list, tuple)) and len(kernels) > 1  # summed: say whose rule
    return [f"ncu {r['id']}" + (f" ({r['kernel']})" if several and r.get("kernel") else "")
            + f": {_first_sentence(str(r.get('message', '')))}"
            for r in chosen[:limit]]


@functools.lru_cache(maxsize=4096)
def _noise(message: str) -> bool:
    """Whether a rule's message is one ``RULE_NOISE`` passes over; once per text."""
    return any(p.search(message) for p in RULE_NOISE)


def _speedup(rule: Mapping) -> float:
    value = rule.get("speedup_pct")
    try:
        value = float(value)
    except (TypeError, ValueError):
        return 0.0
    return 0.0 if math.isnan(value) else value


def _missing_sentence(row: Mapping, columns) -> str | None:
    missing = [c for c in columns if math.isnan(_num(row, c))]
    if not missing:
        return None
    sections = M.sections_for(missing)
    return (f"not recorded: {', '.join(missing)} "
            f"(section{'s' if len(sections) > 1 else ''} {', '.join(sections)})")


def _units(row: Mapping, th: Thresholds):
    """Present units as (value, name, threshold, label), busiest first."""
    pipes = [u for u in _PIPE_UNITS if not math.isnan(_num(row, u[0]))]
    compute = pipes if pipes else list(_SM_FALLBACK)
    units = []
    order = 0
    for column, name, field, label in (*_DRAM_UNITS, *_CACHE_UNITS, *compute):
        value = _num(row, column)
        if not math.isnan(value):
            units.append((value, -order, name, getattr(th, field), label, column))
        order += 1
    units.sort(reverse=True)
    return [(v, n, t, lab, col) for v, _, n, t, lab, col in units]


@dataclass(frozen=True)
class Tie:
    """The label's deciding comparison, won by less than ``Thresholds.tie_pts``."""

    label: str
    """The label given (the winner's)."""
    other: str
    """The label the runner-up would have given."""
    text: str
    """"issue slots 77.0 % ~ L2 throughput 76.9 %: a tie (within 1 pt)"."""


def tie(row: Mapping, thresholds: Thresholds = DEFAULT_THRESHOLDS) -> Tie | None:
    """The tie that decided ``row``'s label, or None when the label was decided clearly."""
    th = thresholds
    if all(math.isnan(_num(row, c)) for c in REQUIRED_ANY):
        return None
    return _tie(row, _units(row, th), th)


def _tie(row: Mapping, units, th: Thresholds) -> Tie | None:
    """``tie`` given the row's ``_units`` (worked out once per classification)."""
    grid, sms = _num(row, "grid_size"), _num(row, "sm_count")
    if not math.isnan(grid) and not math.isnan(sms) and grid < sms:
        return None
    within = f"within {th.tie_pts:g} pt{'s' if th.tie_pts != 1 else ''}"
    dram, l2_passes_dram, rivals = _dram_rivals(row, units, th)
    if dram is not None:
        math_pipe = _math_rival(dram, rivals)
        if math_pipe is not None:  # compute-bound; a tie when the pipe only just leads
            if math_pipe[0] - dram[0] < th.tie_pts:
                return Tie(COMPUTE_BOUND, DRAM_BOUND, f"{math_pipe[1]} {_pct(math_pipe[0])} ~ "
                           f"DRAM throughput {_pct(dram[0])}: a tie ({within})")
        elif rivals:
            lead = rivals[0][0] - dram[0]
            if abs(lead - th.dram_top_margin_pct) < th.tie_pts:
                winner, loser = ((DRAM_BOUND, rivals[0][3]) if lead <= th.dram_top_margin_pct
                                 else (rivals[0][3], DRAM_BOUND))
                return Tie(winner, loser, (
                    f"{rivals[0][1]} {_pct(rivals[0][0])} against DRAM throughput "
                    f"{_pct(dram[0])}: a {lead:.1f}-point lead against the "
                    f"{th.dram_top_margin_pct:g}-point margin, a tie ({within})"))
            if lead <= th.dram_top_margin_pct:
                return _dram_over_math_tie(dram, units, th, within)
        else:
            return _dram_over_math_tie(dram, units, th, within)
    bound, _ = _bound_units(units)
    if not bound:
        return None
    top = bound[0]
    rival = next((u for u in bound if u[3] != top[3]), None)
    if rival is None or top[0] - rival[0] >= th.tie_pts:
        return None
    return Tie(top[3], rival[3], f"{top[1]} {_pct(top[0])} ~ {rival[1]} {_pct(rival[0])}: "
               f"a tie ({within})")


def classify(row: Mapping, thresholds: Thresholds = DEFAULT_THRESHOLDS
             ) -> tuple[str, list[str]]:
    """``(label, evidence)`` for one row (a pandas Series or any mapping of columns).

    Evidence is a list of sentences citing the numbers and ncu rule messages that decided
    the label; see the module docstring for the decision order.
    """
    th = thresholds
    if all(math.isnan(_num(row, c)) for c in REQUIRED_ANY):
        note = _missing_sentence(row, REQUIRED_ANY)
        return UNKNOWN, [f"cannot classify: {note}"]

    units = _units(row, th)
    label, evidence = _decide(row, units, th)
    tied = _tie(row, units, th)
    if tied is not None and tied.label == label:
        evidence.insert(0, tied.text)
    evidence += _rule_evidence(row, label, th.max_rule_messages)
    decision_inputs = ("dram_throughput_pct", "l1_throughput_pct", "l2_throughput_pct",
                       "lsu_pipe_pct", "fma_pipe_pct", "grid_size", "waves_per_sm",
                       "achieved_occupancy_pct")
    note = _missing_sentence(row, decision_inputs)
    if note:
        evidence.append(note)
    return label, evidence


def _dram_rivals(row: Mapping, units, th: Thresholds):
    """(DRAM's unit when at or above its mark else None, whether L2 only passes DRAM's
    traffic through, the other units at their marks that can out-rank DRAM)."""
    dram = next((u for u in units if u[3] == DRAM_BOUND), None)
    if dram is None or dram[0] < dram[2]:
        return None, False, []
    l2_hit = _num(row, "l2_hit_rate_pct")
    l2_passes_dram = not math.isnan(l2_hit) and l2_hit < th.l2_reuse_hit_rate_pct
    rivals = [u for u in units if u[3] != DRAM_BOUND and u[0] >= u[2]
              and not (l2_passes_dram and u[4] == "l2_throughput_pct")]
    return dram, l2_passes_dram, rivals


def _math_rival(dram, rivals):
    """The busiest math pipe at its mark that is at least as busy as DRAM, if any: it,
    not DRAM, limits the kernel (no margin needed, unlike a cache)."""
    return next((u for u in rivals if u[4] in _MATH_PIPES and u[0] >= dram[0]), None)


def _dram_over_math_tie(dram, units, th: Thresholds, within: str) -> Tie | None:
    """DRAM-bound, but a math pipe at its mark is within a tie of DRAM."""
    pipe = next((u for u in units if u[4] in _MATH_PIPES and u[0] >= u[2]), None)
    if pipe is None or dram[0] - pipe[0] >= th.tie_pts:
        return None
    return Tie(DRAM_BOUND, COMPUTE_BOUND, f"DRAM throughput {_pct(dram[0])} ~ {pipe[1]} "
               f"{_pct(pipe[0])}: a tie ({within})")


def _bound_units(units) -> tuple[list, list]:
    """(units at or above their mark other than DRAM, busiest first; the operand units
    set aside because a math pipe is at its mark too: they feed it, so the math pipe
    decides and they are evidence, not the label)."""
    bound = [u for u in units if u[3] != DRAM_BOUND and u[0] >= u[2]]
    math_pipe = next((u for u in bound if u[4] in _MATH_PIPES), None)
    feeding = [u for u in bound if math_pipe and u[4] in _OPERAND_UNITS]
    # issue slots busy because a math pipe is: the pipe is the limit, not issue
    # (``issue-bound`` is instruction issue with no pipe at its mark)
    issuing = [u for u in bound if math_pipe and u[4] == "issue_slots_busy_pct"]
    return [u for u in bound if u not in feeding and u not in issuing], feeding


def _decide(row: Mapping, units, th: Thresholds) -> tuple[str, list[str]]:
    grid, sms = _num(row, "grid_size"), _num(row, "sm_count")
    waves = _num(row, "waves_per_sm")
    achieved = _num(row, "achieved_occupancy_pct")
    busiest = units[0]
    summary = ", ".join(f"{name} {_pct(v)}" for v, name, *_ in units[:4])

    if not math.isnan(grid) and not math.isnan(sms) and grid < sms:
        idle = int(sms - grid)
        return OCCUPANCY_BOUND, [
            f"grid of {int(grid)} blocks for {int(sms)} SMs: {idle} SMs get no work",
            f"busiest units: {summary}",
        ]

    dram, l2_passes_dram, rivals = _dram_rivals(row, units, th)
    if dram is not None and _math_rival(dram, rivals) is None:
        top_rival = rivals[0] if rivals else None
        if top_rival is None or top_rival[0] - dram[0] <= th.dram_top_margin_pct:
            bandwidth = _num(row, "achieved_bandwidth_gbs")
            evidence = [f"DRAM throughput {_pct(dram[0])} of peak"
                        + (f" ({bandwidth:,.0f} GB/s)" if not math.isnan(bandwidth) else "")
                        + f", at or above {th.dram_bound_pct:g} %"]
            l2 = _num(row, "l2_throughput_pct")
            if l2_passes_dram and l2 > dram[0]:
                evidence.append(f"L2 throughput {_pct(l2)} is that DRAM traffic passing "
                                f"through (L2 hit rate {_pct(_num(row, 'l2_hit_rate_pct'))})")
            others = [u for u in units if u[3] != DRAM_BOUND][:3]
            if others:
                evidence.append("other units: " + ", ".join(
                    f"{name} {_pct(v)}" for v, name, *_ in others))
            return DRAM_BOUND, evidence

    bound, feeding = _bound_units(units)
    if bound:
        value, name, limit, label, _ = bound[0]
        evidence = [f"{name} {_pct(value)} of peak (at or above {limit:g} %)"]
        if feeding and label == COMPUTE_BOUND:
            evidence.append(
                " and ".join(f"{n} {_pct(v)}" for v, n, *_ in feeding)
                + " near peak too: the math pipes read their operands through L1/shared "
                "memory (on Hopper the tensor cores do)")
        dram_value = _num(row, "dram_throughput_pct")
        if not math.isnan(dram_value):
            evidence.append(f"DRAM throughput {_pct(dram_value)}"
                            + (" (not the limiter)" if dram_value >= th.dram_bound_pct
                               else ""))
        more = [f"{n} {_pct(v)}" for v, n, t, lab, _ in bound[1:3]]
        if more:
            evidence.append("also near peak: " + ", ".join(more))
        return label, evidence

    reasons = []
    if not math.isnan(waves) and waves < th.min_waves:
        slots = (f" ({int(grid)} blocks for {grid / waves:,.0f} resident-block slots)"
                 if not math.isnan(grid) and waves > 0 else "")
        reasons.append(f"{waves:.2f} waves per SM: the grid fills "
                       f"{waves * 100:.0f} % of the GPU's block slots{slots}")
    if not math.isnan(achieved) and achieved < th.min_achieved_occupancy_pct:
        reasons.append(f"achieved occupancy {_pct(achieved)} (under "
                       f"{th.min_achieved_occupancy_pct:g} %): too few warps to hide latency")
    if reasons:
        return OCCUPANCY_BOUND, reasons + [
            f"no unit near its peak; busiest: {busiest[1]} {_pct(busiest[0])}"]

    evidence = [f"no unit near its peak: busiest is {busiest[1]} at {_pct(busiest[0])} "
                f"(under {busiest[2]:g} %)"]
    if len(units) > 1:
        evidence.append("then: " + ", ".join(f"{n} {_pct(v)}" for v, n, *_ in units[1:4]))
    issue = _num(row, "issue_active_pct")
    if not math.isnan(issue):
        evidence.append(f"schedulers issue in {_pct(issue)} of active cycles")
    stall = row.get("top_stall_reason") if hasattr(row, "get") else None
    cycles = _num(row, "top_stall_cycles")
    if isinstance(stall, str) and stall and not math.isnan(cycles):
        evidence.append(f"top warp stall: {stall.replace('_', ' ')} "
                        f"({cycles:.1f} cycles per issued instruction)")
    if not math.isnan(waves):
        evidence.append(f"{waves:.2f} waves per SM"
                        + (f", achieved occupancy {_pct(achieved)}"
                           if not math.isnan(achieved) else ""))
    return LATENCY_BOUND, evidence
