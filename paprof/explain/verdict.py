"""The verdict: each variant against one baseline, and which of them are tied.

``against(cmp, "v2")`` re-tells a ``Comparison`` as a star: the baseline first, then one
step baseline -> variant for every other variant (the chained story, v2 -> v3 -> v4, is
what ``compare`` builds from an ordered list). ``verdict(cmp)`` gives one row per variant:
its time and spread, its speedup over the baseline (the first variant), its bottleneck,
the cause of its difference from the baseline (the step's cause, the text ``compare``
prints) and whether its run was verified; variants within ``NOISE_PCT`` of the fastest
are called a tie, by the same rule as the sweep report.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from paprof.errors import UserError
from paprof.model.assembly import pair_differences
from paprof.explain.sentences import tell
from paprof.explain.finish import finish
from paprof.explain.told import is_star  # noqa: F401  (re-exported: callers read it here)
from paprof.model.analysis import complete, measure_step
from paprof.explain import fmt
from paprof.model.numbers import finite
from paprof.model.bottleneck import LABEL_COLUMNS
from paprof.explain.cause_words import first_cause

NOISE_PCT = 2.0
"""Variants whose times differ by less than this (% of the faster) are tied: the spread
of repeated CUDA-event medians on the H200 is about 1 %. Shared by the sweep report."""


def tied(timed: list[tuple[float, str]], noise_pct: float = NOISE_PCT) -> tuple[str, ...]:
    """The names within ``noise_pct`` of the fastest of ``(time, name)`` pairs, fastest
    first (one name: a clear win; empty: nothing timed)."""
    ranked = sorted(timed)
    if not ranked:
        return ()
    best = ranked[0][0]
    return tuple(name for t, name in ranked if (t - best) / best * 100.0 < noise_pct)


def against(cmp, baseline: str):
    """``cmp`` with the baseline first and its steps re-told as baseline -> each other
    variant. ``baseline`` is a label of ``cmp`` (a ``UserError`` otherwise)."""
    labels = [v.label for v in cmp.variants]
    if baseline not in labels:
        raise UserError(f"--baseline {baseline}: not among the compared variants "
                        f"({', '.join(labels)})")
    base = cmp.variant(baseline)
    others = [v for v in cmp.variants if v is not base]
    steps = []
    for v in others:
        step = measure_step(base, v, cmp.thresholds)
        step.differs = pair_differences(base, v)
        steps.append(step)
    order = [base] + others
    provenance = [next(p for p in cmp.provenance if p.label == v.label) for v in order] \
        if len(cmp.provenance) == len(cmp.variants) else list(cmp.provenance)
    star = replace(cmp, variants=order, steps=steps, provenance=provenance,
                   roofline=None, ledgers=None, stalls=None, contradictions=[], finished=False)
    return finish(complete(star))


@dataclass
class VerdictRow:
    label: str
    duration_us: float | None
    """ncu duration: the median over profiled launches (steps) when there are several."""
    spread_us: float | None
    """Half the range of the duration over those launches (None with one)."""
    launches: int
    event_us: float | None
    """Median CUDA-event time without the profiler (from the sidecar), if recorded."""
    event_spread_us: float | None
    """Half the range of the CUDA-event times over the timed repetitions."""
    event_count: int
    speedup: float | None
    """Baseline time over this one's (> 1: faster); None for the baseline itself."""
    bottleneck: str | None
    cause: str | None
    """The cause of the difference from the baseline (the step's cause)."""
    short_cause: str | None
    """Its one line: the code path the variant took, the largest term with its main
    counter and its share of the difference (``short_cause``)."""
    verified: bool | None
    """True: the run's output was checked and passed; False: failed; None: not checked."""
    baseline: bool
    tie: tuple[str, ...] = ()
    """The other variants within the noise of this one (empty: none)."""
    against: str | None = None
    """The variant the cause is told against: the one before it in the story (default),
    or the baseline (``--baseline``)."""
    limit: str | None = None
    """How close the variant is to its limit: the busiest unit and its share of peak
    ("DRAM 88 % of peak"), from the same counters the label reads."""


