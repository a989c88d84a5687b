"""The verdict: each metric of each entry judged against the baseline (tolerance, spread or
the statistical decision), comparability checks and notes."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

from paprof.explain import fmt
from paprof.model import stats
from paprof.errors import UserError
from paprof.gate import calibration, environment, same_code
from paprof.gate.baseline import Baseline, Entry, Provenance, Stat
from paprof.gate.measurement import measure
from paprof.gate.rules import (GATE_RULES, INSTRUCTION_COUNTS, NON_NEGATIVE_UNITS, PICTURE_METRICS,
                               REPORTED, GateRule, Settings, Tolerance, rule, unit)
from paprof.gate.text import fmt_delta, fmt_value

_EDGE = 1e-12
"""Relative slack so that a value exactly at the allowed delta passes despite rounding."""


class BaselineMismatch(UserError):
    """The runs are not comparable with the baseline (GPU, ncu version, clocks, shape)."""




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
    """Why a change is noise or ambiguous (``same_code``, ``environment``)."""

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
            return self.unit in NON_NEGATIVE_UNITS and limit <= 0
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
    pairs: list = field(default_factory=list, repr=False)
    """The compared ``(baseline entry, current entry)`` pairs."""
    causes: dict = field(default_factory=dict)
    """``(family, variant, shape)`` -> ``paprof.gate.cause.Cause`` of the entries that moved
    (``cause.attach``); empty until attached."""

    def cause_of(self, r: Result):
        """The cause of ``r``'s entry, where one was attached."""
        return self.causes.get((r.family, r.variant, r.shape))

    @property
    def regressions(self) -> list[Result]:
        return [r for r in self.results if r.regressed]

    @property
    def ambiguous(self) -> list[Result]:
        """Statistical decisions that could not tell, after their re-measurements."""
        return [r for r in self.results
                if r.verdict in ("ambiguous", environment.AMBIGUOUS_ENVIRONMENT)]

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


def settings_for(settings, base, now, limits: calibration.Limits | None):
    """``settings`` for one (baseline, current) pair: a timing metric whose ``K x noise``
    (the calibration's, for the current run's GPU and the family) is above the user's
    limit gets it as its relative tolerance (the statistical decision's minimum effect
    too). Counts keep theirs."""
    if limits is None:
        return settings
    cal = limits.calibration
    gpu = now.provenance.gpu or base.provenance.gpu
    tolerances = dict(settings.tolerances)
    for metric, stat in base.metrics.items():
        rule = GATE_RULES.get(metric)
        if rule is None or rule.count or not stat.value:
            continue
        found = cal.find(gpu, base.family, metric)
        if found is None:
            continue
        effect = min_effect(metric, stat, settings)
        user = effect if effect is not None and len(stat.samples) >= stats.MIN_SAMPLES \
            else settings.tolerance(metric).allowed(stat.value) / abs(stat.value)
        measured = cal.k * found.relative
        key = (base.family, metric)
        words = (f"{cal.k:g} x measured noise {found.relative * 100:.2g} % = "
                 f"{measured * 100:.2g} % ({found.repeats} A/A runs on {gpu})")
        if measured > user:
            tolerances[metric] = Tolerance(relative=measured)
            limits.said.setdefault(key, f"{base.family} {metric}: the limit is {words}, "
                                        f"above the tolerance {user * 100:.2g} %")
        else:
            limits.said.setdefault(key, f"{base.family} {metric}: the limit is the tolerance "
                                        f"{user * 100:.2g} %, above {words}")
    return dataclasses.replace(settings, tolerances=tolerances)


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
    pairs, disturbed = environment.settle(pairs, remeasure, settings.rounds)

    results = []
    limits = calibration.Limits(settings.calibration) if settings.calibration else None
    for base, now in pairs:
        again = _Again(base, remeasure) if remeasure is not None else None
        pair_settings = settings_for(settings, base, now, limits)
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
        if r.cannot_fail and r.rule.higher_is_better and r.unit in NON_NEGATIVE_UNITS \
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
    results, said = environment.apply(results, pairs, disturbed, settings.fail_ambiguous)
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
                   else "not counted as a regression; profile more launches (--profiled-launches N) to decide")
            )
    return Verdict(results, notes, pairs[0][1].provenance, pairs=pairs)


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
