"""Why one step takes longer than another, as terms that add up to the measured difference.

The warp-time identity. On each SM sub-partition (scheduler), every cycle that a warp is
resident ends, sooner or later, in the issue of that warp's next instruction, so

    active cycles x warps resident per active cycle = instructions issued x cycles per issued instruction

(``smsp__cycles_active.avg x smsp__warps_active.avg.per_cycle_active = smsp__inst_issued.sum
/ schedulers x smsp__average_warp_latency_per_inst_issued.ratio``: equal to the cycle on the
shipped H200 reports), and the cycles per issued instruction split by what the warp waited
on (the ``stall_*`` reasons, ``selected`` being the issue itself). With the elapsed cycles
and the clock, a kernel's time is a product of factors:

    time = (1 / clock) x (elapsed / active cycles) x instructions per scheduler
           x (sum over reasons of stall cycles per instruction) / warps in flight

Between two kernels the change of each factor is turned into microseconds by the
logarithmic-mean (LMDI) rule: term = L(t_a, t_b) x ln(x_b / x_a), where L(a, b) =
(b - a) / (ln b - ln a). The terms add up to t_b - t_a exactly, whatever the order; the
stall reasons share their factor's term in proportion to how much each moved. Each term
means what it says:

* **instructions**: more or fewer warp instructions per scheduler (vector loads, divergence,
  spills, redundant work, another algorithm);
* **stall: reason**: longer or shorter waits per instruction on that reason (long
  scoreboard: global or local memory; barrier; short scoreboard and MIO: shared memory and
  special functions; wait: fixed-latency dependencies; math pipe throttle; ...);
* **warps in flight**: fewer or more warps resident per scheduler to hide each wait
  (occupancy);
* **idle schedulers**: cycles in which a scheduler had no warp at all (a grid too small
  for the GPU, a partial last wave, a long tail);
* **clock**: the SM clock itself.

A step of several kernels is the sum of its kernels: kernels are matched by name, then
by role (library kernels that differ in a tile suffix), each pair decomposed, and a kernel
that appears or disappears is a term of its own. A term within the noise (the larger of
the runs' spread over steps and ``NOISE_SHARE`` of the time) is never named as a cause.

What it assumes: at most one instruction issues per scheduler per cycle (so "issue
active" cycles count issued instructions), and ncu's counters of one kernel come from
one replay of the same work (they do: the replays repeat the launch). It explains time
*inside* kernels; gaps between launches are not in ncu's durations.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from paprof.model.numbers import finite
from paprof.read.metrics import OPCODE_CLASSES, OPCODE_COLUMNS, STALL_REASONS
from paprof.model.bottleneck import UNIT_NAMES
from paprof.model.kernel_kinds import is_layout_transpose

#: A term smaller than this share of the faster time is noise (ncu's duration of the same
#: launch varies by about 1 % between replays on the H200; twice that, to be safe).
NOISE_SHARE = 0.02

#: What each stall reason means, in words a reader knows.
STALL_WORDS = {
    "long_scoreboard": "waits on global or local memory (long scoreboard)",
    "barrier": "waits at barriers",
    "short_scoreboard": "waits on shared memory or special functions (short scoreboard)",
    "mio_throttle": "a full shared-memory / special-function queue (MIO throttle)",
    "lg_throttle": "a full global-memory instruction queue (LG throttle)",
    "math_pipe_throttle": "a busy math pipe (math pipe throttle)",
    "wait": "fixed-latency dependencies (wait)",
    "not_selected": "eligible warps not picked (not selected)",
    "selected": "issuing",
    "no_instruction": "instruction fetch (no instruction)",
    "branch_resolving": "branch resolution",
    "dispatch_stall": "dispatch stalls",
    "drain": "draining stores at exit",
    "imc_miss": "constant-cache misses",
    "membar": "memory barriers and fences",
    "misc": "miscellaneous stalls",
    "sleeping": "sleeping warps",
    "tex_throttle": "a full texture queue",
    "gmma": "waits on warpgroup matrix operations (GMMA)",
}

#: The counters that can move each term, as (label, how to compute, unit): a column name
#: or a function of a kernel's values.
def _ratio(num: str, den: str):
    def get(v: dict):
        a, b = _f(v.get(num)), _f(v.get(den))
        return a / b if a is not None and b else None
    return get


def _col(name: str):
    return lambda v: _f(v.get(name))


def _last_wave(v: dict):
    """The share of the kernel's SM time a partial last wave leaves idle, % (waves of
    equal length: ``(1 - frac(waves)) / ceil(waves)``; 1.03 waves leave 48.5 %)."""
    waves = _f(v.get("waves_per_sm"))
    if waves is None or waves <= 0:
        return None
    part = waves - math.floor(waves)
    return 100.0 * ((1.0 - part) / math.ceil(waves) if part > 1e-6 else 0.0)


def _sum_of(*cols: str):
    return lambda v: _sum(v, *cols)


# Each counter behind a term: (label, how to compute it, unit, polarity). The polarity says
# which way of moving adds time: +1 a rise (more requests, more sectors per request), -1 a
# fall (a hit rate, threads per instruction), 0 neither (context, e.g. a pipe's busy share
# for the instruction count: never offered as the term's evidence).
_MEMORY = (
    ("global load requests", _col("l1_global_load_requests"), "", 1),
    ("sectors per global load request", _ratio("l1_global_load_sectors", "l1_global_load_requests"), "", 1),
    ("sectors per global store request", _ratio("l1_global_store_sectors", "l1_global_store_requests"), "", 1),
    ("L2 sectors written", _col("l2_write_sectors_from_l1"), "", 1),
    ("local-memory (spill) instructions", _col("spill_instructions"), "", 1),
    ("local-memory loads and stores (LDL, STL)", _sum_of("inst_local_load", "inst_local_store"), "", 1),
    ("DRAM bytes", _col("dram_bytes"), "B", 1),
    ("L2 -> SM bytes", _col("l2_to_l1_bytes"), "B", 1),
    ("L1 hit rate", _col("l1_hit_rate_pct"), "%", -1),
    ("L2 hit rate", _col("l2_hit_rate_pct"), "%", -1),
    ("DRAM throughput", _col("dram_throughput_pct"), "% of peak", 0),
)
_ATOMICS = (
    ("global atomic requests", _sum_of("global_atomic_requests", "global_reduction_requests"), "", 1),
)
_SHARED = (
    ("shared-memory wavefronts per load", _ratio("shared_load_wavefronts", "shared_load_instructions"), "", 1),
    ("shared-memory bank conflicts", _sum_of("shared_load_bank_conflicts", "shared_store_bank_conflicts"), "", 1),
    ("shared-memory instructions", _sum_of("shared_load_instructions", "shared_store_instructions"), "", 1),
    ("special-function and conversion instructions (MUFU, I2F, F2I)", _sum_of("inst_xu", "inst_conversion"), "", 1),
    ("XU pipe (special functions, conversions)", _col("xu_pipe_pct"), "% of peak", 1),
    ("constant loads (LDC)", _col("inst_constant"), "", 1),
)
_PIPES = (
    ("FMA pipe", _col("fma_pipe_pct"), "% of peak", 1),
    ("FP64 pipe", _col("fp64_pipe_pct"), "% of peak", 1),
    ("tensor pipe", _col("tensor_pipe_pct"), "% of peak", 1),
    ("ALU pipe", _col("alu_pipe_pct"), "% of peak", 1),
    ("XU pipe (special functions, conversions)", _col("xu_pipe_pct"), "% of peak", 1),
)
EVIDENCE = {
    "instructions": (
        ("warp instructions", _col("instructions_executed"), "", 1),
        ("threads per instruction", _col("threads_per_instruction"), "", -1),
        ("global load instructions", _col("global_load_instructions"), "", 1),
        ("bytes per global load instruction", _ratio("l1_global_load_bytes", "global_load_instructions"), "B", -1),
        ("bytes the global loads requested", _col("l1_global_load_bytes"), "B", 0),
        ("local-memory (spill) instructions", _col("spill_instructions"), "", 1),
        ("shared-memory instructions", _sum_of("shared_load_instructions", "shared_store_instructions"), "", 1),
    ),
    "stall:long_scoreboard": _MEMORY + _ATOMICS,
    "stall:lg_throttle": _ATOMICS + _MEMORY,
    "stall:membar": _ATOMICS + _MEMORY,
    "stall:drain": _ATOMICS + _MEMORY,
    "stall:barrier": (("barriers per block", _col("barriers_per_block"), "", 1),
                      ("barrier instructions (BAR)", _col("inst_barrier"), "", 1),
                      ("threads per block", _col("block_size"), "", 1),
                      _SHARED[2]),
    "stall:short_scoreboard": _SHARED,
    "stall:mio_throttle": _SHARED,
    "stall:math_pipe_throttle": _PIPES,
    "stall:wait": (("warp instructions", _col("instructions_executed"), "", 0),
                   *((label, fn, unit, 0) for label, fn, unit, _p in _PIPES)),
    "stall:not_selected": (("warps eligible per scheduler", _col("warps_eligible_per_scheduler"), "", 1),),
    "stall:gmma": (("tensor pipe", _col("tensor_pipe_pct"), "% of peak", 0),),
    "warps": (
        ("grid size", _col("grid_size"), "blocks", -1),
        ("theoretical occupancy", _col("theoretical_occupancy_pct"), "%", -1),
        ("achieved occupancy", _col("achieved_occupancy_pct"), "%", -1),
        ("registers per thread", _col("registers_per_thread"), "", 1),
        ("shared memory per block", _col("shared_mem_per_block_bytes"), "B", 1),
        ("blocks per SM (shared memory limit)", _col("block_limit_shared_mem"), "", -1),
        ("blocks per SM (register limit)", _col("block_limit_registers"), "", -1),
    ),
    "idle": (
        ("launches", lambda v: _f(v.get("launches")) or 1.0, "", 1),
        ("SM time a partial last wave leaves idle", _last_wave, "%", 1),
        ("waves per SM", _col("waves_per_sm"), "", -1),
        ("grid size", _col("grid_size"), "blocks", 0),
        ("SM active cycles share", _ratio("smsp_cycles_active", "smsp_cycles_elapsed"), "", -1),
    ),
    "clock": (("SM clock", _col("sm_clock_hz"), "Hz", -1),),
}


#: Every column the decomposition reads of a kernel (``factors``, ``aggregate`` and the
#: counters of ``EVIDENCE``): the compact set a baseline keeps so that the regression gate
#: can decompose against it without the report (``paprof.gate.cause``).
COLUMNS = (
    "duration_us", "smsp_cycles_elapsed", "smsp_cycles_active", "warps_active_per_scheduler",
    "warp_cycles_per_issue", "sm_count", "instructions_issued", "instructions_executed",
    *(f"stall_{r}" for r in STALL_REASONS),
    "launches", "threads_per_instruction", "global_load_instructions", "l1_global_load_bytes",
    "l1_global_load_requests", "l1_global_load_sectors", "spill_instructions", "dram_bytes",
    "l2_to_l1_bytes", "l1_hit_rate_pct", "l2_hit_rate_pct", "dram_throughput_pct",
    "global_atomic_requests", "global_reduction_requests", "shared_load_wavefronts",
    "shared_load_instructions", "shared_store_instructions", "shared_load_bank_conflicts",
    "shared_store_bank_conflicts", "xu_pipe_pct", "fma_pipe_pct", "fp64_pipe_pct",
    "l1_global_store_sectors", "l1_global_store_requests", "l2_write_sectors_from_l1",
    "tensor_pipe_pct", "alu_pipe_pct", "barriers_per_block", "block_size",
    "warps_eligible_per_scheduler", "grid_size", "theoretical_occupancy_pct",
    "achieved_occupancy_pct", "registers_per_thread", "shared_mem_per_block_bytes",
    "block_limit_shared_mem", "block_limit_registers", "waves_per_sm", "sm_clock_hz",
    "global_store_instructions",  # with the shared-memory and sector counts: kernel_kinds
    *OPCODE_COLUMNS,
)


_f = finite


def _sum(v: dict, *cols: str) -> float | None:
    xs = [_f(v.get(c)) for c in cols]
    return sum(xs) if all(x is not None for x in xs) else None


def logmean(a: float, b: float) -> float:
    """L(a, b) = (a - b) / (ln a - ln b); a when they are equal."""
    if a <= 0 or b <= 0:
        raise ValueError("logmean of non-positive values")
    if abs(a - b) <= 1e-12 * max(a, b):
        return a
    return (a - b) / (math.log(a) - math.log(b))


@dataclass(frozen=True)
class Factors:
    """One kernel's time as the identity's factors (module docstring)."""

    time_us: float
    clock: float
    """Elapsed cycles per microsecond (the SM clock, MHz)."""
    idle: float
    """Elapsed over active cycles (>= 1)."""
    instructions: float
    """Warp instructions issued per scheduler."""
    stalls: dict
    """Cycles per issued instruction by reason, scaled to sum to ``cpi`` exactly."""
    cpi: float
    warps: float
    """Warps resident per scheduler per active cycle."""


def factors(values: dict) -> Factors | None:
    """The factors of one kernel's values (a compared kernel's or variant's columns);
    None when a counter the identity needs is missing (a report without WarpStateStats
    or SchedulerStats)."""
    t = _f(values.get("duration_us"))
    elapsed = _f(values.get("smsp_cycles_elapsed"))
    active = _f(values.get("smsp_cycles_active"))
    warps = _f(values.get("warps_active_per_scheduler"))
    cpi = _f(values.get("warp_cycles_per_issue"))
    if not all(x and x > 0 for x in (t, elapsed, active, warps, cpi)):
        return None
    sms = _f(values.get("sm_count"))
    issued = _f(values.get("instructions_issued"))
    # instructions per scheduler: measured where InstructionStats was collected, else
    # what the identity gives from the other three (then the term is exact by definition)
    per_scheduler = issued / (4 * sms) if issued and sms else active * warps / cpi
    stalls = {r: _f(values.get(f"stall_{r}")) or 0.0 for r in STALL_REASONS}
    total = sum(stalls.values())
    if total <= 0:
        return None
    scale = cpi / total
    stalls = {r: s * scale for r, s in stalls.items()}
    # the identity's cycles: instructions x cpi / warps = active cycles; the measured
    # active cycles may differ by rounding: fold it into idle so the product is exact
    modelled_active = per_scheduler * cpi / warps
    return Factors(time_us=t, clock=elapsed / t, idle=elapsed / modelled_active,
                   instructions=per_scheduler, stalls=stalls, cpi=cpi, warps=warps)


@dataclass
class Evidence:
    """One counter behind a term, before and after."""

    label: str
    before: float | None
    after: float | None
    unit: str = ""
    polarity: int = 1
    """+1: a rise adds time; -1: a fall adds time; 0: context, never a term's evidence."""

    def along(self, us: float) -> bool:
        """Moved (``moved``), and the way that makes a term of ``us`` microseconds: a
        count that fell for a term that saves time, a hit rate that rose."""
        if not self.polarity or not self.moved or self.before is None or self.after is None:
            return False
        return (self.after - self.before) * self.polarity * us > 0

    @property
    def ratio(self) -> float | None:
        if self.before and self.after is not None and self.before > 0:
            return self.after / self.before
        return None

    @property
    def change(self) -> float:
        """How far it moved, on one scale for ranking: |ln ratio| of a count, a
        percentage's points / 25, 10 for something from nothing or to nothing."""
        if self.before is None or self.after is None:
            return 10.0 if (self.before is None) != (self.after is None) else 0.0
        if self.unit.startswith("%"):
            return abs(self.after - self.before) / 25.0
        if self.before <= 0 or self.after <= 0:
            return 10.0 if (self.before > 0) != (self.after > 0) else 0.0
        return abs(math.log(self.after / self.before))

    @property
    def moved(self) -> bool:
        if self.unit.startswith("%"):
            if self.before is None or self.after is None:
                return (self.before is None) != (self.after is None)
            return abs(self.after - self.before) >= 5
        r = self.ratio
        if r is None:
            return (self.before is None) != (self.after is None) or (
                self.before == 0 and bool(self.after))
        return abs(math.log(r)) >= math.log(1.15) if r > 0 else True


