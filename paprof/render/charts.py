"""The report's charts: matplotlib figures rendered to inline PNG data URIs.

All matplotlib lives here. Each chart function takes plain lists (labels, numbers) and
returns a ``ChartView``; none reads a DataFrame. Figures are built with
``matplotlib.figure.Figure`` on an explicit Agg canvas: no pyplot, no backend switch, no
figure registry, so importing or calling this module leaves matplotlib's global state
alone (style settings apply only inside ``chart_style``) and every figure is released when
its function returns.
"""

from __future__ import annotations

import base64
import contextlib
import io
import math
from dataclasses import dataclass

from paprof.explain import fmt
from paprof.safetext import shown


@dataclass
class ChartView:
    """One rendered chart, ready for an ``<img>`` (made by this module)."""

    id: str
    title: str
    caption: str
    alt: str
    uri: str
    """``data:image/png;base64,...``"""
    width: int
    """Pixels."""
    height: int

UNIT_COLOURS = {
    "SM": "#0072B2",
    "Memory": "#8c8c8c",
    "DRAM": "#D55E00",
    "L1": "#009E73",
    "L2": "#CC79A7",
}
"""Okabe-Ito colours (safe for colour-blind readers and in greyscale print)."""

BAR = "#0072B2"
BAR_ALT = "#56B4E9"
ACCENT = "#D55E00"
MUTED = "#8c8c8c"

DPI = 144
WIDTH_IN = 8.0


@contextlib.contextmanager
def chart_style():
    import matplotlib

    with matplotlib.rc_context({
        "font.size": 9,
        "axes.titlesize": 10,
        "axes.titleweight": "bold",
        "axes.spines.top": False,
        "axes.spines.right": False,
        "axes.grid": True,
        "grid.color": "#dddddd",
        "grid.linewidth": 0.6,
        "axes.axisbelow": True,
        "legend.frameon": False,
        "svg.fonttype": "path",
    }):
        yield


