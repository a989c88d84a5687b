"""The CI regression gate: the baseline file, the tolerances and the verdict.

One module per job: ``rules`` (directions, tolerances, settings), ``baseline`` (the file
and its ``Provenance``), ``measurement`` (a table of runs to entries), ``verdict`` (the
judgement), ``text`` (number formatting). This package re-exports their public names.

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
--profiled-launches N``, or the CUDA-event-timed launches of ``duration_us_event``) a metric with a
minimum effect (``GateRule.min_effect``) is decided statistically instead
(``paprof.model.stats``): ``same``, ``regressed``, ``improved`` or ``ambiguous``, the
last re-measured up to a bound when the caller can (``remeasure``). Deterministic counts
(``GateRule.count``: registers, shared memory, spills, instructions, DRAM bytes) are
gated exactly, with no spread allowance; a two-sided count fails when it moves either
way, unless ``Settings.ratchet`` lets it fall (a one-way ratchet).

The baseline file is JSON, ``{"kind": "paprof-baseline", "schema": 2, ...}`` (schema 1,
without samples, still loads); see ``Baseline`` and ``docs/ci-gpu-runner.md``.
"""


from paprof.gate.rules import (  # noqa: F401
    DEFAULT_METRICS,
    EVENT_MIN_EFFECT,
    GATE_RULES,
    INSTRUCTION_COUNTS,
    NCU_MIN_EFFECT,
    NON_NEGATIVE_UNITS,
    PICTURE_METRICS,
    REPORTED,
    SASS_CLASSES,
    STATIC_METRICS,
    UNITS,
    GateRule,
    Settings,
    Tolerance,
    parse_tolerance,
    rule,
    unit,
)
from paprof.gate.baseline import (  # noqa: F401
    GATES,
    KIND,
    READS,
    SCHEMA,
    Baseline,
    Entry,
    Provenance,
    Stat,
    check_baseline_target,
    load_baseline,
    save_baseline,
)
from paprof.gate.measurement import (  # noqa: F401
    load_runs,
    load_table,
    make_baseline,
    measure,
    select_variants,
)
from paprof.gate.verdict import (  # noqa: F401
    BaselineMismatch,
    Result,
    Verdict,
    assess,
    compare_to_baseline,
    judge,
    min_effect,
)
from paprof.gate.text import (  # noqa: F401
    fmt_delta,
    fmt_value,
)

__all__ = [
    "Baseline",
    "BaselineMismatch",
    "DEFAULT_METRICS",
    "EVENT_MIN_EFFECT",
    "Entry",
    "GATES",
    "GATE_RULES",
    "GateRule",
    "INSTRUCTION_COUNTS",
    "KIND",
    "NCU_MIN_EFFECT",
    "NON_NEGATIVE_UNITS",
    "PICTURE_METRICS",
    "Provenance",
    "READS",
    "REPORTED",
    "Result",
    "SASS_CLASSES",
    "SCHEMA",
    "STATIC_METRICS",
    "Settings",
    "Stat",
    "Tolerance",
    "UNITS",
    "Verdict",
    "assess",
    "check_baseline_target",
    "compare_to_baseline",
    "fmt_delta",
    "fmt_value",
    "judge",
    "load_baseline",
    "load_runs",
    "load_table",
    "make_baseline",
    "measure",
    "min_effect",
    "parse_tolerance",
    "rule",
    "save_baseline",
    "select_variants",
    "unit",
]