@dataclass
class Term:
    """One additive part of a step's time difference."""

    key: str
    """``instructions``, ``stall:<reason>``, ``warps``, ``idle``, ``clock``, ``kernel+``,
    ``kernel-``."""
    label: str
    us: float
    """Microseconds this term adds to (positive) or takes from (negative) the step."""
    before: float | None = None
    after: float | None = None
    """The counter the term follows, before and after: for ``instructions`` summed over
    the step's paired kernels; for the other mechanisms, the pair that moved it most."""
    evidence: list[Evidence] = field(default_factory=list)
    kernels: list[str] = field(default_factory=list)
    """Kernels behind it (the new or gone ones, for ``kernel+`` / ``kernel-``)."""
    members: list = field(default_factory=list)
    """For a mechanism's terms taken together (``Decomposition.causes``): the terms."""
    parts: list = field(default_factory=list)
    """For ``instructions``: the term split by instruction class (``Part``, largest first);
    empty where the reports lack InstructionStats' per-opcode counts."""
    work: dict = field(default_factory=dict)
    """For ``kernel+`` / ``kernel-``: what the kernels did (``dram_bytes``,
    ``instructions``), summed; absent counters are left out; ``layout_transposes``: how
    many of them are layout transposes (``kernel_kinds``), only where some are."""

    def to_dict(self) -> dict:
        return {"key": self.key, "label": self.label, "us": self.us, "before": self.before,
                "after": self.after, "kernels": list(self.kernels),
                "classes": [p.to_dict() for p in self.parts], "work": dict(self.work),
                "evidence": [{"label": e.label, "before": e.before, "after": e.after,
                              "unit": e.unit, "ratio": e.ratio, "polarity": e.polarity}
                             for e in self.evidence]}


