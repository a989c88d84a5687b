"""Movers: each compared column across one step, and whether it moved past its threshold.

``step_deltas(before, after, t)`` gives one ``Delta`` per column; ``movers(t)`` says, per
column, how "moved" is judged (relative change, points, or any change);
``rule_changes`` lists the ncu rules that appeared, disappeared or whose estimate moved.
"""

from __future__ import annotations

import math
from typing import Callable

from paprof.read.metrics import TRAFFIC_COLUMNS
from paprof.model.comparison import (EXTRA_COLUMNS, METRIC_COLUMNS, THRESHOLDS, Delta, RuleChange,
                                     Thresholds, VariantResult, limiter_name)
from paprof.model.numbers import finite, plain


def _delta(column: str, before, after, moved: Callable[[float, float], bool]) -> Delta:
    b, a = finite(before), finite(after)
    if b is None or a is None:
        return Delta(column, plain(before), plain(after), None, None, False)
    rel = (a - b) / b if b else (None if a == b else math.inf)
    return Delta(column, b, a, a - b, rel, moved(b, a))


def _rel_moved(threshold: float) -> Callable[[float, float], bool]:
    def moved(b: float, a: float) -> bool:
        if b == a:
            return False
        if b == 0 or a == 0:
            return True
        return abs(a - b) / abs(b) >= threshold
    return moved


def _pts_moved(threshold: float) -> Callable[[float, float], bool]:
    return lambda b, a: abs(a - b) >= threshold


def _exact_moved(b: float, a: float) -> bool:
    return b != a


def movers(t: Thresholds) -> dict[str, Callable[[float, float], bool]]:
    """Column -> "did it move" under thresholds ``t``."""
    pts = _pts_moved(t.throughput_pts)
    occ = _pts_moved(t.occupancy_pts)
    traffic = _rel_moved(t.traffic_rel)
    return {
        "duration_us": _rel_moved(t.duration_rel),
        "duration_us_event": _rel_moved(t.duration_rel),
        "elapsed_cycles": _rel_moved(t.duration_rel),
        "sm_throughput_pct": pts,
        "memory_throughput_pct": pts,
        "dram_throughput_pct": pts,
        "l1_throughput_pct": pts,
        "l2_throughput_pct": pts,
        "dram_active_cycles": traffic,
        "dram_bytes": traffic,
        "achieved_bandwidth_gbs": _rel_moved(t.bandwidth_rel),
        "work_tbs": _rel_moved(t.bandwidth_rel),
        "work_tflops": _rel_moved(t.bandwidth_rel),
        "theoretical_occupancy_pct": occ,
        "achieved_occupancy_pct": occ,
        "waves_per_sm": _rel_moved(t.waves_rel),
        "top_stall_cycles": _rel_moved(t.stall_rel),
        "issue_active_pct": _pts_moved(t.issue_pts),
        "warps_active_per_sm": _rel_moved(t.waves_rel),
        **{c: (occ if c.endswith("_pct") else traffic) for c in TRAFFIC_COLUMNS
           if c not in ("dram_bytes",)},
    }


def step_deltas(before: VariantResult, after: VariantResult, t: Thresholds = THRESHOLDS) -> dict[str, Delta]:
    """Every compared column across one step, with its "moved" verdict."""
    rules = movers(t)
    out = {}
    for column in (*METRIC_COLUMNS, *EXTRA_COLUMNS, "duration_us_event"):
        if column == "occupancy_limiter":
            b, a = limiter_name(before.get(column)), limiter_name(after.get(column))
            out[column] = Delta(column, b, a, None, None, b != a and None not in (b, a))
            continue
        out[column] = _delta(column, before.get(column), after.get(column), rules.get(column, _exact_moved))
    return out


def speedup(before: VariantResult, after: VariantResult) -> float | None:
    b, a = finite(before.get("duration_us")), finite(after.get("duration_us"))
    if not b or not a:
        return None
    return b / a


def rule_changes(before: VariantResult, after: VariantResult, t: Thresholds = THRESHOLDS) -> list[RuleChange]:
    """ncu rules that appeared, disappeared, or whose estimated speedup moved (for a variant
    of several kernels: time-weighted, naming the kernel)."""
    def where(v: VariantResult, hit) -> str | None:
        return hit.kernel if v.multi_kernel and hit.kernel else None

    out = []
    for rid, hit in after.rules.items():
        if rid not in before.rules:
            out.append(RuleChange(rid, hit.title, "appeared", None, hit.speedup_pct, hit.message,
                                  where(after, hit)))
    for rid, hit in before.rules.items():
        if rid not in after.rules:
            out.append(RuleChange(rid, hit.title, "disappeared", hit.speedup_pct, None, hit.message,
                                  where(before, hit)))
    for rid, hit in after.rules.items():
        old = before.rules.get(rid)
        if old is None:
            continue
        b, a = old.speedup_pct, hit.speedup_pct
        if b is not None and a is not None and abs(a - b) >= t.rule_speedup_pts:
            out.append(RuleChange(rid, hit.title, "changed", b, a, hit.message,
                                  where(after, hit) or where(before, old)))
    return out