def _figure(height_in: float, ncols: int = 1, width_ratios=None, *, left_in: float = 0.6,
            right_in: float = 0.2, top_in: float = 0.35, bottom_in: float = 0.5, wspace: float = 0.08):
    """A figure with fixed margins (in inches): one layout pass, no constrained layout,
    which would draw every figure twice."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(WIDTH_IN, height_in), dpi=DPI)
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, ncols, gridspec_kw={"width_ratios": width_ratios} if width_ratios else None)
    fig.subplots_adjust(left=left_in / WIDTH_IN, right=1 - right_in / WIDTH_IN,
                        top=1 - top_in / height_in, bottom=bottom_in / height_in, wspace=wspace)
    return fig, axes


LABEL_CHARS = 40
"""The most characters of a name a chart draws (a longer one is cut with "...")."""


def label_text(text) -> str:
    """A name (a variant, a coordinate) as a chart draws it: control and bidi characters
    shown escaped (``paprof.safetext``; matplotlib would also warn with the raw glyph),
    cut to ``LABEL_CHARS``."""
    text = shown(text, limit=None)
    return text if len(text) <= LABEL_CHARS else text[:LABEL_CHARS - 3] + "..."


def _label_margin(labels: list[str]) -> float:
    """Inches of left margin for horizontal-bar labels at 9 pt (at most half the figure:
    a longer label is cut by the margin, the plot keeps its room)."""
    return min(0.25 + 0.075 * max((len(s) for s in labels), default=4), WIDTH_IN / 2)


def _log_axis(axis, lo: float, hi: float, steps=(1, 2, 5), formatter=None) -> None:
    """A log axis with fixed major ticks (1-2-5 per decade) and no minor ticks: matplotlib's
    automatic log locators cost more than the rest of the chart."""
    import math as _m

    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    axis.axes.set_xscale("log") if axis is axis.axes.xaxis else axis.axes.set_yscale("log")
    ticks = []
    for exp in range(_m.floor(_m.log10(lo)), _m.ceil(_m.log10(hi)) + 1):
        ticks += [m * 10.0 ** exp for m in steps if lo <= m * 10.0 ** exp <= hi]
    ticks = sorted(set(ticks))  # steps (1, 10) give each power of ten twice
    if len(ticks) > 6:
        ticks = [t for t in ticks if abs(_m.log10(t) - round(_m.log10(t))) < 1e-9] or ticks
    axis.set_major_locator(FixedLocator(ticks))
    axis.set_minor_locator(NullLocator())
    if formatter is not None:
        axis.set_major_formatter(FuncFormatter(lambda v, _pos: formatter(v)))


def finished_chart(fig, chart_id: str, title: str, caption: str, alt: str) -> ChartView:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, metadata={"Software": None})
    width, height = (int(round(v)) for v in fig.get_size_inches() * DPI)
    fig.clear()
    data = base64.b64encode(buf.getvalue()).decode("ascii")
    return ChartView(chart_id, title, caption, alt, f"data:image/png;base64,{data}", width, height)


DRAWABLE = 1e200
"""The largest magnitude a chart draws: its axes multiply the largest value (x8 for a
log scale's headroom), and a value near 1e308 overflowed them to infinity. No
measurement comes near; a crafted record or report may."""


def is_value(value) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value)) \
        and abs(value) <= DRAWABLE


def _val(value) -> float:
    return float(value) if is_value(value) else 0.0


def speed_of_light(labels: list[str], units: dict[str, list], note: str = "") -> ChartView:
    """A heatmap: one row per unit, one column per variant, each cell its throughput (% of
    peak) written in it, so 8 variants x 5 units read without a legend. ``note``: why a
    Memory cell under a unit's, where one is (printed in the caption)."""
    with chart_style():
        names = list(units)
        margin = _label_margin(names) + 0.15
        fig, ax = _figure(0.7 + 0.36 * max(len(names), 2), left_in=margin, bottom_in=0.3,
                          top_in=0.4, right_in=0.25)
        grid = [[_val(v) if is_value(v) else float("nan") for v in units[u]] for u in names]
        import matplotlib

        cmap = matplotlib.colormaps["Blues"].with_extremes(bad="#eeeeee")
        ax.imshow(grid, cmap=cmap, vmin=0, vmax=100, aspect="auto")
        for r, unit in enumerate(names):
            for c, value in enumerate(units[unit]):
                text, colour = ("n/a", MUTED) if not is_value(value) else (
                    f"{_val(value):.0f} %", "white" if _val(value) >= 60 else "black")
                ax.text(c, r, text, ha="center", va="center", fontsize=8, color=colour)
        ax.set_xticks(range(len(labels)), labels, fontsize=8)
        ax.set_yticks(range(len(names)), names)
        ax.tick_params(length=0)
        ax.grid(False)
        for side in ("left", "bottom"):
            ax.spines[side].set_visible(False)
        ax.set_title("Speed of light: throughput per unit, % of its peak")
        alt = "; ".join(
            f"{lab}: " + ", ".join(f"{u} {_val(v[j]):.0f} %" for u, v in units.items())
            for j, lab in enumerate(labels))
        return finished_chart(fig, "speed-of-light", "Speed of light",
                       "Throughput of each unit as % of its peak, one column per variant (darker: "
                       "busier). Memory is the max over DRAM, L1 and L2"
                       + (f", but {note[0].lower()}{note[1:]}" if note else "."),
                       "Speed-of-light throughput per variant: " + alt)


def duration(labels: list[str], duration_us: list, speedup_vs_first: list,
             parts: list[int], event_us: list | None = None) -> ChartView:
    """Left: duration per variant (log scale); right: speedup over the first variant."""
    with chart_style():
        fig, (ax, bx) = _figure(0.9 + 0.34 * max(len(labels), 2), ncols=2, width_ratios=(3, 2),
                                left_in=_label_margin(labels), bottom_in=0.5, wspace=0.05)
        ys = list(range(len(labels)))[::-1]
        vals = [_val(v) for v in duration_us]
        events = [float(e) if is_value(e) else None for e in (event_us or [None] * len(labels))]
        ax.barh(ys, vals, 0.6, color=[BAR if p <= 1 else BAR_ALT for p in parts])
        if any(e is not None for e in events):
            ax.scatter([e for e in events if e is not None], [y for y, e in zip(ys, events) if e is not None],
                       marker="D", s=14, color="black", zorder=3, label="CUDA events, no profiler")
            ax.legend(loc="lower right", fontsize=7)
        positive = [v for v in vals if v > 0] + [e for e in events if e]
        if positive:
            lo, hi = min(positive) / 2, max(positive) * 8
            ax.set_xlim(lo, hi)
            _log_axis(ax.xaxis, lo, hi, (1,), fmt.duration_us)
        for y, v, p in zip(ys, vals, parts):
            if v > 0:
                ax.text(v * 1.1, y, fmt.duration_us(v) + (f" ({p} kernels)" if p > 1 else ""),
                        va="center", fontsize=8)
        ax.set_yticks(ys, labels)
        ax.set_ylim(-0.6, len(labels) - 0.4)
        ax.set_xlabel("duration under ncu (log scale)")
        ax.set_title("Duration")
        ax.grid(axis="y", visible=False)

        sp = [_val(s) for s in speedup_vs_first]
        bx.barh(ys, sp, 0.6, color=[ACCENT if s >= 1 else MUTED for s in sp])
        posit = [s for s in sp if s > 0]
        if posit:
            lo, hi = min(min(posit), 1) / 1.5, max(max(posit), 1) * 4
            bx.set_xlim(lo, hi)
            _log_axis(bx.xaxis, lo, hi, (1, 2, 5), fmt.ratio)
        bx.axvline(1, color="black", linewidth=0.8)
        for y, s in zip(ys, sp):
            if s > 0:
                bx.text(s * 1.08, y, fmt.ratio(s), va="center", fontsize=8)
        bx.set_yticks(ys, [""] * len(ys))
        bx.set_ylim(-0.6, len(labels) - 0.4)
        bx.set_xlabel(f"speedup over {labels[0]} (log scale)" if labels else "speedup")
        bx.set_title("Speedup")
        bx.grid(axis="y", visible=False)
        alt = "; ".join(f"{lab}: {fmt.duration_us(v)}, {fmt.ratio(s)}" for lab, v, s in zip(labels, vals, sp))
        return finished_chart(fig, "duration", "Duration and speedup",
                       "Duration of each variant under ncu (a split variant: the sum of its kernels) "
                       f"and its speedup over {labels[0] if labels else 'the first'}.",
                       "Duration and speedup per variant: " + alt)


def bandwidth(labels: list[str], achieved_gbs: list, ceiling_tbs: list, datasheet_tbs: list,
              ceiling_label: str) -> ChartView:
    """Achieved DRAM bandwidth per variant against the measured ceiling (and the datasheet)."""
    with chart_style():
        fig, ax = _figure(1.2 + 0.32 * max(len(labels), 2), left_in=_label_margin(labels), bottom_in=0.85)
        ys = list(range(len(labels)))[::-1]
        tbs = [_val(g) / 1e3 for g in achieved_gbs]
        ax.barh(ys, tbs, 0.6, color=BAR)
        ceilings = [float(c) for c in ceiling_tbs if is_value(c)]
        sheets = [float(c) for c in datasheet_tbs if is_value(c)]
        if ceilings and len(set(ceilings)) == 1:
            ax.axvline(ceilings[0], color=ACCENT, linewidth=1.6,
                       label=f"{ceiling_label} {fmt.sig(ceilings[0])} TB/s")
        else:
            for y, c in zip(ys, ceiling_tbs):
                if is_value(c):
                    ax.plot([c, c], [y - 0.4, y + 0.4], color=ACCENT, linewidth=1.6)
        if sheets and len(set(sheets)) == 1 and sheets[0] not in ceilings:
            ax.axvline(sheets[0], color=MUTED, linewidth=1, linestyle="--",
                       label=f"datasheet {fmt.sig(sheets[0])} TB/s")
        right = max([*tbs, *ceilings, *sheets, 0.001]) * 1.25
        ax.set_xlim(0, right)
        for y, t, c in zip(ys, tbs, ceiling_tbs):
            if t > 0:
                share = f" ({fmt.pct(t / float(c) * 100, 0 if t >= 0.1 * float(c) else 1)})" if is_value(c) else ""
                ax.text(t + right * 0.01, y, fmt.bandwidth_gbs(t * 1e3) + share, va="center", fontsize=8)
        ax.set_yticks(ys, labels)
        ax.set_ylim(-0.6, len(labels) - 0.4)
        ax.set_xlabel("achieved DRAM bandwidth, TB/s (read + write)")
        ax.set_title("Achieved bandwidth against the ceiling")
        ax.grid(axis="y", visible=False)
        if ceilings or sheets:
            ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.45 / (0.32 * max(len(labels), 2))),
                      ncols=2, fontsize=8)
        alt = "; ".join(f"{lab}: {fmt.bandwidth_gbs(t * 1e3)}" for lab, t in zip(labels, tbs))
        caption = "DRAM bandwidth each variant achieved under ncu"
        caption += f", against the {ceiling_label}." if ceilings else " (no ceiling known for this GPU)."
        return finished_chart(fig, "bandwidth", "Achieved bandwidth", caption,
                       "Achieved DRAM bandwidth per variant: " + alt)


