"""The CI regression gate: the baseline file, the tolerances and the verdict.

A *baseline* holds, per kernel variant and problem shape, the median of a few metrics
(default: DRAM throughput %, duration, DRAM bytes), their spread and the provenance of
the runs they came from (GPU model, ncu version, clock control, sections). Checking
compares the latest runs against it, metric by metric:

- each metric has a direction (``GATE_RULES``: higher is better for throughput and
  bandwidth, lower for duration and DRAM bytes) and a default tolerance;
- a value is a **regression** when it is worse than the baseline by more than the larger
  of the tolerance and the measured spread (baseline spread + current spread, i.e. the
  two measured ranges no longer touch). Exactly at the allowed delta passes;
- better by more than the same allowance is reported as ``improved`` (it passes; the
  baseline is then stale and worth updating);
- a check that cannot fail is said so, not silently passed: for a kernel that barely
  uses DRAM (0.9 %) the default 3-point allowance puts the floor below zero (``>= -2.1 %``),
  which no measurement can cross. The tolerance is not scaled (a rescaled one would
  fail on noise); the result's allowance reads "cannot fail" and the verdict gets a note
  suggesting a relative tolerance or the duration gate instead;
- a baseline from another GPU model, ncu version, clock control or shape gives no
  verdict (``BaselineMismatch``, exit 2) unless mismatches are allowed.

Both sides are *measured* the same way (``measure``): one value per profiled launch of a
variant (the loader's ``variant_rows``, which sums split-KV kernels into one row per
launch), the latest report per (family, variant, shape), the median over its launches
and the half-range ``(max - min) / 2`` as spread (0 for a single launch).

With per-launch samples on both sides (``MIN_SAMPLES`` or more each: ``--profile
--repeat N``, or the CUDA-event-timed launches of ``duration_us_event``) a metric with a
minimum effect (``GateRule.min_effect``) is decided statistically instead
(``paprof.analysis.stats``): ``same``, ``regressed``, ``improved`` or ``ambiguous``, the
last re-measured up to a bound when the caller can (``remeasure``). Deterministic counts
(``GateRule.count``: registers, shared memory, spills, instructions, DRAM bytes) are
gated exactly, with no spread allowance; a two-sided count fails when it moves either
way, unless ``Settings.ratchet`` lets it fall (a one-way ratchet).

The baseline file is JSON, ``{"kind": "paprof-baseline", "schema": 2, ...}`` (schema 1,
without samples, still loads); see ``Baseline`` and ``docs/ci-gpu-runner.md``.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterable, Sequence

from paprof import __version__
from paprof.analysis import calibration, environment_gate, fmt, same_code, stats
from paprof.analysis.metrics import BY_COLUMN
from paprof.errors import UserError

SCHEMA = 3
"""Version of the baseline file format this module writes (schema 2 adds per-launch
``samples`` to each metric, the ``gate`` kind and the ``compiler`` provenance; schema 3
the ``code`` fingerprint and the ``environment`` to the provenance)."""
READS = (1, 2, 3)
"""Baseline schemas this module reads."""
GATES = ("profile", "static")
"""What a baseline was measured by: profiled runs, or compiled cubins (``--static``)."""
KIND = "paprof-baseline"
"""The ``kind`` field that marks a JSON file as a paprof baseline."""

DEFAULT_METRICS = ("dram_throughput_pct", "duration_us", "dram_bytes")
"""Metrics a baseline records when none are named."""

_EDGE = 1e-12
"""Relative slack so that a value exactly at the allowed delta passes despite rounding."""


class BaselineMismatch(UserError):
    """The runs are not comparable with the baseline (GPU, ncu version, clocks, shape)."""


# ---------------------------------------------------------------------------------------
# Tolerances and the per-metric rules
# ---------------------------------------------------------------------------------------


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
# scripts/gate_power.py on the H200 (docs/NOTES.md) and to be confirmed by its table.
# Event-timed launches of one process differ by ~0.3 %; 2 % leaves room for the drift
# between the baseline's process and now's, and still resolves a 3 % slowdown.
EVENT_MIN_EFFECT = 0.02
NCU_MIN_EFFECT = 0.03
"""Under ncu (caches flushed before each replay, one replay pass a metric) launches vary
more than under CUDA events: 3 %."""

SASS_CLASSES = (
    "total", "ldg", "ldg_128", "stg", "stg_128", "lds", "lds_128", "sts", "sts_128",
    "ldl", "stl", "ldgsts", "hmma", "hgmma", "ffma", "fmul", "fadd", "mufu", "bar", "shfl",
    "bra",
)
"""The SASS instruction classes the static gate counts (``sass_<class>``, per kernel):
all instructions, global/shared/local loads and stores (and their 128-bit share), async
copies, tensor-core MMAs (``HMMA``, Hopper's ``HGMMA``), fp32 arithmetic, the special
function unit, barriers, shuffles and branches."""

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
    **{f"sass_{c}": GateRule(f"SASS {c.upper().replace('_', '.')} instructions", False,
                             Tolerance(relative=0.10), count=True, two_sided=True)
       for c in SASS_CLASSES},
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
    **{f"sass_{c}": "inst" for c in SASS_CLASSES},
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

    calibration: "calibration.Calibration | None" = None
    """Measured noise (``paprof calibrate``): a timing metric's limit becomes
    max(tolerance, k x noise) (``calibration.settings_for``)."""

    def tolerance(self, metric: str) -> Tolerance:
        return self.tolerances.get(metric) or self.tolerances.get("*") or rule(metric).tolerance


# ---------------------------------------------------------------------------------------
# The baseline file
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Stat:
    """One metric of one (variant, shape): the median over launches and its spread."""

    value: float
    """Median over the launches."""
    spread: float
    """Half-range ``(max - min) / 2`` over the launches; 0 for one launch."""
    n: int
    """Number of launches measured."""
    samples: tuple[float, ...] = field(default=(), compare=False)
    """The per-launch values (schema 2; empty for one launch or a schema-1 baseline)."""

    @classmethod
    def of(cls, values: Iterable[float]) -> "Stat":
        vals = [float(v) for v in values]
        keep = tuple(vals) if len(vals) > 1 else ()
        return cls(statistics.median(vals), (max(vals) - min(vals)) / 2, len(vals), keep)

    def pooled(self, more: Sequence[float]) -> "Stat":
        """This stat with ``more`` samples added (a re-measurement)."""
        return Stat.of([*(self.samples or (self.value,)), *more])


@dataclass(frozen=True)
class Provenance:
    """Where a measurement came from (the run store's sidecar, where there is one).

    None means unknown (a report without a sidecar); unknown fields are not compared.
    """

    gpu: str | None = None
    ncu_version: str | None = None
    clock_control: str | None = None
    sections: tuple[str, ...] | None = None
    preset: str | None = None
    driver: str | None = None
    git_commit: str | None = None
    report: str | None = None
    created: str | None = None
    compiler: str | None = None
    """The static gate's ``nvcc`` release and target (``nvcc 13.0.88 sm_90``)."""
    code: str | None = None
    """The SASS and launch settings' fingerprint (schema 3; ``same_code``)."""
    code_why: str | None = None
    """Why there is no ``code`` fingerprint."""
    environment: str | None = None
    """The GPU's state while measured (schema 3; ``environment_gate``)."""


@dataclass(frozen=True)
class Entry:
    """One (family, variant, shape) with its metric stats: a baseline entry, or the
    current measurement it is compared with."""

    family: str
    variant: str
    shape: str
    metrics: dict[str, Stat]
    provenance: Provenance = Provenance()

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.family, self.variant, self.shape)

    @property
    def name(self) -> str:
        """``family/variant`` (just ``variant`` when the family is unknown)."""
        return f"{self.family}/{self.variant}" if self.family else self.variant


@dataclass
class Baseline:
    """The versioned baseline file: ``{"kind": "paprof-baseline", "schema": 1, ...}``."""

    entries: list[Entry]
    created: str = ""
    paprof_version: str = __version__
    schema: int = SCHEMA
    gate: str = "profile"
    """``profile`` (runs, ``paprof check``) or ``static`` (cubins, ``check --static``)."""

    def to_dict(self) -> dict:
        return {
            "kind": KIND,
            "schema": self.schema,
            "gate": self.gate,
            "created": self.created,
            "paprof_version": self.paprof_version,
            "spread": "half-range (max - min) / 2 over the launches of one report",
            "entries": [_entry_to_dict(e) for e in self.entries],
        }

    @classmethod
    def from_dict(cls, data: object, source: str = "baseline") -> "Baseline":
        """Validate and parse; ``UserError`` for anything that is not a schema-1 baseline."""
        if not isinstance(data, dict) or data.get("kind") != KIND:
            raise UserError(f"{source} is not a paprof baseline (no \"kind\": \"{KIND}\")")
        schema = data.get("schema")
        if schema not in READS:
            raise UserError(
                f"{source} has baseline schema {schema!r}; this paprof reads schemas "
                f"{', '.join(map(str, READS))} (rebuild it with 'paprof baseline update --force')"
            )
        gate = data.get("gate", "profile")
        if gate not in GATES:
            raise UserError(f"{source} is corrupt: \"gate\" must be one of {', '.join(GATES)}")
        raw = data.get("entries")
        if not isinstance(raw, list) or not raw:
            raise UserError(f"{source} is corrupt: \"entries\" must be a non-empty list")
        entries, seen = [], set()
        for i, item in enumerate(raw):
            try:
                entry = _entry_from_dict(item)
            except (KeyError, TypeError, ValueError) as err:
                raise UserError(f"{source} is corrupt: entry {i}: {_why(err)}") from None
            if entry.key in seen:
                raise UserError(f"{source} is corrupt: {entry.name} at {entry.shape} twice")
            seen.add(entry.key)
            entries.append(entry)
        return cls(
            entries=entries,
            created=str(data.get("created", "")),
            paprof_version=str(data.get("paprof_version", "")),
            schema=SCHEMA,
            gate=gate,
        )


def _why(err: Exception) -> str:
    return f"missing field {err}" if isinstance(err, KeyError) else str(err)


def _entry_to_dict(e: Entry) -> dict:
    prov = {k: v for k, v in e.provenance.__dict__.items()}
    if prov["sections"] is not None:
        prov["sections"] = list(prov["sections"])
    return {
        "family": e.family,
        "variant": e.variant,
        "shape": e.shape,
        "metrics": {
            m: {"value": s.value, "spread": s.spread, "n": s.n,
                **({"samples": list(s.samples)} if s.samples else {})}
            for m, s in e.metrics.items()
        },
        "provenance": prov,
    }


def _finite(value: object, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{what} must be a finite number, got {_short(value)}")
    try:
        number = float(value)
    except OverflowError:  # an integer of hundreds of digits
        raise ValueError(f"{what} must be a finite number, got {_short(value)}") from None
    if not math.isfinite(number):
        raise ValueError(f"{what} must be a finite number, got {_short(value)}")
    return number


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:20]}...({len(text)} characters)"