@dataclass
class Part:
    """One instruction class's share of the ``instructions`` term: its warp instructions
    executed before and after (summed over the paired kernels) and the microseconds it
    carries (the class parts of a term add up to the term exactly)."""

    key: str
    """The class (``metrics.OPCODE_CLASSES``): ``fp32``, ``tensor``, ``global_load`` ..."""
    words: str
    before: float
    after: float
    us: float

    def to_dict(self) -> dict:
        return {"class": self.key, "words": self.words, "before": self.before,
                "after": self.after, "us": self.us}


@dataclass
class Pairing:
    """How the kernels of two steps correspond."""

    pairs: list[tuple]  # (before KernelPart, after KernelPart)
    gone: list
    new: list


@dataclass
class Decomposition:
    """A step's time difference as terms that add up to it."""

    before_us: float
    after_us: float
    terms: list[Term]
    noise_us: float
    pairing: Pairing | None = None
    exact: bool = True
    """False where some kernel pair lacked the identity's counters (its difference is one
    ``unexplained`` term)."""
    limit: "AtLimit | None" = None
    """Where DRAM is at its limit in both steps: the same difference as bytes moved and
    bandwidth used (``at_limit``)."""

    @property
    def delta_us(self) -> float:
        return self.after_us - self.before_us

    @property
    def total_us(self) -> float:
        return sum(t.us for t in self.terms)

    def causes(self) -> list[Term]:
        """The terms that explain the difference, by mechanism: the stall reasons of one
        kind taken together (memory, shared memory, barriers, dependencies and pipes,
        issue: :func:`group`), each other term alone; those of the difference's sign and
        above the noise, the largest first. Empty when the difference itself is noise."""
        d = self.delta_us
        if abs(d) <= self.noise_us:
            return []
        return sorted((t for t in self._mechanisms() if t.us * d > 0 and abs(t.us) > self.noise_us),
                      key=lambda t: -abs(t.us))

    def offsets(self) -> list[Term]:
        """The mechanisms that went the other way (above the noise), the largest first:
        what "partly offset by" names. Empty when the difference itself is noise."""
        d = self.delta_us
        if abs(d) <= self.noise_us:
            return []
        return sorted((t for t in self._mechanisms() if t.us * d < 0 and abs(t.us) > self.noise_us),
                      key=lambda t: -abs(t.us))

    def _mechanisms(self) -> list[Term]:
        d = self.delta_us
        grouped: dict[str, list[Term]] = {}
        for t in self.terms:
            if t.key != "unexplained":
                grouped.setdefault(group(t.key), []).append(t)
        return [members[0] if len(members) == 1 else _combined(name, members, d)
                for name, members in grouped.items()]

    def to_dict(self) -> dict:
        return {"before_us": self.before_us, "after_us": self.after_us,
                "delta_us": self.delta_us, "noise_us": self.noise_us, "exact": self.exact,
                "terms": [t.to_dict() for t in self.terms],
                "causes": [t.key for t in self.causes()],
                "at_limit": self.limit.to_dict() if self.limit else None}


