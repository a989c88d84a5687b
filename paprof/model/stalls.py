"""The warp-stall ranking a report shows: the reasons that matter most over the variants.

``rank_stalls(cmp)`` keeps the ``TOP_STALLS`` reasons with the largest value in any
variant (cycles per issued instruction), sums the rest as "other" and totals each
variant's stalls (``selected`` is left out: that is issuing, not stalling).
"""

from __future__ import annotations

from dataclasses import dataclass

from paprof.model.comparison import STALL_COLUMNS

TOP_STALLS = 5
"""Stall reasons named in the breakdown; the others are summed as "other"."""


@dataclass
class StallRanking:
    reasons: list[str]
    """Reason names as shown (``long scoreboard`` ...), then ``other`` when any are grouped."""
    values: dict[str, list[float | None]]
    """label -> one value per reason (None: not recorded)."""
    totals: dict[str, float | None]
    """label -> the sum of every stall reason (selected excluded)."""


def rank_stalls(cmp, top: int = TOP_STALLS) -> StallRanking | None:
    """The ranking over ``cmp``'s variants; None when none recorded WarpStateStats."""
    columns = [c for c in STALL_COLUMNS if c != "stall_selected"]
    got = {v.label: {c: v.get(c) for c in columns if v.get(c) is not None} for v in cmp.variants}
    if not any(got.values()):
        return None
    peak = {c: max((vals.get(c) or 0.0) for vals in got.values()) for c in columns}
    named = [c for c in sorted(columns, key=lambda c: -peak[c]) if peak[c] > 0][:top]
    rest = [c for c in columns if c not in named]
    reasons = [c[len("stall_"):].replace("_", " ") for c in named]
    values: dict[str, list[float | None]] = {}
    totals: dict[str, float | None] = {}
    for label, vals in got.items():
        row = [vals.get(c) for c in named]
        if rest:
            others = [vals[c] for c in rest if c in vals]
            row.append(sum(others) if others else None)
        values[label] = row
        totals[label] = sum(vals.values()) if vals else None
    if rest:
        reasons.append("other")
    return StallRanking(reasons, values, totals)