PIPE_COLOURS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7")


def pipes(labels: list[str], units: dict[str, list]) -> ChartView:
    """Grouped horizontal bars: how busy each pipe (and the issue slots) was per variant,
    % of peak: the chart a compute-bound family gets where a memory-bound one gets DRAM
    bandwidth. ``units``: name -> one value per variant (None: not recorded)."""
    with chart_style():
        names = [n for n, vals in units.items() if any(is_value(v) for v in vals)]
        n = max(len(names), 1)
        fig, ax = _figure(1.3 + 0.22 * n * max(len(labels), 2), left_in=_label_margin(labels),
                          bottom_in=0.85)
        ys = list(range(len(labels)))[::-1]
        height = 0.8 / n
        for j, name in enumerate(names):
            off = 0.4 - height * (j + 0.5)
            vals = [_val(v) if is_value(v) else 0.0 for v in units[name]]
            ax.barh([y + off for y in ys], vals, height * 0.9, color=PIPE_COLOURS[j % len(PIPE_COLOURS)],
                    label=name)
            for y, v, raw in zip(ys, vals, units[name]):
                if is_value(raw):
                    ax.text(v + 1, y + off, f"{v:.0f} %", va="center", fontsize=7)
        ax.set_xlim(0, 112)
        ax.set_yticks(ys, labels)
        ax.set_ylim(-0.6, len(labels) - 0.4)
        ax.set_xlabel("busy, % of peak")
        ax.set_title("Pipe utilisation: what the math units and the issue slots did")
        ax.grid(axis="y", visible=False)
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.45 / (0.22 * n * max(len(labels), 2))),
                  ncols=len(names) or 1, fontsize=8)
        alt = "; ".join(f"{lab}: " + ", ".join(f"{nm} {_val(units[nm][i]):.0f} %" for nm in names
                                               if is_value(units[nm][i]))
                        for i, lab in enumerate(labels))
        return finished_chart(fig, "pipes", "Pipe utilisation",
                       "Busy cycles of the tensor-core and FMA pipes and the share of cycles "
                       "an instruction issued, % of peak: most of these variants are "
                       "compute-bound, so the math pipes, not DRAM, say how close each is to "
                       "its limit.", "Pipe utilisation per variant: " + alt)