# -- mechanisms ------------------------------------------------------------------------
_GROUP = {
    "stall:long_scoreboard": "memory", "stall:lg_throttle": "memory", "stall:drain": "memory",
    "stall:membar": "memory", "stall:tex_throttle": "memory", "stall:imc_miss": "memory",
    "stall:short_scoreboard": "shared", "stall:mio_throttle": "shared",
    "stall:barrier": "barrier",
    "stall:selected": "issue", "stall:not_selected": "issue",
    "instructions": "instructions", "warps": "warps", "idle": "idle", "clock": "clock",
    "kernel+": "kernels", "kernel-": "kernels", "unexplained": "unexplained",
    "unit:work": "unit_work", "unit:busy": "unit_busy",
}

GROUP_WORDS = {
    "memory": "memory waits", "shared": "MIO and short-scoreboard waits", "barrier": "barrier waits",
    "pipes": "dependencies and busy pipes", "issue": "issue", "kernels": "kernels new or gone",
}


def group(key: str) -> str:
    """The mechanism a term belongs to (the ledger's columns): ``memory``, ``shared``,
    ``barrier``, ``pipes``, ``issue``, ``instructions``, ``warps``, ``idle``, ``clock``,
    ``kernels`` or ``unexplained``."""
    return _GROUP.get(key, "pipes" if key.startswith("stall:") else "unexplained")


