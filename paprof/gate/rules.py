"""The gate's per-metric rules: directions, tolerances, minimum effects, units and the
check's settings."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from paprof.explain import fmt
from paprof.read.metrics import BY_COLUMN, INSTRUCTION_CLASSES, INSTRUCTION_UNIT
from paprof.errors import UserError

DEFAULT_METRICS = ("dram_throughput_pct", "duration_us", "dram_bytes")
"""Metrics a baseline records when none are named."""



@dataclass(frozen=True)
class Tolerance:
    """How far a metric may get worse before it counts as a regression.

    The allowance is the larger of ``absolute`` and ``relative * |baseline|``.
    """

    absolute: float = 0.0
    """In the metric's own unit (percentage points for a ``%`` metric)."""
    relative: float = 0.0
    """A fraction of the baseline value (0.05 = 5 %)."""

    def allowed(self, baseline: float) -> float:
        return max(self.absolute, self.relative * abs(baseline))

    def spec(self) -> str:
        """The ``--tolerance`` text of this tolerance (``3``, ``0.5%``), see ``parse_tolerance``."""
        if self.relative and not self.absolute:
            return f"{self.relative * 100:g}%"
        return f"{self.absolute:g}"

    def describe(self, unit: str) -> str:
        parts = []
        if self.absolute:
            parts.append(f"{fmt.sig(self.absolute, 4)} {'pts' if unit == '%' else unit}")
        if self.relative:
            parts.append(f"{fmt.sig(self.relative * 100, 4)} %")
        return " or ".join(parts) or "0"


@dataclass(frozen=True)
class GateRule:
    """What the gate knows about one metric column of the catalogue."""

    label: str
    """Words for people, e.g. ``DRAM throughput``."""
    higher_is_better: bool
    """Direction: True for throughput and bandwidth, False for time and bytes."""
    tolerance: Tolerance
    """Default tolerance (``Settings.tolerances`` overrides it)."""
    min_effect: float | None = None
    """Smallest relative change worth failing for, when both sides have per-launch samples
    (the statistical decision); None: never decided statistically. A ``--tolerance``
    given for the metric replaces it (relative, or absolute over the baseline value)."""
    count: bool = False
    """A deterministic count (registers, bytes, instructions): gated exactly, no spread
    allowance, no statistics."""
    two_sided: bool = False
    """A count whose fall is also a change to look at (registers, shared memory, the
    instruction mix): it fails either way unless ``Settings.ratchet`` lets it fall."""


# Minimum effects of the statistical decision: chosen before the power measurement of
# scripts/gate_power.py on the H200 (kernels/NOTES.md) and to be confirmed by its table.
# Event-timed launches of one process differ by ~0.3 %; 2 % leaves room for the drift
# between the baseline's process and now's, and still resolves a 3 % slowdown.
EVENT_MIN_EFFECT = 0.02
NCU_MIN_EFFECT = 0.03
"""Under ncu (caches flushed before each replay, one replay pass a metric) launches vary
more than under CUDA events: 3 %."""

SASS_CLASSES = tuple(c.name for c in INSTRUCTION_CLASSES)
"""The SASS instruction classes the static gate counts (``sass_<class>``, per kernel): the
catalogue's ``INSTRUCTION_CLASSES``."""

