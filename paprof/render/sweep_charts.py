"""The sweep report's charts: a metric against one swept axis, one line per variant.

Same rules as ``reports.charts`` (whose style, colours and PNG encoding it uses): an
explicit Agg canvas, no pyplot, plain lists in, a ``ChartView`` out.
"""

from __future__ import annotations

import math

from paprof.render.charts import (ACCENT, BAR, BAR_ALT, DPI, MUTED, UNIT_COLOURS, WIDTH_IN, finished_chart,
                                   is_value, chart_style, label_text, variant_style)
from paprof.render.context import ChartView
from paprof.explain import fmt

PANELS = (
    ("time_us", "time per step, us", True),
    ("tbs", "TB/s (work model)", False),
    ("tflops", "TFLOP/s (work model)", False),
    ("pct_ceiling", "% of the measured read ceiling", False),
)
"""(series key, axis label, log scale where the values span a decade)."""


def spans(values, factor: float = 8.0) -> bool:
    """True when positive ``values`` span ``factor`` or more: a log axis fits."""
    pos = [float(v) for v in values if is_value(v) and float(v) > 0]
    return len(pos) >= 2 and max(pos) / min(pos) >= factor


MAX_LABELS = 12
"""Labelled ticks on a panel's axis at most: the 4-inch panel holds about that many of
its 7-point labels side by side (50 overlap into a smear, and each tick is matplotlib's
dearest artist). Every value keeps its marker; the alt text names them all."""


def labelled(positions: list[float], log_x: bool, most: int = MAX_LABELS) -> list[int]:
    """Indices of the ``positions`` (increasing) that get a tick and label: all of them
    up to ``most``, else the first, the last, and those between at least 1/(most - 1) of
    the axis (on a log axis: of its log) from the one kept before and half that from
    the last."""
    if len(positions) <= most:
        return list(range(len(positions)))
    place = [math.log10(p) for p in positions] if log_x else [float(p) for p in positions]
    gap = (place[-1] - place[0]) / (most - 1)
    kept = [0]
    for i in range(1, len(place) - 1):
        if place[i] - place[kept[-1]] >= gap and place[-1] - place[i] >= gap / 2:
            kept.append(i)
    return kept + [len(place) - 1]


def scaling(chart_id: str, axis: str, xs: list, labels: list[str], series: dict[str, dict[str, list]],
            where: str, log_x: bool) -> ChartView:
    """Four panels (time, TB/s, TFLOP/s, % of ceiling) against ``xs``; ``series``:
    variant -> panel key -> values (None where not measured). Ticks: ``labelled``."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import FixedLocator, NullLocator

    height = 5.4
    with chart_style():
        fig = Figure(figsize=(WIDTH_IN, height), dpi=DPI)
        FigureCanvasAgg(fig)
        grid = fig.subplots(2, 2)
        fig.subplots_adjust(left=0.08, right=0.98, top=0.88, bottom=0.1, wspace=0.22, hspace=0.42)
        positions = list(range(len(xs))) if not log_x else [float(x) for x in xs]
        shown = labelled(positions, log_x)
        ticks, names = [positions[i] for i in shown], [label_text(labels[i]) for i in shown]
        for ax, (key, label, may_log) in zip(grid.flat, PANELS):
            drawn = []
            for i, (variant, values) in enumerate(series.items()):
                pts = [(x, float(v)) for x, v in zip(positions, values.get(key, [])) if is_value(v)]
                if not pts:
                    continue
                colour, marker = variant_style(i)
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=marker,
                        markersize=4, linewidth=1.4, color=colour, label=label_text(variant))
                drawn += [p[1] for p in pts]
            if log_x:
                ax.set_xscale("log")
            ax.xaxis.set_major_locator(FixedLocator(ticks))
            ax.xaxis.set_minor_locator(NullLocator())
            ax.set_xticks(ticks, names, fontsize=7, rotation=30 if len(names) > 6 else 0)
            if may_log and spans(drawn, 10):
                ax.set_yscale("log")
            elif drawn:
                ax.set_ylim(0, max(drawn) * 1.12)
            if not drawn:
                ax.text(0.5, 0.5, "not recorded", ha="center", va="center", transform=ax.transAxes,
                        color=MUTED)
            ax.set_title(label, fontsize=9)
            ax.set_xlabel(label_text(axis) + (" (log scale)" if log_x else ""), fontsize=8)
        handles, names = grid.flat[0].get_legend_handles_labels()
        if handles:
            fig.legend(handles, names, loc="upper center", ncols=min(len(names), 6), fontsize=8)
        fig.suptitle("", fontsize=1)
        alt = "; ".join(
            f"{variant}: " + ", ".join(
                f"{axis} {lab} {fmt_us(vals.get('time_us', [None] * len(xs))[j])}"
                for j, lab in enumerate(labels))
            for variant, vals in series.items())
        title = f"Scaling with {axis}" + (f" {where}" if where else "")
        caption = (f"Time per step, throughput from the family's work model and the share of the "
                   f"measured read ceiling against {axis}{' ' + where if where else ''}; one line per variant.")
        return finished_chart(fig, chart_id, title, caption, f"{title}: {alt}")


def fmt_us(value) -> str:
    return fmt.duration_us(value) if is_value(value) and not math.isinf(float(value)) else "n/a"
