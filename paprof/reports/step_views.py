"""Each step (``v2 -> v3``) as the report shows it: headline, bottlenecks, sentences,
the kernel view and the ncu rules that changed."""

from __future__ import annotations

from dataclasses import dataclass, field

from paprof.analysis import fmt
from paprof.analysis.compare import Comparison, RuleChange, verdict_words
from paprof.analysis.series import table_sentences


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


def rule_view(c: RuleChange) -> RuleView:
    def est(p):
        if p is not None and 0 < p < 0.05:  # a small kernel's share of a variant's time
            return "< 0.1 %"
        return fmt.pct(p) if p is not None else ("-" if c.kind != "changed" else fmt.MISSING)

    return RuleView(c.kind, c.id, c.title, c.text,
                    est(c.before_pct) if c.kind != "appeared" else "absent",
                    est(c.after_pct) if c.kind != "disappeared" else "absent",
                    c.message, c.kernel)


def step_views(cmp: Comparison) -> list[StepView]:
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
            rules=[rule_view(c) for c in s.rule_changes],
            cause=s.cause,
            traffic=s.traffic,
            kernels=kernel_rows(s.decomposition),
            kernels_total=((fmt.duration_us(s.decomposition.before_us),
                            fmt.duration_us(s.decomposition.after_us))
                           if s.decomposition is not None else ()),
        ))
    return views