#: The units a variant's limit is read from: (column, words), each a % of its peak.
LIMIT_UNITS = (
    ("dram_throughput_pct", "DRAM"), ("l2_throughput_pct", "L2"), ("l1_throughput_pct", "L1"),
    ("issue_slots_busy_pct", "issue slots"), ("fma_pipe_pct", "FMA pipe"),
    ("alu_pipe_pct", "ALU pipe"), ("fp64_pipe_pct", "FP64 pipe"),
    ("tensor_pipe_pct", "tensor pipe"), ("xu_pipe_pct", "XU pipe"),
)


def limit_text(v) -> str | None:
    """How close a variant is to its limit: the unit its label names (the busiest unit
    for a latency- or occupancy-bound one) and its share of peak: "DRAM 88 % of peak"."""
    words_of = dict(LIMIT_UNITS, lsu_pipe_pct="LSU pipe")
    columns = LABEL_COLUMNS.get(str(v.bottleneck or "").split(" ")[0], tuple(words_of))
    busy = [(finite(v.get(col)), words_of[col]) for col in columns]
    busy = [(x, words) for x, words in busy if x is not None]
    if not busy:
        return None
    pct, words = max(busy)
    return f"{words} {fmt.pct(pct)} of peak"


@dataclass
class Verdict:
    baseline: str
    rows: list[VerdictRow]
    fastest: tuple[str, ...]
    """The fastest variant and every one tied with it, fastest first."""
    noise_pct: float
    chained: bool = False
    """True when each row's cause is told against the variant before it (the story's
    steps), False when against the baseline."""


def _event_stats(sidecar) -> tuple[float | None, float | None, int]:
    import statistics

    times = [float(t) for t in ((sidecar or {}).get("duration_us_event_all") or [])
             if isinstance(t, (int, float))]
    if not times:
        return None, None, 0
    return statistics.median(times), (max(times) - min(times)) / 2, len(times)


def verdict(cmp, noise_pct: float = NOISE_PCT) -> Verdict | None:
    """One row per variant of ``cmp``: its time against the first variant (the baseline),
    its cause against the variant before it when ``cmp`` tells a chained story (each step
    one variant on: the rows are then told apart by what each step changed), against the
    baseline when the comparison is against it (``--baseline``)."""
    if not cmp.variants:
        return None

    base = cmp.variants[0]
    steps = {s.after: s for s in cmp.steps}
    chained = any(s.before != base.label for s in cmp.steps)
    d0 = base.get("duration_us")
    timed = [(v.get("duration_us"), v.label) for v in cmp.variants if v.get("duration_us")]
    rows = []
    for v in cmp.variants:
        dur = v.get("duration_us")
        step = None
        if v is not base:
            step = steps.get(v.label) or tell(base, v, cmp.thresholds)
        prov = v.provenance
        verified = None if prov is None or prov.unverified else prov.verified
        event, event_spread, n = _event_stats(v.sidecar)
        rows.append(VerdictRow(
            label=v.label, duration_us=dur,
            spread_us=v.spread.get("duration_us") if v.launches > 1 else None,
            launches=v.launches, event_us=event, event_spread_us=event_spread, event_count=n,
            speedup=(d0 / dur) if (d0 and dur and v is not base) else None,
            bottleneck=v.bottleneck, cause=step.cause if step is not None else None,
            short_cause=short_cause(step, v) if step is not None else None,
            verified=verified, baseline=v is base,
            against=step.before if step is not None else None, limit=limit_text(v),
            tie=tuple(lab for lab in _within(timed, dur, noise_pct) if lab != v.label) if dur else ()))
    return Verdict(base.label, rows, tied(timed, noise_pct), noise_pct, chained)


def _within(timed: list[tuple[float, str]], t: float, noise_pct: float) -> list[str]:
    """The names whose time is within ``noise_pct`` of ``t`` (of the faster of the two)."""
    return [lab for u, lab in timed if abs(u - t) / min(u, t) * 100.0 < noise_pct]


def short_cause(step, after) -> str | None:
    """The step's cause in one line: the largest term of its decomposition, mechanism first
    with its counters, its size and what offsets it (``cause_words.first_cause``), then the
    code path the variant took; the step's own cause where the decomposition names none (a
    step within the noise says so)."""
    dec = step.decomposition
    text = first_cause(dec, brief=True) if dec is not None else None
    return step.cause if text is None else text  # (the launch words: the step, the variant card)