def occupancy(labels: list[str], theoretical: list, achieved: list, limiters: list[str]) -> ChartView:
    """Theoretical and achieved occupancy per variant; the limiter under each label."""
    with chart_style():
        fig, ax = _figure(3.4, bottom_in=0.8)
        xs = list(range(len(labels)))
        ax.bar([x - 0.2 for x in xs], [_val(v) for v in theoretical], 0.38, color=BAR_ALT,
               label="theoretical")
        ax.bar([x + 0.2 for x in xs], [_val(v) for v in achieved], 0.38, color=BAR, label="achieved")
        for x, t, a in zip(xs, theoretical, achieved):
            for dx, v in ((-0.2, t), (0.2, a)):
                if is_value(v):
                    ax.text(x + dx, _val(v) + 1.5, f"{_val(v):.0f}", ha="center", fontsize=7)
        ax.set_xticks(xs, [f"{lab}\n{lim}" if lim else lab for lab, lim in zip(labels, limiters)],
                      fontsize=8)
        ax.set_ylim(0, 105)
        ax.set_ylabel("% of max warps per SM")
        ax.set_title("Occupancy and what limits it")
        ax.grid(axis="x", visible=False)
        ax.legend(loc="upper right", fontsize=8, ncols=2)
        alt = "; ".join(f"{lab}: theoretical {_val(t):.0f} %, achieved {_val(a):.0f} %, limited by {lim or 'n/a'}"
                        for lab, t, a, lim in zip(labels, theoretical, achieved, limiters))
        return finished_chart(fig, "occupancy", "Occupancy",
                       "Theoretical occupancy (what the per-SM limits allow) and achieved occupancy; "
                       "under each variant, the limit that binds and the blocks per SM it allows.",
                       "Occupancy per variant: " + alt)