def _combined(name: str, members: list[Term], d: float) -> Term:
    """Several terms of one mechanism as one: their sum, keyed and labelled by the one
    that moved most the difference's way, with the counters of all of them."""
    lead = max(members, key=lambda t: t.us if d > 0 else -t.us)
    evidence, seen = [], set()
    for t in sorted(members, key=lambda t: -abs(t.us)):
        for e in t.evidence:
            if e.label not in seen:
                seen.add(e.label)
                evidence.append(e)
    stalls = all(t.key.startswith("stall:") for t in members)
    before = sum(t.before or 0.0 for t in members) if stalls else None
    after = sum(t.after or 0.0 for t in members) if stalls else None
    out = Term(lead.key, GROUP_WORDS.get(name, name), sum(t.us for t in members), before, after,
               evidence, sorted({k for t in members for k in t.kernels}))
    out.members = sorted(members, key=lambda t: -abs(t.us))
    return out


# -- kernel matching ---------------------------------------------------------------------
_ROLES = (
    ("GEMM", ("gemm", "matmul", "xmma", "cutlass", "nvjet", "hgmma", "cublas")),
    ("attention", ("flash", "attention", "fmha", "sdpa")),
    ("softmax", ("softmax",)),
    ("norm", ("norm",)),
    ("reduction", ("reduce",)),
    ("elementwise", ("elementwise",)),
)


def role(name: str) -> str:
    """A kernel's role for matching: a library family (GEMM, attention ...) or, for other
    kernels, the name without template arguments and trailing numeric suffixes."""
    low = name.lower()
    if low.startswith("triton"):
        return "triton"
    for label, words in _ROLES:
        if any(w in low for w in words):
            return label
    base = re.sub(r"[<(].*", "", name)
    return re.sub(r"(_\d+)+$", "", base)


def match_kernels(before: list, after: list) -> Pairing:
    """Pair the kernels of two steps: equal names first (in launch order), then equal
    roles, then, where one side has a single kernel left, the other side's longest; the
    rest are gone (before only) or new (after only)."""
    left, right = list(before), list(after)
    pairs = []
    for key in (lambda k: k.kernel, lambda k: role(k.kernel)):
        remaining = []
        for b in left:
            hit = next((a for a in right if key(a) == key(b)), None)
            if hit is None:
                remaining.append(b)
            else:
                right.remove(hit)
                pairs.append((b, hit))
        left = remaining
    # One kernel left on a side: the other side's kernel that took its place is the
    # longest one left there (v3 -> v4's partial kernel; v4's merge is new) of the same
    # kind: a layout transpose does not take the place of a kernel that computes, nor the
    # reverse (a transpose and a reduction against the reduction alone: the transpose is
    # gone). Several on both sides (eager's elementwise kernels against compiled's fused
    # ones): no pairing.
    if left and right and (len(left) == 1 or len(right) == 1):
        def longest(parts, like=None):
            same = [k for k in parts if like is None
                    or is_layout_transpose(_values(k)) == is_layout_transpose(_values(like))]
            return max(same or parts, key=lambda k: _f(k.duration_us) or 0.0)
        if len(left) == 1:
            b = left[0]
            a = longest(right, like=b)
        else:
            a = right[0]
            b = longest(left, like=a)
        left.remove(b)
        right.remove(a)
        pairs.append((b, a))
    order = {id(k): i for i, k in enumerate(before)}
    pairs.sort(key=lambda p: order[id(p[0])])
    return Pairing(pairs, left, right)


