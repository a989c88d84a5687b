"""The verdict table and the one-sentence summary above it, as the templates show them.

``verdict_view(doc)`` turns the ``verdict`` of the ``compare --json`` explanation
(``paprof.explain.explanation``) into rows of text: time with its spread, speedup over
the baseline, bottleneck, the cause in one line (the whole cause is kept beside it),
verified or not, and the ties. Read from the same document ``--json`` writes, the page
and the JSON cannot disagree.
"""

from __future__ import annotations

from dataclasses import dataclass

from paprof.explain import fmt
from paprof.explain.compare import bound_words


@dataclass
class VerdictRowView:
    label: str
    time: str
    """ncu duration, ``± half-range`` over several profiled launches."""
    events: str
    """CUDA-event median ± half-range over the timed repetitions (without the profiler)."""
    speedup: str
    bottleneck: str | None
    bottleneck_text: str
    limit: str
    """How close it is to its limit: the busiest unit's share of peak ("DRAM 88 % of peak")."""
    cause: str
    """The cause in one line (the largest term, one counter, its share)."""
    cause_full: str
    verified: str
    tie: str
    """``tie with v6`` (within the noise), or empty."""
    baseline: bool
    fastest: bool


@dataclass
class VerdictView:
    baseline: str
    rows: list[VerdictRowView]
    summary: str
    noise_text: str
    cause_header: str = "Cause of the difference"
    """The cause column's heading: against the variant above (a chained story) or the
    baseline."""


def _time(value, spread) -> str:
    text = fmt.duration_us(value)
    if spread:
        text += f" ± {fmt.duration_us(spread)}"
    return text


def _speedup(row: dict, noise_pct: float) -> str:
    if row["baseline"]:
        return "baseline"
    s = row["speedup"]
    if s is None:
        return fmt.MISSING
    if abs(max(s, 1 / s) - 1) * 100 < noise_pct:
        return f"as fast ({fmt.ratio(s)})"
    return f"{fmt.ratio(s)} faster" if s >= 1 else f"{fmt.ratio(1 / s)} slower"


def _step_us(program: dict | None, label: str) -> float | None:
    """A program's whole step (its profiled kernels and the ones only timed) where its run
    skipped some (the explanation's ``program`` view), else None."""
    for run in (program or {}).get("runs") or ():
        if run.get("label") == label and run.get("skipped") and run.get("step_us"):
            return run["step_us"]
    return None


def summary(v: dict, program: dict | None = None) -> str:
    """Which is fastest (the tied ones named together), by how much over the baseline. A
    program that skipped kernels is given its whole step beside its profiled kernels' time
    (``program``: the explanation's program view), as the program view above says it."""
    by = {r["label"]: r for r in v["rows"]}
    fastest = v["fastest"]
    if not fastest:
        return ""
    lead = by[fastest[0]]
    names = " and ".join(fastest) if len(fastest) <= 3 else ", ".join(fastest)
    said = f"{fmt.duration_us(lead['duration_us'])}, {bound_words(lead['bottleneck'])}"
    step_us = _step_us(program, lead["label"])
    if step_us is not None:
        said = (f"a step {fmt.duration_us(step_us)}, {fmt.duration_us(lead['duration_us'])} of it "
                f"in the profiled kernels, {bound_words(lead['bottleneck'])}")
    if len(fastest) > 1:
        text = f"Fastest: {names}, tied within {fmt.number(v['noise_pct'])} % ({said})"
    else:
        text = f"Fastest: {names} ({said})"
    if v["baseline"] not in fastest and lead["speedup"]:
        text += f", {_speedup(lead, v['noise_pct'])} than {v['baseline']}"
    return text + "."


def verdict_view(v: dict | None, program: dict | None = None) -> VerdictView | None:
    """The explanation's ``verdict`` (None: no variants) as the templates show it;
    ``program``: its program view, where it compares programs (``summary``)."""
    if v is None:
        return None
    rows = []
    for r in v["rows"]:
        events = (_time(r["event_us"], r["event_us_spread"]) + f" (n={r['event_count']})"
                  if r["event_us"] is not None else fmt.MISSING)
        rows.append(VerdictRowView(
            label=r["label"],
            time=_time(r["duration_us"], r["duration_us_spread"])
            + (f" ({r['steps']} steps)" if r["steps"] > 1 else ""),
            events=events,
            speedup=_speedup(r, v["noise_pct"]),
            bottleneck=r["bottleneck"],
            bottleneck_text=bound_words(r["bottleneck"]),
            limit=r.get("limit") or "",
            cause=(r["short_cause"] or "") if not r["baseline"] else "",
            cause_full=r["cause"] or "",
            verified={True: "passed", False: "FAILED", None: "not verified"}[r["verified"]],
            tie=("tie with " + ", ".join(r["tie"])) if r["tie"] else "",
            baseline=r["baseline"],
            fastest=r["label"] in v["fastest"],
        ))
    noise = (f"Time: ncu duration (± half the range over profiled steps, where several); "
             f"CUDA events: median ± half-range without the profiler. Variants within "
             f"{fmt.number(v['noise_pct'])} % of each other are a tie (the sweep report's rule). "
             + (f"Cause: the largest term of the time difference from the variant above (the "
                f"story's step; compare --baseline tells each against {v['baseline']})."
                if v.get("chained") else
                f"Cause: the largest term of the time difference from {v['baseline']}."))
    header = ("Cause of the difference from the variant above" if v.get("chained")
              else f"Cause of the difference from {v['baseline']}")
    return VerdictView(v["baseline"], rows, summary(v, program), noise, header)