STALL_COLOURS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442")
"""Okabe-Ito, one per named stall reason; "other" is grey."""


def stalls(labels: list[str], reasons: list[str], values: list[list]) -> ChartView:
    """Stacked horizontal bars: each variant's warp stalls in cycles per issued instruction,
    one segment per reason (``values[i][j]``: variant i, reason j)."""
    with chart_style():
        fig, ax = _figure(1.3 + 0.34 * max(len(labels), 2), left_in=_label_margin(labels),
                          bottom_in=0.95)
        ys = list(range(len(labels)))[::-1]
        left = [0.0] * len(labels)
        for j, reason in enumerate(reasons):
            widths = [_val(row[j]) for row in values]
            colour = MUTED if reason == "other" else STALL_COLOURS[j % len(STALL_COLOURS)]
            ax.barh(ys, widths, 0.6, left=left, color=colour, label=reason)
            left = [a + b for a, b in zip(left, widths)]
        right = max(left + [0.1])
        for y, total in zip(ys, left):
            if total > 0:
                ax.text(total + right * 0.01, y, fmt.number(total, 3), va="center", fontsize=8)
        ax.set_xlim(0, right * 1.12)
        ax.set_yticks(ys, labels)
        ax.set_ylim(-0.6, len(labels) - 0.4)
        ax.set_xlabel("warp cycles stalled per issued instruction (cycles/instruction)")
        ax.set_title("Warp stalls: where each issued instruction waits")
        ax.grid(axis="y", visible=False)
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.5 / (0.34 * max(len(labels), 2))),
                  ncols=min(len(reasons), 6), fontsize=8)
        alt = "; ".join(f"{lab}: " + ", ".join(f"{r} {_val(row[j]):.2g}" for j, r in enumerate(reasons))
                        for lab, row in zip(labels, values))
        return finished_chart(fig, "stalls", "Warp stalls",
                       "Cycles a warp spends stalled per issued instruction, by reason (ncu's "
                       "WarpStateStats; issuing itself, 'selected', left out). The top reasons are "
                       "named, the rest summed as other; the number is the total.",
                       "Warp stalls per variant, cycles per issued instruction: " + alt)


LEDGER_COLOURS = {"instructions": "#0072B2", "memory": "#D55E00", "shared": "#CC79A7",
                  "barrier": "#E69F00", "pipes": "#56B4E9", "issue": "#000000",
                  "warps": "#009E73", "idle": "#F0E442", "clock": "#999999",
                  "kernels": "#882255", "unexplained": MUTED}