GATE_RULES: dict[str, GateRule] = {
    # Percent of peak: an absolute allowance in percentage points. 3 pp is about 3.5 %
    # of a DRAM-bound kernel's ~85 %: well above launch-to-launch noise under ncu (which
    # flushes caches before each replay), well below a lost optimisation (v3 -> v2 ~25 pp).
    "dram_throughput_pct": GateRule("DRAM throughput", True, Tolerance(absolute=3.0),
                                    NCU_MIN_EFFECT),
    # Bandwidth and time: relative. Time varies more than throughput % across processes
    # when clocks are not locked (--clock-control none), hence 5 %.
    "achieved_bandwidth_gbs": GateRule("achieved DRAM bandwidth", True,
                                       Tolerance(relative=0.03), NCU_MIN_EFFECT),
    "duration_us": GateRule("duration", False, Tolerance(relative=0.05), NCU_MIN_EFFECT),
    # The launcher's CUDA-event-timed launches (outside ncu, 20 by default): the cheap,
    # many-sample path; always decided statistically when both sides have the samples.
    "duration_us_event": GateRule("duration (CUDA events)", False, Tolerance(relative=0.05),
                                  EVENT_MIN_EFFECT),
    "elapsed_cycles": GateRule("elapsed cycles", False, Tolerance(relative=0.05),
                               NCU_MIN_EFFECT),
    # Deterministic counts: the same code on the same shape moves the same bytes (0.5 %:
    # ncu's DRAM counters see a few refresh and page-table bytes more or less).
    "dram_bytes": GateRule("DRAM bytes", False, Tolerance(relative=0.005), count=True),
    "registers_per_thread": GateRule("registers per thread", False, Tolerance(), count=True,
                                     two_sided=True),
    "shared_mem_per_block_bytes": GateRule("shared memory per block", False, Tolerance(),
                                           count=True, two_sided=True),
    "shared_mem_static_bytes": GateRule("static shared memory per block", False, Tolerance(),
                                        count=True, two_sided=True),
    # Executed instructions: deterministic for a kernel whose control flow depends on the
    # shape only; 0.1 % for the few that branch on data.
    "instructions_executed": GateRule("instructions executed", False,
                                      Tolerance(relative=0.001), count=True, two_sided=True),
    "spill_instructions": GateRule("spilling instructions executed", False, Tolerance(),
                                   count=True),
    # The family's work model over the duration: what a compute-bound family gates on.
    "work_tbs": GateRule("useful bandwidth (work model)", True, Tolerance(relative=0.05),
                         NCU_MIN_EFFECT),
    "work_tflops": GateRule("useful FLOP rate (work model)", True, Tolerance(relative=0.05),
                            NCU_MIN_EFFECT),
    "tensor_pipe_pct": GateRule("tensor-pipe utilisation", True, Tolerance(absolute=3.0),
                                NCU_MIN_EFFECT),
    # A compute-bound family's other busy share (flash_fwd's gate_metrics): the SM's
    # throughput %, the max over its pipes and issue slots; 3 pp as for DRAM.
    "sm_throughput_pct": GateRule("SM throughput", True, Tolerance(absolute=3.0),
                                  NCU_MIN_EFFECT),
    # Calibrated to the machine: a share of the read ceiling measured in the same call
    # (check --profile), so a slower or faster card of the same model does not fail.
    "work_tbs_pct_of_ceiling": GateRule("useful bandwidth, % of the read ceiling", True,
                                        Tolerance(absolute=3.0), NCU_MIN_EFFECT),
    "dram_bandwidth_pct_of_ceiling": GateRule("DRAM bandwidth, % of the read ceiling", True,
                                              Tolerance(absolute=3.0), NCU_MIN_EFFECT),
    # The static gate (check --static): from ptxas and the cubin, exact.
    "spill_stores_bytes": GateRule("spill stores", False, Tolerance(), count=True),
    "spill_loads_bytes": GateRule("spill loads", False, Tolerance(), count=True),
    "stack_frame_bytes": GateRule("stack frame", False, Tolerance(), count=True),
    "local_mem_bytes": GateRule("local memory per thread", False, Tolerance(), count=True),
    "const_mem_bytes": GateRule("constant memory (bank 0)", False, Tolerance(), count=True,
                                two_sided=True),
    # The instruction mix: 10 % either way (ptxas of another CUDA release schedules a
    # little differently; a lost vector width or an added loop moves far more).
    **{c.column: GateRule(c.label, False, Tolerance(relative=0.10), count=True, two_sided=True)
       for c in INSTRUCTION_CLASSES},
}
"""Direction and default tolerance per gateable metric, keyed by the catalogue's columns
(whose ``unit`` says what an absolute tolerance is in) and the gate's own (``UNITS``)."""

UNITS = {
    "duration_us_event": "us",
    "work_tbs_pct_of_ceiling": "%",
    "dram_bandwidth_pct_of_ceiling": "%",
    "spill_stores_bytes": "byte",
    "spill_loads_bytes": "byte",
    "stack_frame_bytes": "byte",
    "local_mem_bytes": "byte",
    "const_mem_bytes": "byte",
    **{c.column: INSTRUCTION_UNIT for c in INSTRUCTION_CLASSES},
}
"""Units of the gated metrics that are not catalogue columns."""

STATIC_METRICS = ("registers_per_thread", "spill_stores_bytes", "spill_loads_bytes",
                  "stack_frame_bytes", "shared_mem_static_bytes", "local_mem_bytes",
                  "const_mem_bytes") + tuple(f"sass_{c}" for c in SASS_CLASSES)
"""What ``paprof baseline update --static`` records per kernel (the ``sass_`` mix only
where cuobjdump is found)."""


PICTURE_METRICS = ("registers_per_thread", "spill_stores_bytes", "spill_loads_bytes",
                   "stack_frame_bytes", "local_mem_bytes", "shared_mem_static_bytes")
