"""The charts and the formatted stall and ledger tables of a finished comparison.

The stall ranking, the ledgers and the roofline come computed on the comparison
(``paprof.explain.finish``); here they become text and matplotlib charts.
"""

from __future__ import annotations

from dataclasses import dataclass

from paprof.explain import fmt
from paprof.explain.compare import Comparison, VariantResult, binding_limits
from paprof.render import charts as chart_lib
from paprof.render.charts import ChartView
from paprof.model.roofline import LEVEL_NAMES


@dataclass
class StallView:
    """Warp stalls per variant, in cycles per issued instruction: the top reasons named,
    the rest summed as "other"."""

    reasons: list[str]
    """Reason names as shown (``long scoreboard`` ...), then ``other`` when any are grouped."""
    values: dict[str, list[float | None]]
    """label -> one value per reason (None: not recorded)."""
    rows: list[tuple[str, list[str]]]
    """(reason, text per variant) for the tables."""
    totals: dict[str, float | None]
    """label -> the sum of every stall reason shown (selected excluded)."""


def build_stalls(ranking) -> StallView | None:
    """The stall ranking (``paprof.model.stalls``) as the tables show it."""
    if ranking is None:
        return None
    labels = list(ranking.values)
    rows = [(reason, [fmt.number(ranking.values[lab][i], 2) for lab in labels])
            for i, reason in enumerate(ranking.reasons)]
    rows.append(("all stalls", [fmt.number(ranking.totals[lab], 3) for lab in labels]))
    return StallView(ranking.reasons, ranking.values, rows, ranking.totals)


# -- the time ledger ---------------------------------------------------------------------
@dataclass
class LedgerView:
    """One step's time ledger: each term (and the residual) in microseconds and as text."""

    title: str
    before_us: float
    after_us: float
    difference_text: str
    rows: list[tuple[str, str, float, str]]
    """(key, words, microseconds, text) of each term, then the residual."""
    missing: list[str]


def build_ledgers(ledgers) -> list[LedgerView]:
    """The steps' ledgers (``Comparison.ledgers``) as text."""
    views = []
    for led in ledgers or []:
        if led is None:
            continue
        views.append(LedgerView(
            f"{led.before} -> {led.after}", led.before_us, led.after_us, fmt.signed_duration_us(led.difference),
            [(k, words, us, fmt.signed_duration_us(us)) for k, words, us in led.rows()], list(led.missing)))
    return views


# -- charts ------------------------------------------------------------------------------
TICK_LIMITERS = {"registers": "regs", "shared memory": "smem", "warps": "warps", "blocks": "blocks"}
"""Occupancy limiters as the occupancy chart's tick labels say them (narrow columns)."""


def _limiter_tick(v: VariantResult) -> str:
    names, blocks = binding_limits(v)
    if not names:
        return ""
    text = "+".join(TICK_LIMITERS.get(n, n) for n in names)
    return f"{text}\n{fmt.count(blocks)} per SM" if blocks is not None else text


PIPE_UNITS = (("tensor pipe", "tensor_pipe_pct"), ("FMA pipe", "fma_pipe_pct"),
              ("issue active", "issue_active_pct"))
"""The units a compute-bound family's chart shows in place of DRAM bandwidth."""


def build_charts(cmp: Comparison, series: dict[str, dict], stalls: StallView | None = None,
                 ledgers: list[LedgerView] | None = None, roofline=None) -> list[ChartView]:
    keys = [v.label for v in cmp.variants]
    labels = [chart_lib.label_text(k) for k in keys]
    col = {key: [series[lab].get(key) for lab in keys] for key in (
        "sm_throughput_pct", "memory_throughput_pct", "dram_throughput_pct", "l1_throughput_pct",
        "l2_throughput_pct", "duration_us", "duration_us_event", "speedup_first",
        "achieved_bandwidth_gbs", "theoretical_occupancy_pct", "achieved_occupancy_pct")}
    ceilings = [v.ceiling for v in cmp.variants]
    measured = any(c and c.measured for c in ceilings)
    made = [
        chart_lib.speed_of_light(labels, {
            "SM": col["sm_throughput_pct"], "Memory": col["memory_throughput_pct"],
            "DRAM": col["dram_throughput_pct"], "L1": col["l1_throughput_pct"],
            "L2": col["l2_throughput_pct"]},
            next((c.text for c in cmp.contradictions if c.key == "memory_throughput_pct"), "")),
        chart_lib.duration(labels, col["duration_us"], col["speedup_first"],
                        [len(v.kernels) for v in cmp.variants], col["duration_us_event"]),
        chart_lib.pipes(labels, {name: [series[lab].get(key) for lab in keys]
                                 for name, key in PIPE_UNITS})
        if cmp.told.compute_family else
        chart_lib.bandwidth(labels, col["achieved_bandwidth_gbs"],
                            [c.tbs if c else None for c in ceilings],
                            [c.datasheet_tbs if c else None for c in ceilings],
                            "measured read ceiling" if measured else "datasheet bandwidth"),
        chart_lib.occupancy(labels, col["theoretical_occupancy_pct"], col["achieved_occupancy_pct"],
                         [_limiter_tick(v) for v in cmp.variants]),
    ]
    if stalls is not None:
        made.append(chart_lib.stalls(labels, stalls.reasons, [stalls.values[lab] for lab in keys]))
    if ledgers:
        made.append(chart_lib.ledger([(chart_lib.label_text(led.title), led.before_us, led.after_us,
                                       [(k, words, us) for k, words, us, _ in led.rows
                                        if abs(us) >= 0.01 * max(led.before_us, led.after_us)])
                                      for led in ledgers]))
    if roofline is not None:
        made.append(roofline_chart(roofline))
    return made


def roofline_chart(rl) -> ChartView:
    """The roofline chart of a ``paprof.model.roofline.Roofline``."""
    return chart_lib.roofline(
        [chart_lib.label_text(v.label) for v in rl.variants],
        [(r.key, r.name, r.kind, r.rate, r.source) for r in rl.roofs.values()],
        [(chart_lib.label_text(v.label), p.level, p.intensity, p.flop_rate)
         for v in rl.variants for p in v.points],
        LEVEL_NAMES)