_MOST_US = 1e12
"""Longer than any measured kernel launch (11.6 days, in us): a baseline past it is
impossible, not a slow kernel."""


def _consistent(m: str, value: float, spread: float, n: int, samples: tuple) -> None:
    """``ValueError`` when a metric's numbers contradict each other or are impossible:
    samples that are not ``n``, a value that is not their median, a spread that is not
    their half-range, a duration of zero or of days."""
    if samples:
        if len(samples) != n:
            raise ValueError(f"{m}: n is {n} but {len(samples)} samples are given")
        median = statistics.median(samples)
        half = (max(samples) - min(samples)) / 2
        if not math.isclose(value, median, rel_tol=1e-6, abs_tol=1e-9):
            raise ValueError(f"{m}.value {value:g} is not the median of its samples ({median:g})")
        if not math.isclose(spread, half, rel_tol=1e-6, abs_tol=1e-9):
            raise ValueError(f"{m}.spread {spread:g} is not the half-range of its samples ({half:g})")
    unit = UNITS.get(m) or (BY_COLUMN[m].unit if m in BY_COLUMN else None)
    if unit == "us" and not 0 < value < _MOST_US:
        raise ValueError(f"{m}.value {value:g} us is impossible for a kernel's duration")
    if unit == "us" and spread >= _MOST_US:
        raise ValueError(f"{m}.spread {spread:g} us is impossible for a kernel's duration")
    if unit == "%" and spread > 50:
        raise ValueError(f"{m}.spread {spread:g} is impossible: a percentage's half-range is at most 50")