def ledger(steps: list[tuple[str, float, float, list[tuple[str, str, float]]]]) -> ChartView:
    """Waterfalls, one panel per step: the before duration, each ledger term as a floating
    bar (down: time saved), the after duration. ``steps``: (title, before us, after us,
    [(key, words, us) ...])."""
    from matplotlib.ticker import FuncFormatter

    with chart_style():
        n = max(len(steps), 1)
        ncols = 2 if n > 1 else 1
        nrows = math.ceil(n / ncols)
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        height = 0.6 + 2.1 * nrows
        fig = Figure(figsize=(WIDTH_IN, height), dpi=DPI)
        FigureCanvasAgg(fig)
        axes = fig.subplots(nrows, ncols, squeeze=False)
        fig.subplots_adjust(left=0.09, right=0.98, top=1 - 0.8 / height, bottom=0.55 / height,
                            hspace=0.75, wspace=0.25)
        for ax in axes.flat[len(steps):]:
            ax.set_visible(False)
        alts = []
        for ax, (title, before, after, rows) in zip(axes.flat, steps):
            names = ["before"] + [k for k, _, _ in rows] + ["after"]
            level = before
            for i, (key, _, us) in enumerate(rows, start=1):
                ax.bar(i, us, 0.6, bottom=level, color=LEDGER_COLOURS.get(key, MUTED))
                sign = "+" if us > 0 else "-" if us < 0 else ""
                ax.text(i, max(level, level + us), sign + fmt.duration_us(abs(us)),
                        ha="center", va="bottom", fontsize=6, rotation=90 if len(rows) > 4 else 0)
                level += us
            ax.bar(0, before, 0.6, color=BAR_ALT)
            ax.bar(len(rows) + 1, after, 0.6, color=BAR)
            top = max([before, after] + [before + sum(r[2] for r in rows[:j]) for j in range(len(rows) + 1)])
            ax.set_ylim(0, top * (1.35 if len(rows) > 4 else 1.18))
            crowded = len(names) > 5  # slanted, so that "instructions" and "memory" never touch
            ax.set_xticks(range(len(names)), names, fontsize=7, rotation=30 if crowded else 0,
                          ha="right" if crowded else "center", rotation_mode="anchor")
            ax.axhline(0, color="black", linewidth=0.6)
            ax.set_title(title, fontsize=9)
            # the axis in the unit its bars' labels use (ms ticks for a ms step, not us)
            ax.yaxis.set_major_formatter(FuncFormatter(
                lambda v, _pos: fmt.duration_us(v) if v else "0"))
            ax.tick_params(axis="y", labelsize=7)
            ax.grid(axis="x", visible=False)
            alts.append(f"{title}: {fmt.duration_us(before)} to {fmt.duration_us(after)}, "
                        + ", ".join(f"{words} {us:+.4g} us" for _, words, us in rows))
        fig.suptitle("Time ledger: each step's duration change, term by term", fontsize=10,
                     fontweight="bold")
        return finished_chart(fig, "ledger", "Time ledger",
                       "Each step's change of ncu duration split by the warp-time identity "
                       "(active cycles x warps in flight = instructions x cycles per instruction, "
                       "the cycles split by stall reason): instructions, memory, shared-memory and "
                       "barrier waits, dependencies and pipes, issue, warps in flight, idle "
                       "schedulers, clock, kernels new or gone. The terms add up to the change; "
                       "terms under 1 % of the time are left out of the chart.",
                       "Time ledger per step: " + "; ".join(alts))


VARIANT_COLOURS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#D55E00", "#56B4E9", "#882255")
"""One colour a variant, in variant order (the roofline, the sweep's lines): Okabe-Ito,
safe for colour-blind readers, ordered so that neighbours differ in hue and lightness
(dark blue, orange, green, pink, vermillion, sky blue; wine for its black, which marks the
levels; its yellow left out: too faint on white). Then they repeat, the marker differing."""
VARIANT_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
"""One marker a variant, beside its colour (7 colours and 8 markers: the first 56 variants
each have a pair of their own)."""