"""A kernel's resource picture in the static gate: what sets its occupancy (registers,
static shared memory, at the launch's block size) and its local-memory traffic (spills,
stack, local memory)."""

INSTRUCTION_COUNTS = tuple(f"sass_{c}" for c in SASS_CLASSES)
"""The static gate's instruction mix. A change in it with the picture unchanged (a
deliberate ``#pragma unroll 8``: more FFMAs, fewer branches, the same registers) is
reported, not failed, unless ``Settings.exact_counts``."""

REPORTED = "reported"
"""The verdict of an instruction count that changed while its kernel's picture did not."""


def unit(metric: str) -> str:
    """The unit of ``metric`` (``%``, ``us``, ``byte``, ``GB/s``, ``cycle``, ``inst``)."""
    return UNITS[metric] if metric in UNITS else BY_COLUMN[metric].unit


def rule(metric: str) -> GateRule:
    """The gate rule of ``metric``; a ``UserError`` naming the gateable ones otherwise."""
    try:
        return GATE_RULES[metric]
    except KeyError:
        raise UserError(
            f"cannot gate on {metric!r}: no direction declared for it; "
            f"gateable metrics: {', '.join(GATE_RULES)}"
        ) from None


def parse_tolerance(text: str) -> tuple[str, Tolerance]:
    """Parse ``--tolerance`` text into ``(metric, Tolerance)``.

    ``METRIC=VALUE`` sets one metric's tolerance, a bare ``VALUE`` every gated metric's
    (metric ``"*"``). ``VALUE`` is absolute in the metric's unit (percentage points for
    a ``%`` metric: ``dram_throughput_pct=2``) or, with a ``%`` suffix, relative to the
    baseline value (``duration_us=3%``).
    """
    metric, sep, value = text.partition("=")
    if not sep:
        metric, value = "*", text
    metric, value = metric.strip(), value.strip()
    if metric != "*":
        rule(metric)
    relative = value.endswith("%")
    try:
        number = float(value[:-1].strip() if relative else value)  # one '%': '5%%' is no number
    except ValueError:
        raise UserError(
            f"tolerance {text!r} is not [METRIC=]NUMBER[%] (e.g. dram_throughput_pct=2, "
            "duration_us=5%)"
        ) from None
    if not math.isfinite(number) or number < 0:
        raise UserError(f"tolerance {text!r} must be a non-negative number")
    if relative and number > 10000:
        raise UserError(f"tolerance {text!r} lets anything pass (over 10000 %: a hundredfold); "
                        "give a tolerance a regression can exceed")
    tol = Tolerance(relative=number / 100) if relative else Tolerance(absolute=number)
    return metric, tol


@dataclass
class Settings:
    """How ``compare_to_baseline`` judges the current runs."""

    metrics: tuple[str, ...] | None = None
    """Metric columns to gate; None gates every metric the baseline holds."""
    tolerances: dict[str, Tolerance] = field(default_factory=dict)
    """Tolerance overrides by metric column; key ``"*"`` applies to every gated metric
    not named itself. Metrics not given here use ``GATE_RULES[metric].tolerance``."""
    allow_mismatch: bool = False
    """Compare anyway when GPU model, ncu version, clock control or shape differ
    (each difference becomes a note in the verdict) instead of refusing with exit 2."""
    ratchet: bool = False
    """Two-sided counts (registers, shared memory, instruction mix) may fall (reported
    ``improved``) but not rise; without it a change either way fails."""
    confidence: float = 0.99
    """Of the statistical decision: the test's level (alpha = 1 - confidence) and the
    bootstrap interval."""
    rounds: int = 3
    """Measurements of now, at most, for an ``ambiguous`` decision (1 + re-measurements)
    when the caller can re-measure."""
    fail_ambiguous: bool = False
    """Count a decision still ``ambiguous`` after the rounds as a regression (exit 1);
    by default it passes with its own status and a note."""
    exact_counts: bool = False
    """Static gate: fail every instruction count beyond its tolerance. By default a
    kernel's instruction counts that change while its registers, spills, stack, local
    and static shared memory stay put are reported (verdict ``reported``), not failed."""

    calibration: "object | None" = None
    """Measured noise (``paprof calibrate``, a ``calibration.Calibration``): a timing
    metric's limit becomes max(tolerance, k x noise) (``verdict.settings_for``)."""

    def tolerance(self, metric: str) -> Tolerance:
        return self.tolerances.get(metric) or self.tolerances.get("*") or rule(metric).tolerance


NON_NEGATIVE_UNITS = ("%", "us", "byte", "GB/s", "cycle", "inst", "register")
"""Units of quantities that cannot be negative (durations, bytes, rates, percentages)."""
