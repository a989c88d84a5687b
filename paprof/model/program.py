"""The program view of a comparison: where the time of each program's step goes.

For runs of whole programs (``paprof run --cmd``, kind ``command``) the report opens with
it: each program's kernels by time (by name, summed over the launches of its median
step), their share of the step, their bottleneck label, what moved most between the
programs, and what was not profiled. A program profiled by its top kernels
(``paprof.measure.top_kernels``) has a ``selection`` in its record: the kernels the
timing pass saw and the full pass skipped, with their time. The step's time here is the
profiled kernels' plus the skipped ones' (in the ratio the timing pass measured between
the two); the comparison's own numbers (the headline, the decomposition) cover the
profiled kernels only, and the view says how much that leaves out.

``program_view(cmp)`` gives raw numbers as one dict (the ``program`` field of the
``compare --json`` explanation); ``paprof.render.program_view`` formats it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

#: Kernels listed per program, and movers per transition; the rest are counted.
TOP_KERNELS = 10
TOP_MOVERS = 5
#: Skipped kernels named per program.
TOP_SKIPPED = 5


#: Launches a step's kernel list (the "compared as their sum" sentence, the report's
#: kernel lists) shows one by one; past it (a program's step of hundreds), the kernels by
#: name, the longest ``LISTED_KERNELS`` first, and the rest as one entry.
LISTED_LAUNCHES = 6
LISTED_KERNELS = 4


def listed_groups(items: list, name_of: Callable) -> list[tuple[str, list]]:
    """``items`` (a step's launches: anything with ``duration_us`` and ``share``) as the
    report lists them: ``(label, [items])`` each, one per launch up to
    ``LISTED_LAUNCHES``; past it, one per kernel name ("name x32"), the longest
    ``LISTED_KERNELS`` by summed time first, then "N more kernels" for the others."""
    if len(items) <= LISTED_LAUNCHES:
        return [(name_of(k), [k]) for k in items]
    by_name: dict[str, list] = {}
    for k in items:
        by_name.setdefault(name_of(k), []).append(k)
    named = sorted(by_name.items(), key=lambda item: -sum(k.duration_us or 0.0 for k in item[1]))
    out = [(name + (f" x{len(group)}" if len(group) > 1 else ""), group)
           for name, group in named[:LISTED_KERNELS]]
    left = len(named) - LISTED_KERNELS
    if left > 0:
        out.append((f"{left} more kernel{'s' if left > 1 else ''}",
                    [k for _name, group in named[LISTED_KERNELS:] for k in group]))
    return out


def listed_words(items: list, name_of: Callable) -> str:
    """"2 kernels", or for a step listed by name "215 launches of 10 kernels"."""
    if len(items) <= LISTED_LAUNCHES:
        return f"{len(items)} kernels"
    names = len({name_of(k) for k in items})
    return f"{len(items)} launches of {names} kernel{'s' if names > 1 else ''}"


def summed(group: list) -> tuple[float | None, float | None]:
    """A listed group's time and share (None where a member lacks one)."""
    us, shares = [k.duration_us for k in group], [k.share for k in group]
    return (sum(us) if all(x is not None for x in us) else None,
            sum(shares) if all(x is not None for x in shares) else None)


def _num(value) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def is_program(v) -> bool:
    """Whether a compared variant is a whole program (a ``--cmd`` run)."""
    record = v.sidecar
    return record is not None and record.get("kind") == "command"


def _selection(v) -> Mapping | None:
    chosen = v.sidecar.get("selection") if v.sidecar is not None else None
    if not isinstance(chosen, Mapping):
        return None
    parts = chosen.get("skipped"), chosen.get("profiled")
    if not all(isinstance(p, Mapping) for p in parts):
        return None
    return chosen


def unprofiled(v) -> tuple[int, float] | None:
    """(kernels, share of the range's time) that a program's run timed but did not
    profile (its top kernels' selection); None for any other run or none skipped."""
    chosen = _selection(v)
    if chosen is None:
        return None
    n, share = _num(chosen["skipped"].get("kernels")), _num(chosen["skipped"].get("share"))
    if not n or n < 1 or share is None:
        return None
    return int(n), share


def _by_name(parts) -> list[dict]:
    """The launches of one step summed by kernel name, longest first; each name's label
    is its longest launch's."""
    names: dict[str, dict] = {}
    for k in parts:
        us = _num(k.duration_us) or 0.0
        entry = names.setdefault(k.kernel, {"kernel": k.kernel, "launches": 0, "time_us": 0.0,
                                            "bottleneck": k.bottleneck, "_longest": -1.0})
        entry["launches"] += 1
        entry["time_us"] += us
        if us > entry["_longest"]:
            entry["_longest"], entry["bottleneck"] = us, k.bottleneck
    out = sorted(names.values(), key=lambda e: (-e["time_us"], e["kernel"]))
    for entry in out:
        del entry["_longest"]
    return out


def _skipped(chosen: Mapping | None, profiled_us: float) -> dict | None:
    """The skipped kernels a step. Their time is the profiled step's times the timing
    pass's ratio of skipped to profiled time (which holds however many steps it saw);
    their launches are its count over its steps."""
    if chosen is None:
        return None
    steps = max(1, int(_num(chosen.get("steps")) or 1))
    skipped, profiled = chosen["skipped"], chosen["profiled"]
    timed = _num(skipped.get("time_us")) or 0.0
    timed_profiled = _num(profiled.get("time_us")) or 0.0
    scale = profiled_us / timed_profiled if timed_profiled > 0 and profiled_us > 0 else 1 / steps
    kernels = [k for k in chosen.get("kernels") or () if isinstance(k, Mapping)
               and not k.get("profiled") and isinstance(k.get("kernel"), str)]
    return {
        "kernels": int(_num(skipped.get("kernels")) or 0),
        "launches": (_num(skipped.get("launches")) or 0.0) / steps,
        "time_us": timed * scale,
        "share_timed": _num(skipped.get("share")),
        "names": [{"kernel": k["kernel"], "launches": (_num(k.get("launches")) or 0.0) / steps,
                   "time_us": (_num(k.get("time_us")) or 0.0) * scale}
                  for k in kernels[:TOP_SKIPPED]],
    }


def _run(v) -> dict:
    kernels = _by_name(v.kernels)
    profiled_us = sum(k["time_us"] for k in kernels)
    chosen = _selection(v)
    skipped = _skipped(chosen, profiled_us)
    step_us = profiled_us + (skipped["time_us"] if skipped else 0.0)
    for k in kernels:
        k["share"] = k["time_us"] / step_us if step_us > 0 else None
    if skipped:
        skipped["share"] = skipped["time_us"] / step_us if step_us > 0 else None
    return {
        "label": v.label,
        "step_us": step_us,
        "profiled_us": profiled_us,
        "launches": sum(k["launches"] for k in kernels),
        "bottleneck": v.bottleneck,
        "rule": None if chosen is None else {"cover": _num(chosen.get("cover")),
                                             "top": _num(chosen.get("top"))},
        "kernels": kernels,
        "skipped": skipped,
    }


def _movers(step, runs: dict) -> list[dict]:
    """What moved most in one transition, by kernel (the decomposition's pairing of the
    two steps' kernels where there is one, else by name), then the skipped kernels."""
    rows = []
    pairing = getattr(step.decomposition, "pairing", None)
    if pairing is not None:
        for a, b in pairing.pairs:
            rows.append((a.kernel, b.kernel, _num(a.duration_us) or 0.0, _num(b.duration_us) or 0.0))
        rows += [(a.kernel, None, _num(a.duration_us) or 0.0, 0.0) for a in pairing.gone]
        rows += [(None, b.kernel, 0.0, _num(b.duration_us) or 0.0) for b in pairing.new]
    else:
        before = {k["kernel"]: k["time_us"] for k in runs[step.before]["kernels"]}
        after = {k["kernel"]: k["time_us"] for k in runs[step.after]["kernels"]}
        rows = [(n if n in before else None, n if n in after else None, before.get(n, 0.0),
                 after.get(n, 0.0)) for n in dict.fromkeys([*before, *after])]
    merged: dict[tuple, list] = {}
    for b_name, a_name, b_us, a_us in rows:
        entry = merged.setdefault((b_name, a_name), [0.0, 0.0])
        entry[0] += b_us
        entry[1] += a_us
    moved = [{"before": b, "after": a, "before_us": bu, "after_us": au, "delta_us": au - bu}
             for (b, a), (bu, au) in merged.items()]
    sb, sa = runs[step.before]["skipped"], runs[step.after]["skipped"]
    if sb or sa:
        bu, au = (sb or {}).get("time_us", 0.0), (sa or {}).get("time_us", 0.0)
        moved.append({"before": None, "after": None, "skipped": True, "before_us": bu,
                      "after_us": au, "delta_us": au - bu})
    moved.sort(key=lambda m: -abs(m["delta_us"]))
    return moved[:TOP_MOVERS]


def program_view(cmp) -> dict | None:
    """The program view of ``cmp`` as raw numbers; None unless it compares programs."""
    if not cmp.variants or not any(is_program(v) for v in cmp.variants):
        return None
    runs = {v.label: _run(v) for v in cmp.variants}
    transitions = []
    for step in cmp.steps:
        if step.before in runs and step.after in runs:
            b, a = runs[step.before]["step_us"], runs[step.after]["step_us"]
            transitions.append({
                "before": step.before, "after": step.after,
                "step_speedup": b / a if a > 0 and b > 0 else None,
                "moved": _movers(step, runs),
            })
    return {"runs": list(runs.values()), "transitions": transitions}