_NON_NEGATIVE_UNITS = ("%", "us", "byte", "GB/s", "cycle", "inst", "register")
"""Units of quantities that cannot be negative (durations, bytes, rates, percentages)."""


def _possible(metric: str, value: float, what: str) -> float:
    """``value`` if a measurement of ``metric`` can have it; ``ValueError`` otherwise."""
    unit = UNITS.get(metric) or (BY_COLUMN[metric].unit if metric in BY_COLUMN else None)
    if value < 0 and (what == "spread" or unit in _NON_NEGATIVE_UNITS):
        raise ValueError(f"{metric}.{what} {value:g} is impossible: it cannot be negative")
    if unit == "%" and value > 100:
        raise ValueError(f"{metric}.{what} {value:g} is impossible: a percentage over 100")
    return value


def _entry_from_dict(d: object) -> Entry:
    if not isinstance(d, dict):
        raise TypeError("an entry must be an object")
    if not isinstance(d["variant"], str) or not d["variant"]:
        raise ValueError("'variant' must be a non-empty string")
    if not isinstance(d["shape"], str):  # empty for a report without a sidecar
        raise ValueError("'shape' must be a string")
    metrics = {}
    if not isinstance(d["metrics"], dict) or not d["metrics"]:
        raise ValueError("'metrics' must be a non-empty object")
    for m, s in d["metrics"].items():
        if not isinstance(s, dict):
            raise TypeError(f"metric {m!r} must be an object")
        n = s["n"]
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"{m}.n must be a positive integer, got {n!r}")
        spread = _possible(m, _finite(s["spread"], f"{m}.spread"), "spread")
        raw = s.get("samples", [])
        if not isinstance(raw, list):
            raise TypeError(f"{m}.samples must be a list")
        samples = tuple(_possible(m, _finite(v, f"{m}.samples"), "value") for v in raw)
        value = _possible(m, _finite(s["value"], f"{m}.value"), "value")
        _consistent(m, value, spread, n, samples)
        metrics[m] = Stat(value, spread, n, samples)
    prov = d.get("provenance") or {}
    if not isinstance(prov, dict):
        raise TypeError("'provenance' must be an object")
    known = Provenance.__dataclass_fields__
    kwargs = {k: v for k, v in prov.items() if k in known}
    if kwargs.get("sections") is not None:
        kwargs["sections"] = tuple(kwargs["sections"])
    family = str(d.get("family") or "")
    return Entry(family, d["variant"], d["shape"], metrics, Provenance(**kwargs))