def variant_style(i: int) -> tuple[str, str]:
    """The colour and marker of the ``i``-th variant of a chart."""
    return VARIANT_COLOURS[i % len(VARIANT_COLOURS)], VARIANT_MARKERS[i % len(VARIANT_MARKERS)]


ROOF_STYLES = {"dram": "-", "l2": "--", "l1": ":", "fp32": "-", "tensor": "-.", "fp64": "--"}
"""Line style per roof: the roofs are dark grey, so that colour always means a variant."""
ROOF_COLOUR = "#444444"
LEVEL_FILLS = {"dram": "full", "l2": "left", "l1": "bottom", "work": "none"}
"""How a roofline point shows its level (the marker is the variant's): filled (DRAM), the
left half (L2), the bottom half (L1/shared), hollow (the work model)."""
ROOFLINE_REACH = 100.0
"""The roofline's axis reaches this many times the highest ridge point; points beyond sit
at its edge and the caption names them."""


def roofline(labels: list[str], roofs: list[tuple[str, str, str, float, str]],
             points: list[tuple[str, str, float, float]], level_names: dict[str, str]) -> ChartView:
    """The hierarchical roofline, log-log: each memory roof a diagonal (bytes/s x FLOP/byte)
    up to the highest compute roof, each compute roof a horizontal line from its ridge with
    the lowest memory roof; each variant's points (one colour a variant, one marker a level).

    ``roofs``: (key, name, kind ``memory``/``compute``, rate, source); ``points``: (variant
    label, level key, FLOP/byte, FLOP/s); ``level_names``: level key -> legend name.
    """
    from matplotlib.lines import Line2D

    with chart_style():
        fig, ax = _figure(5.6, left_in=1.4, bottom_in=1.45, top_in=0.35, right_in=0.25)
        memory = [r for r in roofs if r[2] == "memory"]
        compute = [r for r in roofs if r[2] == "compute"]
        top = max((r[3] for r in compute), default=None)
        low_bw = min((r[3] for r in memory), default=None)
        ridges = [c[3] / m[3] for m in memory for c in compute]
        # A point far right of every ridge comes from bytes the counters did not see (a
        # tensor-core kernel's L1 at 10^6 FLOP/byte): it sits at the axis' edge, named in
        # the caption, instead of stretching the axis over decades nothing else uses.
        cap = max(ridges) * ROOFLINE_REACH if ridges else None
        off = [p for p in points if cap and p[2] and p[2] > cap]
        points = [(lab, lv, min(x, cap) if (cap and x) else x, y) for lab, lv, x, y in points]
        xs = [p[2] for p in points if p[2] and p[2] > 0]
        ys = [p[3] for p in points if p[3] and p[3] > 0]
        x_lo = min(xs + ridges + [1.0]) / 4
        x_hi = max(xs + ridges + [1.0]) * (1.6 if off else 4)
        y_hi = max(ys + [r[3] for r in compute] + [1.0]) * 2.5
        y_lo = min(ys) / 3 if ys else y_hi / 1e4
        ax.set_xlim(x_lo, x_hi)
        ax.set_ylim(y_lo, y_hi)
        _log_axis(ax.xaxis, x_lo, x_hi, (1, 10), lambda v: fmt.sig(v, 2))
        _log_axis(ax.yaxis, y_lo, y_hi, (1,), lambda v: fmt.flop_rate(v / 1e12))
        ax.grid(True, which="major")

        def angle(x0, y0, x1, y1):
            (a, b), (c, d) = ax.transData.transform([(x0, y0), (x1, y1)])
            return math.degrees(math.atan2(d - b, c - a))

        for key, name, _, rate, source in memory:
            end = min(x_hi, top / rate) if top else x_hi
            colour = ROOF_COLOUR
            ax.plot([x_lo, end], [rate * x_lo, rate * end], color=colour, linewidth=1.4,
                    linestyle=ROOF_STYLES.get(key, "-"))
            x_text = end / 1.6  # the label ends near the ridge, above the points
            ax.text(x_text, rate * x_text * 1.15, f"{name} {fmt.bandwidth_gbs(rate / 1e9)} ({source})",
                    color=colour, fontsize=7, rotation=angle(x_lo, rate * x_lo, end, rate * end),
                    rotation_mode="anchor", ha="right", va="bottom")
        for key, name, _, rate, source in compute:
            start = rate / low_bw if low_bw else x_lo
            colour = ROOF_COLOUR
            ax.plot([max(start, x_lo), x_hi], [rate, rate], color=colour, linewidth=1.4,
                    linestyle=ROOF_STYLES.get(key, "-"))
            ax.text(x_hi / 1.1, rate * 1.08, f"{name} {fmt.flop_rate(rate / 1e12)} ({source})",
                    color=colour, fontsize=7, ha="right", va="bottom")
        styles = {lab: variant_style(i) for i, lab in enumerate(labels)}
        colours = {lab: style[0] for lab, style in styles.items()}
        for lab in labels:
            mine = [p for p in points if p[0] == lab and p[2] and p[3]]
            measured = sorted((p for p in mine if p[1] != "work"), key=lambda p: p[2])
            if len(measured) > 1:
                ax.plot([p[2] for p in measured], [p[3] for p in measured], color=colours[lab],
                        linewidth=0.8, alpha=0.6)
            for _, level, x, y in mine:
                clipped = any(o[0] == lab and o[1] == level for o in off)
                ax.plot([x], [y], linestyle="", marker=">" if clipped else styles[lab][1],
                        markersize=6.5, zorder=3, color=colours[lab], markeredgewidth=1.2,
                        fillstyle=LEVEL_FILLS.get(level, "full"), markerfacecoloralt="white")
        ax.set_xlabel("arithmetic intensity, FLOP/byte (log scale)")
        ax.set_ylabel("achieved FLOP/s (log scale)")
        ax.set_title("Roofline: each variant at each memory level")
        handles = [Line2D([], [], color=colours[lab], marker=styles[lab][1], linestyle="",
                          label=lab) for lab in labels]
        used = [lv for lv in level_names if any(p[1] == lv for p in points)]
        handles += [Line2D([], [], color="black", marker="o", linestyle="", markersize=6.5,
                           fillstyle=LEVEL_FILLS.get(lv, "full"), markerfacecoloralt="white",
                           label=level_names[lv]) for lv in used]
        ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.13),
                  ncols=min(len(handles), 6), fontsize=8)
        real_x = {(o[0], o[1]): o[2] for o in off}
        alt = "; ".join(
            f"{lab}: " + ", ".join(f"{level_names.get(lv, lv)} {fmt.sig(real_x.get((lb, lv), x), 3)} "
                                   f"FLOP/byte at {fmt.flop_rate(y / 1e12)}"
                                   for lb, lv, x, y in points if lb == lab)
            for lab in labels)
        off_text = ("; at the right edge (>), beyond the axis: " + ", ".join(
            f"{lab} {level_names.get(lv, lv)} at {fmt.sig(x, 3)} FLOP/byte" for lab, lv, x, _ in off)
            + " (bytes that level's counters did not see)") if off else ""
        roofs_alt = ", ".join(f"{name} {fmt.bandwidth_gbs(rate / 1e9) if kind == 'memory' else fmt.flop_rate(rate / 1e12)} ({source})"
                              for _, name, kind, rate, source in roofs)
        return finished_chart(fig, "roofline", "Roofline",
                       "Each variant's executed FLOPs over the bytes each memory level moved "
                       "(a colour and a marker a variant; filled: DRAM, left half: L2, bottom "
                       "half: L1/shared memory) and the work model's FLOPs over its bytes "
                       "(hollow), at the FLOP rate achieved; the roofs are labelled measured, "
                       "datasheet or ncu peak (the report's peak at the kernel's clock)"
                       + off_text + ".",
                       f"Roofline. Roofs: {roofs_alt}. Points: {alt}")