# -- the decomposition -------------------------------------------------------------------
def _pair_terms(a: dict, b: dict) -> list[Term] | None:
    fa, fb = factors(a), factors(b)
    if fa is None or fb is None:
        return None
    lm = logmean(fa.time_us, fb.time_us)

    def term(key, label, xa, xb, sign=1.0):
        return Term(key, label, sign * lm * math.log(xb / xa), xa, xb)

    out = [
        term("instructions", "instructions issued", fa.instructions, fb.instructions),
        term("warps", "warps in flight", fa.warps, fb.warps, -1.0),
        term("idle", "idle schedulers", fa.idle, fb.idle),
        term("clock", "SM clock", fa.clock, fb.clock, -1.0),
    ]
    cpi_term = lm * math.log(fb.cpi / fa.cpi)
    cpi_mean = logmean(fa.cpi, fb.cpi)
    for r in STALL_REASONS:
        sa, sb = fa.stalls[r], fb.stalls[r]
        if sa == 0 and sb == 0:
            continue
        # each reason's share of the cpi factor's log change: (s_b - s_a) / L(cpi_a, cpi_b)
        us = lm * (sb - sa) / cpi_mean
        out.append(Term(f"stall:{r}", STALL_WORDS.get(r, r.replace("_", " ")), us, sa, sb))
    # (the reason terms add up to cpi_term: sum(s_b - s_a) = cpi_b - cpi_a)
    assert abs(sum(t.us for t in out if t.key.startswith("stall:")) - cpi_term) <= 1e-6 * max(1.0, abs(cpi_term))
    for t in out:
        t.evidence = [Evidence(label, fn(a), fn(b), unit, pol)
                      for label, fn, unit, pol in EVIDENCE.get(t.key, ())]
        if t.key == "instructions":
            t.parts = _class_parts(a, b, fa.instructions, fb.instructions, t.us)
    return out


def _class_parts(a: dict, b: dict, xa: float, xb: float, us: float) -> list[Part]:
    """The instructions term ``us`` split by class: class c carries ``us x (x_c,b - x_c,a)
    / (x_b - x_a)``, x_c the class's share of the instructions issued per scheduler (so the
    parts add up to the term; with an unchanged total the term is zero and so is every
    part). Empty without the per-opcode counts."""
    counts_a = [_f(a.get(c.column)) for c in OPCODE_CLASSES]
    counts_b = [_f(b.get(c.column)) for c in OPCODE_CLASSES]
    if any(x is None for x in counts_a + counts_b):
        return []
    total_a, total_b = sum(counts_a), sum(counts_b)
    if total_a <= 0 or total_b <= 0:
        return []
    shares = [(ca / total_a * xa, cb / total_b * xb) for ca, cb in zip(counts_a, counts_b)]
    moved = xb - xa
    per = us / moved if abs(moved) > 1e-12 * max(xa, xb) else 0.0
    parts = [Part(c.key, c.words, ca, cb, per * (sb - sa))
             for c, ca, cb, (sa, sb) in zip(OPCODE_CLASSES, counts_a, counts_b, shares)
             if ca or cb]
    return sorted(parts, key=lambda p: -abs(p.us))


def _values(part) -> dict:
    v = dict(part.values)
    v.setdefault("duration_us", part.duration_us)
    return v


@dataclass
class _Aggregate:
    """The launches of one kernel name in one step, as one kernel: durations, cycles and
    instructions summed, warps weighted by active cycles, cycles per instruction and
    stalls by instructions, so the identity holds for the whole exactly as for each."""

    kernel: str
    values: dict
    launches: int

    @property
    def duration_us(self) -> float | None:
        return _f(self.values.get("duration_us"))


_SUMMED = ("duration_us", "smsp_cycles_elapsed", "smsp_cycles_active", "instructions_issued",
           "instructions_executed", "dram_bytes", "l2_to_l1_bytes", "global_load_instructions",
           "global_store_instructions",
           "l1_global_load_requests", "l1_global_load_sectors", "l1_global_load_bytes",
           "shared_load_instructions", "shared_store_instructions", "shared_load_wavefronts",
           "shared_load_bank_conflicts", "shared_store_bank_conflicts", "spill_instructions",
           "global_atomic_requests", "global_reduction_requests", "l1_global_store_sectors",
           "l1_global_store_requests", "l2_write_sectors_from_l1", *OPCODE_COLUMNS)


def _per_scheduler(v: dict) -> float | None:
    """Instructions issued per scheduler, by the identity (active x warps / cycles per
    instruction): what weights each launch's cycles per instruction and stalls."""
    active, warps, cpi = (_f(v.get(c)) for c in ("smsp_cycles_active", "warps_active_per_scheduler",
                                                 "warp_cycles_per_issue"))
    return active * warps / cpi if active and warps and cpi else None