def load_baseline(path: str | os.PathLike) -> Baseline:
    """Read a baseline file; ``UserError`` (exit 2) if missing, corrupt or another schema."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(
            f"baseline {path} does not exist (write one with 'paprof baseline update --out {path}')"
        ) from None
    except (OSError, UnicodeDecodeError) as err:
        raise UserError(f"cannot read baseline {path}: {err}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise UserError(f"baseline {path} is corrupt: not JSON ({err})") from None
    return Baseline.from_dict(data, source=f"baseline {path}")


def save_baseline(baseline: Baseline, path: str | os.PathLike, force: bool = False,
                  inputs: Iterable = ()) -> Path:
    """Write ``baseline`` as JSON, atomically (``paprof.outputs``); refuse (``UserError``)
    to replace a file unless ``force``, and one of ``inputs`` (the reports read) always."""
    from paprof import outputs

    check_baseline_target(path, force, inputs)
    text = json.dumps(baseline.to_dict(), indent=2, allow_nan=False) + "\n"
    return outputs.write(path, text, parents=True)


def check_baseline_target(path: str | os.PathLike, force: bool = False,
                          inputs: Iterable = ()) -> None:
    """``UserError`` now when ``save_baseline(..., path, force)`` would refuse."""
    from paprof import outputs

    outputs.check_target(path, force=force, inputs=inputs, parents=True)


# ---------------------------------------------------------------------------------------
# Measuring a table of runs
# ---------------------------------------------------------------------------------------


def _text(value: object) -> str | None:
    if value is None or value == "" or (isinstance(value, float) and math.isnan(value)):
        return None
    return str(value)


def _sidecar(row) -> dict:
    side = row.get("sidecar") if hasattr(row, "get") else None
    return side if isinstance(side, Mapping) else {}


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
        **same_code.provenance_fields(side), **environment_gate.provenance_fields(side),
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
    from paprof.analysis.gpus import ceiling_for

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
    scan=None,
) -> Baseline:
    """A ``Baseline`` from a runs table (``variant_rows`` output) or report/runs paths.

    ``metrics`` None: each family's gate metrics (``measure``).

    ``variants`` keeps only those (``v3`` or ``paged_decode/v3``; ``all`` or None keeps
    every variant); a name matching nothing is a ``UserError``. ``scan``: the command's
    ``store.Scan`` (``load_table``).
    """
    metrics = tuple(dict.fromkeys(metrics or ())) or None
    for metric in metrics or ():
        rule(metric)
    table = source if hasattr(source, "columns") else load_table(source, variants, scan)
    entries = select_variants(measure(table, metrics), variants)
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


def load_table(paths, variants: Sequence[str] | None = None, scan=None):
    """The per-launch variant table (``variant_rows``) of report files or run folders.

    With ``variants`` (``v3`` or ``paged_decode/v3``; ``all`` for every one) only those
    variants' reports are read, so that an unrelated broken report cannot block the gate.
    ``scan``: the command's ``store.Scan`` (a new one by default), so that the store is
    read once: its runs are chosen, then loaded, without reading each sidecar again.
    """
    from paprof.analysis.load import load_reports, variant_rows
    from paprof.profiler.store import Scan

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
        paths = chosen
    return variant_rows(load_reports(paths, scan=scan))


# ---------------------------------------------------------------------------------------
# The verdict
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Result:
    """One (variant, shape, metric) compared with the baseline."""

    family: str
    variant: str
    shape: str
    metric: str
    baseline: Stat
    now: Stat
    allowed: float
    """The largest change for the worse that still passes (>= 0, in the metric's unit)."""
    tolerance: Tolerance
    status: str
    """``pass``, ``regressed`` or ``improved`` (better by more than ``allowed``)."""
    shape_now: str | None = None
    """The shape actually compared when it differs from the baseline's (allowed mismatch)."""
    verdict: str = ""
    """``same``, ``regressed``, ``improved``, ``ambiguous`` (the statistical decision could
    not tell after its rounds) or ``changed`` (a two-sided count fell: it fails, status
    ``regressed``); empty: read from ``status``."""
    decision: stats.Decision | None = None
    """The statistical decision, when the metric was decided on samples."""
    noise: str = ""
    """Why a change is noise or ambiguous (``same_code``, ``environment_gate``)."""

    @property
    def outcome(self) -> str:
        """The verdict in words: ``verdict``, else ``same`` for a plain ``pass``."""
        return self.verdict or ("same" if self.status == "pass" else self.status)

    @property
    def rule(self) -> GateRule:
        return GATE_RULES[self.metric]

    @property
    def name(self) -> str:
        return f"{self.family}/{self.variant}" if self.family else self.variant

    @property
    def delta(self) -> float:
        """``now - baseline`` in the metric's unit."""
        return self.now.value - self.baseline.value

    @property
    def limit(self) -> float:
        """The worst value that still passes."""
        sign = -1 if self.rule.higher_is_better else 1
        return self.baseline.value + sign * self.allowed

    @property
    def regressed(self) -> bool:
        return self.status == "regressed"

    @property
    def cannot_fail(self) -> bool:
        """The worst value that passes is one no measurement can go beyond (a floor
        below zero for a quantity that cannot be negative)."""
        limit = self.limit
        if not math.isfinite(limit) or self.allowed > 1e6 * abs(self.baseline.value) > 0:
            return True  # an allowance of a millionfold (a 1e300 % tolerance or spread)
        if self.rule.higher_is_better:
            return self.unit in _NON_NEGATIVE_UNITS and limit <= 0
        return self.unit == "%" and limit >= 100

    # -- text shared by the terminal table, JUnit and Markdown ---------------------------
    @property
    def unit(self) -> str:
        return unit(self.metric)

    def fmt(self, value: float) -> str:
        return fmt_value(value, self.unit)

    def fmt_stat(self, stat: Stat) -> str:
        """``84.9 %``, or ``84.9 % ± 0.3 pts`` over several launches."""
        if stat.n > 1:
            return f"{self.fmt(stat.value)} ± {fmt_delta(stat.spread, self.unit, sign=False)}"
        return self.fmt(stat.value)

    @property
    def delta_text(self) -> str:
        """``-27.5 pts``, or ``+168 us (+5 %)`` with the relative change."""
        text = fmt_delta(self.delta, self.unit)
        if self.baseline.value and self.unit != "%":
            text += f" ({fmt.signed_pct(self.delta / abs(self.baseline.value) * 100)})"
        return text

    @property
    def allowed_text(self) -> str:
        """``>= 81.9 % (-3 pts)``: the worst value that passes and the allowance; a
        two-sided count ``= 64 (+-0)``; a statistical decision names its minimum effect."""
        allowance = fmt_delta(self.allowed, self.unit, sign=False)
        if self.verdict == "changed" or (self.rule.two_sided and self.status == "pass"
                                         and not self.decision):
            return f"= {self.fmt(self.baseline.value)} (±{allowance})"
        op = ">=" if self.rule.higher_is_better else "<="
        sign = "-" if self.rule.higher_is_better else "+"
        text = f"{op} {self.fmt(self.limit)} ({sign}{allowance})"
        if self.decision:
            text += f", min effect {self.decision.min_effect * 100:g} %"
        return text + ": cannot fail" if self.cannot_fail else text

    @property
    def message(self) -> str:
        """One line naming variant, metric, baseline, now and the allowance."""
        shape = self.shape if self.shape_now is None else f"{self.shape} (now {self.shape_now})"
        text = (
            f"{self.name} {self.metric} ({self.rule.label}) at {shape}: "
            f"baseline {self.fmt_stat(self.baseline)}, now {self.fmt_stat(self.now)}, "
            f"change {self.delta_text}, allowed {self.allowed_text}"
        )
        if self.decision:
            text += f"; {self.outcome}: {self.decision.describe()}"
        elif self.verdict == "changed":
            text += "; changed: a count that must stay put fell (--ratchet lets it fall)"
        elif self.verdict == REPORTED:
            text += ("; reported: the kernel's registers, spills and memory are unchanged "
                     "(--exact-counts fails it)")
        if self.noise:
            text += f" ({self.noise})"
        return text


@dataclass
class Verdict:
    """Every compared (variant, shape, metric), plus notes about what was not compared."""

    results: list[Result]
    notes: list[str] = field(default_factory=list)
    """Allowed mismatches, runs without a baseline entry, stale (improved) entries."""
    provenance: Provenance = Provenance()
    """The current runs' provenance (from the first entry), for report headers."""

    @property
    def regressions(self) -> list[Result]:
        return [r for r in self.results if r.regressed]

    @property
    def ambiguous(self) -> list[Result]:
        """Statistical decisions that could not tell, after their re-measurements."""
        return [r for r in self.results
                if r.verdict in ("ambiguous", environment_gate.AMBIGUOUS_ENVIRONMENT)]

    @property
    def passed(self) -> bool:
        return not self.regressions

    @property
    def exit_code(self) -> int:
        return 0 if self.passed else 1

    @property
    def summary(self) -> str:
        checked = len({(r.family, r.variant, r.shape) for r in self.results})
        metrics = len({r.metric for r in self.results})
        if self.passed:
            improved = sum(r.status == "improved" for r in self.results)
            extra = f", {improved} improved" if improved else ""
            if self.ambiguous:
                extra += f", {len(self.ambiguous)} ambiguous"
            reported = sum(r.verdict == REPORTED for r in self.results)
            if reported:
                extra += f", {reported} instruction counts changed (reported, not failed)"
            return f"PASS: {checked} variant/shape pairs, {metrics} metrics within tolerance{extra}"
        return (
            f"FAIL: {len(self.regressions)} regression(s) in "
            f"{len(self.results)} checks of {checked} variant/shape pairs"
        )


def judge(baseline: Stat, now: Stat, metric: str, tolerance: Tolerance) -> tuple[float, str]:
    """``(allowed, status)`` for one metric: see the module docstring for the rule."""
    allowed = max(tolerance.allowed(baseline.value), baseline.spread + now.spread)
    better = now.value - baseline.value
    if not rule(metric).higher_is_better:
        better = -better
    slack = _EDGE * max(1.0, abs(baseline.value))
    if -better > allowed + slack:
        return allowed, "regressed"
    if better > allowed + slack:
        return allowed, "improved"
    return allowed, "pass"


def min_effect(metric: str, baseline: Stat, settings: Settings) -> float | None:
    """The statistical decision's minimum effect for ``metric`` (a fraction): a
    ``--tolerance`` given for it (relative; absolute over the baseline value), else
    ``GateRule.min_effect``. None: the metric is not decided statistically."""
    base_rule = rule(metric)
    if base_rule.min_effect is None:
        return None
    given = settings.tolerances.get(metric) or settings.tolerances.get("*")
    if given is None:
        return base_rule.min_effect
    effect = given.relative or (given.absolute / abs(baseline.value) if baseline.value else 0)
    return min(effect, 0.99)


_VERDICT_STATUS = {"same": "pass", "regressed": "regressed", "improved": "improved"}


def assess(baseline: Stat, now: Stat, metric: str, settings: Settings | None = None,
           remeasure=None) -> tuple[float, str, str, "stats.Decision | None"]:
    """``(allowed, status, verdict, decision)`` for one metric.

    A count (``GateRule.count``): exact within its tolerance, no spread allowance. With
    ``MIN_SAMPLES`` per-launch samples on both sides and a minimum effect: the statistical
    decision (``stats.decide_until``, pooling ``remeasure()``'s samples while ambiguous).
    Otherwise ``judge``'s tolerance-and-spread rule.
    """
    settings = settings or Settings()
    the_rule = rule(metric)
    tol = settings.tolerance(metric)
    if the_rule.count:
        allowed = tol.allowed(baseline.value)
        worse = now.value - baseline.value
        if the_rule.higher_is_better:
            worse = -worse
        slack = _EDGE * max(1.0, abs(baseline.value))
        if worse > allowed + slack:
            return allowed, "regressed", "regressed", None
        if -worse > allowed + slack:
            if the_rule.two_sided and not settings.ratchet:
                return allowed, "regressed", "changed", None
            return allowed, "improved", "improved", None
        return allowed, "pass", "same", None
    effect = min_effect(metric, baseline, settings)
    if (effect is not None and len(baseline.samples) >= stats.MIN_SAMPLES
            and len(now.samples) >= stats.MIN_SAMPLES):
        d = stats.decide_until(baseline.samples, now.samples, effect, remeasure,
                               settings.rounds, settings.confidence, the_rule.higher_is_better)
        status = _VERDICT_STATUS.get(d.verdict) or (
            "regressed" if settings.fail_ambiguous else "pass")
        return effect * abs(baseline.value), status, d.verdict, d
    allowed, status = judge(baseline, now, metric, tol)
    return allowed, status, {"pass": "same"}.get(status, status), None


class _Again:
    """Fresh measurements of one entry, made on demand and shared by its metrics: the
    n-th re-measurement of any metric reads the n-th fresh entry."""

    def __init__(self, base: Entry, remeasure):
        self.base, self.remeasure, self.fresh = base, remeasure, []

    def samples_of(self, metric: str):
        taken = []

        def again() -> list[float]:
            if len(taken) == len(self.fresh):
                self.fresh.append(self.remeasure(self.base))
            stat = self.fresh[len(taken)].metrics.get(metric)
            got = list(stat.samples or (stat.value,)) if stat else []
            taken.append(got)
            return got

        return again, taken


_COMPARED = ("gpu", "ncu_version", "clock_control", "compiler")
_COMPARED_WORDS = {"gpu": "GPU", "ncu_version": "ncu version", "clock_control": "clock control",
                   "compiler": "compiler"}


def compare_to_baseline(baseline: Baseline, current, settings: Settings | None = None,
                        remeasure=None) -> Verdict:
    """Compare the current runs with ``baseline``.

    ``remeasure(entry) -> Entry``, when given, measures a baseline entry's variant again
    (fresh samples): a statistical decision still ``ambiguous`` pools them and decides
    again, up to ``settings.rounds`` measurements in all.

    ``current`` is a runs table (``variant_rows`` output, measured with ``measure``) or a
    list of ``Entry``. Each baseline entry needs a current (family, variant, shape): a
    missing one is a ``UserError``; one at another shape, GPU model, ncu version or clock
    control is a ``BaselineMismatch`` unless ``settings.allow_mismatch``. Runs that the
    baseline does not know are noted, not judged.
    """
    settings = settings or Settings()
    held = {m for e in baseline.entries for m in e.metrics}
    metrics = tuple(dict.fromkeys(settings.metrics)) if settings.metrics else tuple(
        m for m in GATE_RULES if m in held
    ) + tuple(sorted(held - set(GATE_RULES)))
    for metric in metrics:
        rule(metric)
        if metric not in held:
            raise UserError(
                f"the baseline holds no {metric}; rebuild it with "
                f"'paprof baseline update --metric {metric} --force'"
            )
    if not hasattr(current, "columns"):
        now_entries = list(current)
    else:
        now_entries = measure(current, metrics, missing_ok=True)
    pairs, mismatches, notes = _match(baseline, now_entries)
    if mismatches and not settings.allow_mismatch:
        raise BaselineMismatch(
            "runs not comparable with the baseline: " + "; ".join(mismatches)
            + " (pass --allow-mismatch to compare anyway)"
        )
    notes = [f"mismatch allowed: {m}" for m in mismatches] + notes
    pairs, disturbed = environment_gate.settle(pairs, remeasure, settings.rounds)

    results = []
    limits = calibration.Limits(settings.calibration) if settings.calibration else None
    for base, now in pairs:
        again = _Again(base, remeasure) if remeasure is not None else None
        pair_settings = calibration.settings_for(settings, base, now, limits)
        for metric in metrics:
            if metric not in base.metrics:
                continue
            if metric not in now.metrics:
                raise UserError(
                    f"{now.name} at {now.shape}: the current report has no {metric}; "
                    f"profile with the baseline's preset ({base.provenance.preset or 'default'})"
                )
            tol = pair_settings.tolerance(metric)
            fn, taken = again.samples_of(metric) if again else (None, [])
            allowed, status, verdict, decision = assess(
                base.metrics[metric], now.metrics[metric], metric, pair_settings, fn
            )
            stat_now = now.metrics[metric]
            if taken:
                stat_now = stat_now.pooled([v for got in taken for v in got])
            results.append(
                Result(
                    base.family, base.variant, base.shape, metric, base.metrics[metric],
                    stat_now, allowed, tol, status,
                    shape_now=None if now.shape == base.shape else now.shape,
                    verdict=verdict, decision=decision,
                )
            )
    known = {b.key for b, _ in pairs} | {n.key for _, n in pairs}
    for e in now_entries:
        if e.key not in known:
            notes.append(f"{e.name} at {e.shape} has no baseline entry; not checked")
    for r in results:
        if r.cannot_fail and r.rule.higher_is_better and r.unit in _NON_NEGATIVE_UNITS \
                and 0 <= r.allowed <= 1e6 * abs(r.baseline.value):
            notes.append(
                f"{r.name} {r.metric} at {r.shape}: the allowance "
                f"({fmt_delta(r.allowed, r.unit, sign=False)}) is more than the baseline "
                f"({r.fmt(r.baseline.value)}), so this check cannot fail; give a relative "
                f"tolerance (--tolerance {r.metric}=50%) or rely on the duration_us check"
            )
        elif r.cannot_fail:
            notes.append(
                f"{r.name} {r.metric} at {r.shape}: the allowance "
                f"({fmt_delta(r.allowed, r.unit, sign=False)}) over the baseline "
                f"({r.fmt(r.baseline.value)}) lets any measurement pass, so this check "
                "cannot fail; give a smaller --tolerance (or a baseline of a smaller spread)"
            )
    notes += limits.notes() if limits else []
    results, said = environment_gate.apply(results, pairs, disturbed, settings.fail_ambiguous)
    notes += said
    results, said = same_code.apply(results, pairs)
    notes += said
    if baseline.gate == "static" and not settings.exact_counts:
        results, said = _report_instruction_counts(results)
        notes += said
    if any(r.status == "improved" for r in results):
        notes.append("some metrics improved beyond tolerance: consider 'paprof baseline update'")
    for r in results:
        if r.verdict == "ambiguous":
            rounds = f" after {r.decision.rounds} measurements" if r.decision.rounds > 1 else ""
            notes.append(
                f"{r.name} {r.metric} at {r.shape}: ambiguous{rounds} (the interval "
                f"[{r.decision.low:.3f}, {r.decision.high:.3f}] reaches past "
                f"±{r.decision.min_effect * 100:g} %); "
                + ("counted as a regression (--fail-ambiguous)" if r.regressed
                   else "not counted as a regression; --repeat more launches to decide")
            )
    return Verdict(results, notes, pairs[0][1].provenance)


def _report_instruction_counts(results: list[Result]) -> tuple[list[Result], list[str]]:
    """Instruction counts of a kernel whose picture (``PICTURE_METRICS``, registers at
    least) is unchanged: ``reported`` (status ``pass``) instead of failed, with a note
    per kernel. A kernel whose picture moved keeps its verdicts: the counts then come
    with a change that matters."""
    groups: dict[tuple, list[Result]] = {}
    for r in results:
        groups.setdefault((r.family, r.variant, r.shape), []).append(r)
    replaced: dict[int, Result] = {}
    notes = []
    for rs in groups.values():
        picture = [r for r in rs if r.metric in PICTURE_METRICS]
        steady = (any(r.metric == "registers_per_thread" for r in picture)
                  and all(r.outcome == "same" for r in picture))
        moved = [r for r in rs if r.metric in INSTRUCTION_COUNTS and r.outcome != "same"]
        if not (steady and moved):
            continue
        for r in moved:
            replaced[id(r)] = dataclasses.replace(r, status="pass", verdict=REPORTED)
        changes = ", ".join(f"{r.metric} {r.delta_text}" for r in moved)
        first = moved[0]
        notes.append(
            f"{first.name} at {first.shape}: instruction counts changed ({changes}) with "
            "registers, spills, stack, local and static shared memory unchanged: reported, "
            "not failed (--exact-counts fails them)")
    return [replaced.get(id(r), r) for r in results], notes


def _match(baseline: Baseline, now_entries: list[Entry]):
    """Pair each baseline entry with its current entry: ``(pairs, mismatches, notes)``.

    A baseline entry with no current run (or only at several other shapes) is a
    ``UserError``; one at a single other shape is paired and its shape is a mismatch.
    """
    by_key = {e.key: e for e in now_entries}
    pairs, missing, mismatches, notes = [], [], [], []
    for base in baseline.entries:
        now = by_key.get(base.key)
        if now is None:
            others = [
                e for e in now_entries if (e.family, e.variant) == (base.family, base.variant)
            ]
            if not others:
                missing.append(f"{base.name} at {base.shape}")
                continue
            shapes = ", ".join(e.shape for e in others)
            mismatches.append(
                f"{base.name}: baseline shape {base.shape}, runs at {shapes}"
            )
            if len(others) > 1:
                missing.append(f"{base.name} at {base.shape} (several other shapes: {shapes})")
                continue
            now = others[0]
        for fieldname in _COMPARED:
            a = getattr(base.provenance, fieldname)
            b = getattr(now.provenance, fieldname)
            if a is not None and b is not None and a != b:
                mismatches.append(
                    f"{base.name}: baseline {_COMPARED_WORDS[fieldname]} {a!r}, runs {b!r}"
                )
            elif a != b:
                notes.append(
                    f"{base.name}: {_COMPARED_WORDS[fieldname]} unknown for the "
                    f"{'baseline' if a is None else 'runs'}; not compared"
                )
        if base.provenance.sections and now.provenance.sections and set(
            base.provenance.sections
        ) != set(now.provenance.sections):
            notes.append(f"{base.name}: profiled with other ncu sections than the baseline")
        pairs.append((base, now))
    if missing:
        raise UserError(
            "no current run for " + "; ".join(missing)
            + " (profile it, or update the baseline)"
        )
    return pairs, list(dict.fromkeys(mismatches)), list(dict.fromkeys(notes))


# ---------------------------------------------------------------------------------------
# Number formatting shared by the outputs (units from the catalogue, text from fmt)
# ---------------------------------------------------------------------------------------

_FORMAT_BY_UNIT = {
    "%": fmt.pct,
    "us": fmt.duration_us,
    "byte": fmt.bytes_decimal,
    "GB/s": fmt.bandwidth_gbs,
    "cycle": fmt.big,
}


def fmt_value(value: float, unit: str) -> str:
    """``84.9 %``, ``3.35 ms``, ``2.15 GB`` (the catalogue's unit picks the formatter)."""
    return _FORMAT_BY_UNIT.get(unit, fmt.number)(value)


def fmt_delta(delta: float, unit: str, sign: bool = True) -> str:
    """A change in the metric's unit; percentage points (``-27.5 pts``) for ``%`` metrics."""
    if unit == "%":
        text = fmt.signed_pts(delta, decimals=2)
        return text if sign else text.lstrip("+-")
    text = fmt_value(abs(delta), unit)
    if not sign:
        return text
    return ("-" if delta < 0 else "+") + text
