"""The program view as the report shows it (``paprof.model.program``, read from the
explanation's ``program`` field): each program's top kernels, what moved most, what
was skipped."""

from __future__ import annotations

from dataclasses import dataclass, field

from paprof.explain import fmt
from paprof.model.program import TOP_KERNELS


@dataclass
class KernelLine:
    kernel: str
    launches: str
    time: str
    share: str
    bottleneck: str


@dataclass
class ProgramRun:
    label: str
    step_time: str
    """The step: profiled kernels plus the skipped ones."""
    coverage: str
    """What was profiled, in words ("every kernel in the range", "3 of 6 kernels, ...")."""
    kernels: list[KernelLine]
    more: str = ""
    """The profiled kernels left out of the list, counted."""
    skipped: str = ""
    """The skipped kernels in words, empty where none was."""


@dataclass
class MoverLine:
    before: str
    after: str
    before_time: str
    after_time: str
    change: str


@dataclass
class ProgramTransition:
    before: str
    after: str
    speedup: str
    moved: list[MoverLine]


@dataclass
class ProgramView:
    runs: list[ProgramRun]
    transitions: list[ProgramTransition] = field(default_factory=list)
    note: str = ""
    """Where some kernels were skipped: what the comparison below covers."""


def _launches(n) -> str:
    return fmt.number(n) if isinstance(n, (int, float)) else "-"


def _run(r: dict) -> ProgramRun:

    kernels = r.get("kernels") or []
    shown = [KernelLine(k["kernel"], _launches(k.get("launches")), fmt.duration_us(k.get("time_us")),
                        fmt.pct(100 * k["share"]) if k.get("share") is not None else "-",
                        k.get("bottleneck") or "-")
             for k in kernels[:TOP_KERNELS]]
    rest = kernels[TOP_KERNELS:]
    more = (f"and {len(rest)} more profiled kernels, {fmt.duration_us(sum(k['time_us'] for k in rest))}"
            if rest else "")
    skipped = r.get("skipped")
    rule = r.get("rule")
    if skipped is None or rule is None:
        coverage = f"every kernel in the range profiled ({_launches(r.get('launches'))} launches a step)"
        skipped_text = ""
    else:
        cap = f", at most {int(rule['top'])}" if rule.get("top") else ""
        done = len(kernels)
        coverage = (f"{done} of {done + skipped['kernels']} kernels profiled, the longest that make up "
                    f"{fmt.pct(100 * (rule.get('cover') or 0))} of the timed step{cap}")
        if skipped["kernels"]:
            names = ", ".join(f"{k['kernel']} {fmt.duration_us(k['time_us'])}" for k in skipped["names"])
            others = skipped["kernels"] - len(skipped["names"])
            skipped_text = (f"skipped (timed only): {skipped['kernels']} kernels, "
                            f"{_launches(skipped['launches'])} launches a step, "
                            f"{fmt.duration_us(skipped['time_us'])}, "
                            f"{fmt.pct(100 * (skipped.get('share') or 0))} of the step: {names}"
                            + (f" and {others} more" if others > 0 else ""))
        else:
            skipped_text = ""
    return ProgramRun(r["label"], fmt.duration_us(r.get("step_us")), coverage, shown, more, skipped_text)


def _mover(m: dict) -> MoverLine:
    if m.get("skipped"):
        before = after = "skipped kernels (timed only)"
    else:
        before, after = m.get("before") or "-", m.get("after") or "-"
    return MoverLine(before, after,
                     fmt.duration_us(m["before_us"]) if m.get("before") or m.get("skipped") else "-",
                     fmt.duration_us(m["after_us"]) if m.get("after") or m.get("skipped") else "-",
                     fmt.signed_duration_us(m["delta_us"]))


def _speedup(t: dict, skipping: list[str]) -> str:
    s = t.get("step_speedup")
    if not s:
        return ""
    words = f"{fmt.ratio(s)} faster" if s >= 1 else f"{fmt.ratio(1 / s)} slower"
    whole = " (skipped kernels included)" if {t["before"], t["after"]} & set(skipping) else ""
    return f"{t['after']} is {words} than {t['before']} over the whole step{whole}"


def program_view(explained: dict | None) -> ProgramView | None:
    """The report's program view from the explanation's ``program``; None without one."""
    if not explained:
        return None
    runs = [_run(r) for r in explained.get("runs") or []]
    skipping = [r.label for r in runs if r.skipped]
    transitions = [ProgramTransition(t["before"], t["after"], _speedup(t, skipping),
                                     [_mover(m) for m in t.get("moved") or []])
                   for t in explained.get("transitions") or []]
    note = (f"The comparison below covers the profiled kernels only: {', '.join(skipping)} "
            "skipped some (run with --all to profile every kernel)." if skipping else "")
    return ProgramView(runs, transitions, note)