def aggregate(parts: list) -> list[_Aggregate]:
    """One ``_Aggregate`` per kernel name, in order of first launch."""
    by_name: dict[str, list] = {}
    for p in parts:
        by_name.setdefault(p.kernel, []).append(p)
    out = []
    for name, group in by_name.items():
        values = [_values(p) for p in group]
        if len(values) == 1:
            out.append(_Aggregate(name, values[0], 1))
            continue
        merged = dict(max(values, key=lambda v: _f(v.get("duration_us")) or 0.0))
        for col in _SUMMED:
            xs = [_f(v.get(col)) for v in values]
            merged[col] = sum(xs) if all(x is not None for x in xs) else None
        active = [_f(v.get("smsp_cycles_active")) for v in values]
        issued = [_per_scheduler(v) for v in values]
        if all(active) and all(issued):
            warp_cycles = sum(a * _f(v["warps_active_per_scheduler"]) for a, v in zip(active, values))
            merged["warps_active_per_scheduler"] = warp_cycles / sum(active)
            merged["warp_cycles_per_issue"] = warp_cycles / sum(issued)
            for r in STALL_REASONS:
                col = f"stall_{r}"
                merged[col] = sum((_f(v.get(col)) or 0.0) * i for v, i in zip(values, issued)) / sum(issued)
        for col in ("dram_throughput_pct", "tensor_pipe_pct", "fma_pipe_pct", "fp64_pipe_pct",
                    "alu_pipe_pct", "l1_hit_rate_pct", "l2_hit_rate_pct", "threads_per_instruction"):
            pairs = [(_f(v.get(col)), _f(v.get("duration_us"))) for v in values]
            if all(x is not None and d for x, d in pairs):
                merged[col] = sum(x * d for x, d in pairs) / sum(d for _x, d in pairs)
        merged["launches"] = len(values)
        out.append(_Aggregate(name, merged, len(values)))
    return out


def _merge_parts(have: list[Part], more: list[Part]) -> list[Part]:
    """Two kernel pairs' class parts as one list (counts and microseconds summed); empty
    when either pair has none (a class split of part of a term would not add up)."""
    if not have or not more:
        return []
    by = {p.key: Part(p.key, p.words, p.before, p.after, p.us) for p in have}
    for p in more:
        got = by.get(p.key)
        if got is None:
            by[p.key] = Part(p.key, p.words, p.before, p.after, p.us)
        else:
            got.before += p.before
            got.after += p.after
            got.us += p.us
    return sorted(by.values(), key=lambda p: -abs(p.us))


def _work(parts: list) -> dict:
    """What kernels that appear or disappear did: DRAM bytes and warp instructions, summed
    (a counter is left out where a kernel lacks it), and how many of them are layout
    transposes (``kernel_kinds``)."""
    out = {}
    for key, column in (("dram_bytes", "dram_bytes"), ("instructions", "instructions_executed")):
        xs = [_f(_values(p).get(column)) for p in parts]
        if xs and all(x is not None for x in xs):
            out[key] = sum(xs)
    transposes = sum(1 for p in parts if is_layout_transpose(_values(p)))
    if transposes:  # kept out of the document where there are none
        out["layout_transposes"] = transposes
    return out


MISSING_SECTIONS = "no WarpStateStats, SchedulerStats or InstructionStats counters in these reports"
"""What a pair decomposed by its busiest unit lacks (ncu's basic set: SpeedOfLight,
LaunchStats, Occupancy): said with its cause instead of guessing the mechanism."""


def _unit_terms(va: dict, vb: dict, da: float, db: float) -> list[Term] | None:
    """A kernel pair without the warp-time identity's counters (a report of ncu's basic
    set, the default of ``ncu`` without ``--set``), split by the unit busiest in the
    slower kernel: its work W = throughput x duration (the time the unit would take at its
    peak rate) and its throughput u, so ``t = W / u`` and ``ln(tb/ta) = ln(Wb/Wa) -
    ln(ub/ua)``; with the logarithmic mean of the two durations the two terms add up to
    the difference exactly. None where no unit's throughput is in both."""

    if not da or not db or da <= 0 or db <= 0:
        return None
    slow = vb if db >= da else va
    units = [(c, name) for c, name in UNIT_NAMES
             if (_f(va.get(c)) or 0) > 0 and (_f(vb.get(c)) or 0) > 0]
    if not units:
        return None
    column, name = max(units, key=lambda u: _f(slow.get(u[0])))
    name = name.removesuffix(" throughput")  # "L1/TEX throughput" -> "L1/TEX"
    ua, ub = _f(va.get(column)), _f(vb.get(column))
    wa, wb = ua / 100 * da, ub / 100 * db
    log_mean = (db - da) / math.log(db / da) if db != da else da
    work = log_mean * math.log(wb / wa)
    return [Term("unit:work", f"{name} work", work, wa, wb,
                 [Evidence(f"{name} busy time at its peak rate", wa, wb, "us", 1)]),
            Term("unit:busy", f"{name} throughput", (db - da) - work, ua, ub,
                 [Evidence(f"{name} throughput", ua, ub, "% of peak", -1)])]


#: Terms whose ``before`` / ``after`` are counts that add over kernels (instructions issued
#: per scheduler): a step's term holds the paired kernels' sums, so a ratio of them is the
#: step's. The others (warps, stalls, clock: rates) keep the pair that moved the term most.
_SUMMED_TERMS = ("instructions",)


