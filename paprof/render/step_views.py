"""Each step (``v2 -> v3``) as the report shows it: headline, bottlenecks, sentences,
the kernel view and the ncu rules that changed."""

from __future__ import annotations

from dataclasses import dataclass, field

from paprof.explain import fmt
from paprof.explain.compare import Comparison, RuleChange, verdict_words


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


def kernel_rows(kernels: list[dict]) -> list[KernelRowView]:
    """The kernel view of one step from its explanation's ``kernels`` (matched pairs, then
    gone, then new; launches in a step summed); empty where each side runs one kernel."""
    if len(kernels) <= 1 and all(k["status"] == "matched" for k in kernels):
        return []
    dash = "-"

    def launches(k):
        a, b = k.get("launches_before"), k.get("launches_after")
        if k["status"] == "matched":
            return f"{a} -> {b}" if max(a, b) > 1 else ""
        n = a if k["status"] == "gone" else b
        return str(n) if n > 1 else ""

    return [KernelRowView(k.get("before", dash), k.get("after", dash),
                          fmt.duration_us(k["before_us"]) if "before" in k else dash,
                          fmt.duration_us(k["after_us"]) if "after" in k else dash,
                          k["status"], launches(k))
            for k in kernels]


def rule_view(c: RuleChange, told: dict, text: str) -> RuleView:
    """One ncu rule change: its estimates from the explanation's ``rules`` entry ``told``,
    its words from ``c`` and ``text`` (its sentence, ``Told.rule_texts``)."""
    kind = told["change"]

    def est(p):
        if p is not None and 0 < p < 0.05:  # a small kernel's share of a variant's time
            return "< 0.1 %"
        return fmt.pct(p) if p is not None else ("-" if kind != "changed" else fmt.MISSING)

    return RuleView(kind, told["id"], told["title"], text,
                    est(told["speedup_pct_before"]) if kind != "appeared" else "absent",
                    est(told["speedup_pct_after"]) if kind != "disappeared" else "absent",
                    c.message, told["kernel"])


def step_views(cmp: Comparison, transitions: list[dict]) -> list[StepView]:
    """Each step as shown: its words and numbers from the explanation's ``transitions``
    (``paprof.explain.explanation``, the document ``compare --json`` writes), the
    variants' verdict words and the moved flags from ``cmp``."""
    views = []
    for i, (s, t) in enumerate(zip(cmp.steps, transitions)):
        after = cmp.variant(s.after)
        repeats = cmp.told.repeats[i]
        speedup = t["speedup"]
        if speedup is None or not s.deltas["duration_us"].moved:
            verdict = "same"
        else:
            verdict = "faster" if speedup >= 1 else "slower"
        dec = t["decomposition"]
        views.append(StepView(
            before=t["before"],
            after=t["after"],
            title=f"{t['before']} -> {t['after']}",
            headline=t["headline"],
            speedup=speedup,
            speedup_text=fmt.ratio(speedup),
            verdict=verdict,
            bottleneck_before=t["bottleneck_before"],
            bottleneck_after=t["bottleneck_after"],
            bottleneck_before_text=verdict_words(cmp.variant(s.before)),
            bottleneck_after_text=verdict_words(after),
            sentences=list(t["sentences"]),
            story=[x for x in t["sentences"] if x not in repeats],
            summary=s.summary,
            evidence_after=list(after.evidence),
            rules=[rule_view(c, r, text) for c, r, text
                   in zip(s.rule_changes, t["rules"], cmp.told.rule_texts[i])],
            cause=t["cause"],
            traffic=t["traffic"],
            kernels=kernel_rows(t["kernels"]),
            kernels_total=((fmt.duration_us(dec["before_us"]), fmt.duration_us(dec["after_us"]))
                           if dec is not None else ()),
        ))
    return views