def decompose(before, after, spread_us: float = 0.0) -> Decomposition | None:
    """The step ``before -> after`` (two ``VariantResult``) as terms; None without
    durations. ``spread_us``: the runs' measured spread of the step time, if any."""
    ta, tb = _f(before.get("duration_us")), _f(after.get("duration_us"))
    if not ta or not tb:
        return None
    pairing = match_kernels(aggregate(before.kernels), aggregate(after.kernels))
    merged: dict[str, Term] = {}
    largest: dict[str, float] = {}  # the |us| of the pair whose counters a term shows
    exact = True
    for ka, kb in pairing.pairs:
        va, vb = _values(ka), _values(kb)
        terms = _pair_terms(va, vb)
        if terms is None:
            da, db = _f(va.get("duration_us")) or 0.0, _f(vb.get("duration_us")) or 0.0
            terms = _unit_terms(va, vb, da, db) or [
                Term("unexplained", "a kernel pair without WarpStateStats / SchedulerStats counters",
                     db - da, da, db)]
            exact = False
        for t in terms:
            have = merged.get(t.key)
            if have is None:
                t.kernels = [kb.kernel]
                merged[t.key] = t
                largest[t.key] = abs(t.us)
                continue
            if t.key in _SUMMED_TERMS:  # counts of the same thing: the pairs' sum
                have.before = (have.before or 0.0) + (t.before or 0.0)
                have.after = (have.after or 0.0) + (t.after or 0.0)
            if abs(t.us) > largest[t.key]:  # several pairs: the counters of the one that
                largest[t.key] = abs(t.us)  # moved the term most
                have.evidence = t.evidence
                if t.key not in _SUMMED_TERMS:
                    have.before, have.after = t.before, t.after
            have.us += t.us
            have.kernels.append(kb.kernel)
            have.parts = _merge_parts(have.parts, t.parts)
    for key, parts, sign, label in (("kernel-", pairing.gone, -1.0, "kernels gone"),
                                    ("kernel+", pairing.new, 1.0, "kernels new")):
        if parts:
            us = sign * sum(_f(p.duration_us) or 0.0 for p in parts)
            names = [p.kernel + (f" x{p.launches}" if getattr(p, "launches", 1) > 1 else "")
                     for p in sorted(parts, key=lambda p: -(_f(p.duration_us) or 0.0))]
            merged[key] = Term(key, label, us, kernels=names, work=_work(parts))
    terms = sorted(merged.values(), key=lambda t: -abs(t.us))
    # what the kernels' sum misses of the step's own time (none when the step is the sum)
    rest = (tb - ta) - sum(t.us for t in terms)
    if abs(rest) > 1e-6 * max(ta, tb):
        terms.append(Term("unexplained", "not in the kernels' durations", rest))
        exact = False
    noise = max(NOISE_SHARE * min(ta, tb), spread_us)
    return Decomposition(ta, tb, terms, noise, pairing, exact, at_limit(before, after))


#: DRAM busy at least this share of its peak (ncu's ``gpu__dram_throughput``) in both steps:
#: the unit is at its limit and the step's time is its bytes over the bandwidth it reaches
#: (the roofline's "near the roof" threshold).
AT_LIMIT_PCT = 60.0


@dataclass
class AtLimit:
    """The unit-at-its-limit identity for a memory-bound step: time = bytes / bandwidth
    reached, so ``ln(t1/t0) = ln(B1/B0) - ln(BW1/BW0)`` exactly, and with the logarithmic
    mean ``L(t0, t1)`` the difference is ``bytes_us + bandwidth_us`` to the rounding."""

    unit: str
    bytes_before: float
    bytes_after: float
    pct_before: float
    pct_after: float
    """The unit's busy share of its peak (ncu's), for the words; the identity uses the
    bandwidth reached (bytes over time)."""
    bytes_us: float
    """What moving more (positive) or fewer bytes adds to the step."""
    bandwidth_us: float
    """What reaching a lower (positive) or higher bandwidth adds to the step."""

    def to_dict(self) -> dict:
        return {"unit": self.unit, "bytes_before": self.bytes_before,
                "bytes_after": self.bytes_after, "pct_of_peak_before": self.pct_before,
                "pct_of_peak_after": self.pct_after, "bytes_us": self.bytes_us,
                "bandwidth_us": self.bandwidth_us}


def at_limit(before, after) -> AtLimit | None:
    """The step ``before -> after`` as DRAM bytes and DRAM bandwidth reached, where DRAM is
    at its limit (``AT_LIMIT_PCT``) in both; None elsewhere (the warp-time terms alone
    say what moved, and bytes over bandwidth would name an outcome, not a cause)."""
    ta, tb = _f(before.get("duration_us")), _f(after.get("duration_us"))
    ba, bb = _f(before.get("dram_bytes")), _f(after.get("dram_bytes"))
    pa, pb = _f(before.get("dram_throughput_pct")), _f(after.get("dram_throughput_pct"))
    if not (ta and tb and ba and bb and pa and pb) or min(pa, pb) < AT_LIMIT_PCT:
        return None
    scale = logmean(ta, tb)
    bytes_us = scale * math.log(bb / ba)
    bandwidth_us = -scale * math.log((bb / tb) / (ba / ta))
    return AtLimit("DRAM", ba, bb, pa, pb, bytes_us, bandwidth_us)
