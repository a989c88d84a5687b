"""The sweep report's charts: a metric against one swept axis, one line per variant.

Written as SVG text here, not drawn by matplotlib: four panels of lines are simple enough
to lay out by hand, and matplotlib took 0.3-0.4 s of CPU a chart (its ticks and text),
most of a sweep report's time past loading the runs; this takes a few milliseconds. The
layout is matplotlib's (the 8 x 5.4 inch figure at ``DPI``, its margins, font sizes, tick
lengths, the 2 x 2 grid, the legend on top), the colours and markers the other charts'
(``variant_style``). Each variant's points on a panel are one ``<polyline>`` whose
vertices carry the variant's ``<marker>``; every text is a ``<text>`` (drawn in the
reader's sans-serif font). The chart is an ``<img>`` of a ``data:`` URI, as
the other charts are: the HTML stays one offline file under its CSP.
"""

from __future__ import annotations

import base64
import math
from dataclasses import dataclass, field
from html import escape

from paprof.render.charts import DPI, MUTED, WIDTH_IN, is_value, label_text, variant_style
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
its 7-point labels side by side (50 overlap into a smear). Every value keeps its marker;
the alt text names them all."""


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


# -- the layout, in pixels of the figure at DPI (a point is DPI / 72 pixels) -------------

PT = DPI / 72
HEIGHT_IN = 5.4
WIDTH, HEIGHT = round(WIDTH_IN * DPI), round(HEIGHT_IN * DPI)
LEFT, RIGHT, TOP, BOTTOM, WSPACE, HSPACE = 0.08, 0.98, 0.88, 0.1, 0.22, 0.42
"""The panels' margins and gaps, as matplotlib's ``subplots_adjust`` took them."""
FONT = "DejaVu Sans, Verdana, Arial, Helvetica, sans-serif"
"""matplotlib's font first (the one the other charts are drawn in), then the wide
sans-serif fonts a browser has."""
EM = {"normal": 0.64, "bold": 0.72}
"""A character's width at most, in ems (DejaVu Sans' digits are 0.636 em): the layout
keeps labels apart by it, so that a browser's wider font still fits."""
LINE = 1.15
"""A line of text's height, in ems."""
TICK, PAD = 3.5 * PT, 3.5 * PT
TICK_SIZE = 7 * PT
"""The x axis' labels' size (7 points)."""
GRID = "#dddddd"
MARGIN = 0.05
"""The share of the data's range left free at each end of an axis (matplotlib's)."""


def text_width(text: str, size: float, weight: str = "normal") -> float:
    """The widest ``text`` is drawn at ``size`` pixels."""
    return len(text) * size * EM[weight]


@dataclass
class Svg:
    """An SVG being written: its elements, and the box each text covers (four corners,
    pixels, y down), for the layout's tests."""

    parts: list[str] = field(default_factory=list)
    boxes: list[tuple[str, list[tuple[float, float]]]] = field(default_factory=list)
    height: float = HEIGHT
    """Pixels: ``HEIGHT``, more where the x axis' labels need it (``draw``)."""

    def add(self, element: str) -> None:
        self.parts.append(element)

    def text(self, x: float, y: float, text: str, size: float, *, anchor: str = "middle",
             weight: str = "normal", colour: str = "#000000", angle: float = 0.0,
             role: str = "") -> None:
        """``text`` centred on (``x``, ``y``) vertically; ``anchor``: which end of it is
        at ``x`` (``start``, ``middle``, ``end``); ``angle``: degrees anticlockwise
        about that point; ``role``: its class (``xtick``, ``ytick``, ``title`` ...)."""
        extra = f' class="{role}"' if role else ""
        extra += f' font-weight="{weight}"' if weight != "normal" else ""
        extra += f' fill="{colour}"' if colour != "#000000" else ""
        extra += f' transform="rotate({-angle:g} {x:.1f} {y:.1f})"' if angle else ""
        self.add(f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size:g}" text-anchor="{anchor}" '
                 f'dominant-baseline="central"{extra}>{escape(text)}</text>')
        w, h = text_width(text, size, weight), size * LINE
        x0 = {"start": 0.0, "middle": -w / 2, "end": -w}[anchor]
        a = math.radians(angle)
        self.boxes.append((text, [(x + dx * math.cos(a) + dy * math.sin(a),
                                   y - dx * math.sin(a) + dy * math.cos(a))
                                  for dx, dy in ((x0, -h / 2), (x0 + w, -h / 2), (x0 + w, h / 2),
                                                 (x0, h / 2))]))

    def line(self, x0: float, y0: float, x1: float, y1: float, colour: str, width: float) -> None:
        self.add(f'<line x1="{x0:.1f}" y1="{y0:.1f}" x2="{x1:.1f}" y2="{y1:.1f}" '
                 f'stroke="{colour}" stroke-width="{width:g}"/>')

    def document(self) -> str:
        h = round(self.height)
        return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{h}" '
                f'viewBox="0 0 {WIDTH} {h}" font-family="{FONT}">'
                f'<rect width="{WIDTH}" height="{h}" fill="#ffffff"/>'
                + "".join(self.parts) + "</svg>")


MARKERS = {
    "o": '<circle r="4"/>',
    "s": '<rect x="-4" y="-4" width="8" height="8"/>',
    "^": '<path d="M0,-4L4,4L-4,4Z"/>',
    "v": '<path d="M0,4L4,-4L-4,-4Z"/>',
    "D": '<path d="M0,-4.5L3.4,0L0,4.5L-3.4,0Z"/>',
    "P": '<path d="M-1.4,-4.2H1.4V-1.4H4.2V1.4H1.4V4.2H-1.4V1.4H-4.2V-1.4H-1.4Z"/>',
    "X": '<path d="M-4,-2L-2,-4L0,-2L2,-4L4,-2L2,0L4,2L2,4L0,2L-2,4L-4,2L-2,0Z"/>',
    "*": '<path d="M0,-4.5L1.1,-1.4L4.3,-1.4L1.7,0.5L2.6,3.6L0,1.8L-2.6,3.6L-1.7,0.5L-4.3,-1.4L-1.1,-1.4Z"/>',
}
"""``VARIANT_MARKERS``' shapes about (0, 0), in pixels: matplotlib's at ``markersize=4``
(4 points across) with their 1-point edge."""


def _marker(index: int) -> tuple[str, str]:
    """The ``<marker>`` of the ``index``-th variant, and its colour."""
    colour, shape = variant_style(index)
    return (f'<marker id="m{index}" markerUnits="userSpaceOnUse" markerWidth="12" '
            f'markerHeight="12" viewBox="-6 -6 12 12" refX="0" refY="0" overflow="visible">'
            f'<g fill="{colour}" stroke="{colour}" stroke-width="{PT:g}">{MARKERS[shape]}</g>'
            f'</marker>'), colour


def _polyline(svg: Svg, points: list[tuple[float, float]], index: int, colour: str,
              variant: str | None = None) -> None:
    """``points`` joined, the variant's marker on each (one point: drawn twice, so that
    the marker shows); without ``variant`` (the legend's handle), on the middle ones only."""
    if len(points) == 1:
        points = points * 2
    coords = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
    ends = (f' marker-start="url(#m{index})" marker-end="url(#m{index})" data-variant="{escape(variant)}"'
            if variant is not None else "")
    svg.add(f'<polyline points="{coords}" fill="none" stroke="{colour}" stroke-width="{1.4 * PT:g}" '
            f'stroke-linejoin="round" marker-mid="url(#m{index})"{ends}/>')


def nice_ticks(lo: float, hi: float, most: int = 6) -> tuple[list[float], int]:
    """Ticks of a linear axis over [``lo``, ``hi``] at the smallest step of 1, 2, 2.5 or 5
    times a power of ten that makes at most ``most`` intervals (matplotlib's
    ``MaxNLocator``), and the decimals their labels need."""
    raw = (hi - lo) / most
    power = 10.0 ** math.floor(math.log10(raw))
    step, mantissa = next((m * power, m) for m in (1, 2, 2.5, 5, 10) if m * power >= raw * (1 - 1e-9))
    first = math.ceil(lo / step - 1e-9)
    ticks = [(first + i) * step for i in range(int(math.floor(hi / step + 1e-9)) - first + 1)]
    decimals = max(0, -math.floor(math.log10(step) + 1e-9)) + (1 if mantissa == 2.5 and step < 10 else 0)
    return ticks, decimals


def log_ticks(lo: float, hi: float) -> list[float]:
    """Ticks of a log axis over [``lo``, ``hi``]: the powers of ten, with 2 and 5 times
    them where fewer than two powers fall inside."""
    first, last = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    ticks = [10.0 ** e for e in range(first, last + 1) if lo <= 10.0 ** e <= hi]
    if len(ticks) < 2:
        ticks = [m * 10.0 ** e for e in range(first, last + 1) for m in (1, 2, 5)
                 if lo <= m * 10.0 ** e <= hi]
    return ticks


def _log_label(value: float) -> str:
    return f"{value:g}" if 1e-4 <= value < 1e6 else f"{value:.0e}"


class _Scale:
    """Data to pixels along one axis: [``lo``, ``hi``] (their logs, ``log``) onto
    [``a``, ``b``]."""

    def __init__(self, lo: float, hi: float, a: float, b: float, log: bool):
        self.log = log
        self.lo, self.hi = (math.log10(lo), math.log10(hi)) if log else (lo, hi)
        if self.hi <= self.lo:
            self.lo, self.hi = self.lo - 1, self.hi + 1
        self.a, self.b = a, b

    def __call__(self, v: float) -> float:
        v = math.log10(v) if self.log else v
        return self.a + (v - self.lo) / (self.hi - self.lo) * (self.b - self.a)


def _widened(lo: float, hi: float, log: bool) -> tuple[float, float]:
    """[``lo``, ``hi``] with ``MARGIN`` of its range (of its log range, ``log``) free at
    each end."""
    if log:
        a, b = math.log10(lo), math.log10(hi)
        d = (b - a) * MARGIN or 0.5
        return 10.0 ** (a - d), 10.0 ** (b + d)
    d = (hi - lo) * MARGIN or 0.5
    return lo - d, hi + d


def _panel(svg: Svg, box: tuple[float, float, float, float], title: str, xlabel: str,
           positions: list[float], log_x: bool, ticks: list[float], names: list[str],
           lines: list[tuple[int, str, str, list[tuple[float, float]]]], may_log: bool) -> None:
    """One panel in ``box`` (x0, y0, x1, y1 pixels, y down): ``lines`` (variant index,
    name, colour, points)."""
    x0, y0, x1, y1 = box
    drawn = [v for *_, pts in lines for _, v in pts]
    log_y = may_log and spans(drawn, 10)
    if log_y:
        lines = [(i, n, c, [(x, v) for x, v in pts if v > 0]) for i, n, c, pts in lines]
        pos = [v for *_, pts in lines for _, v in pts]
        lo, hi = _widened(min(pos), max(pos), True)
        yticks = log_ticks(lo, hi)
        ylabels = [_log_label(t) for t in yticks]
    else:
        lo = min([0.0] + drawn)
        hi = max(drawn) * 1.12 if drawn and max(drawn) > 0 else 1.0
        yticks, decimals = nice_ticks(lo, hi)
        plain = 1e-4 <= max(abs(lo), abs(hi)) < 1e6  # else 1e+200, not 201 digits
        ylabels = [f"{t:.{decimals}f}" if plain else f"{t:.3g}" for t in yticks]
    sy = _Scale(lo, hi, y1, y0, log_y)
    xlo, xhi = _widened(min(positions), max(positions), log_x)
    sx = _Scale(xlo, xhi, x0, x1, log_x)
    grid_w = 0.6 * PT
    for t in ticks:
        svg.line(sx(t), y0, sx(t), y1, GRID, grid_w)
    for t in yticks:
        svg.line(x0, sy(t), x1, sy(t), GRID, grid_w)
    for i, name, colour, pts in lines:
        if pts:
            _polyline(svg, [(sx(x), sy(v)) for x, v in pts], i, colour, name)
    spine = 0.8 * PT
    svg.line(x0, y1, x1, y1, "#000000", spine)
    svg.line(x0, y0, x0, y1, "#000000", spine)
    size_y = 9 * PT
    angle = _angle(names)
    for t, name in zip(ticks, names):
        x = sx(t)
        svg.line(x, y1, x, y1 + TICK, "#000000", spine)
        svg.text(x, y1 + TICK + PAD + _tall(name, angle) / 2, name, TICK_SIZE, angle=angle, role="xtick")
    tall = max((_tall(name, angle) for name in names), default=0.0)
    for t, name in zip(yticks, ylabels):
        svg.line(x0 - TICK, sy(t), x0, sy(t), "#000000", spine)
        svg.text(x0 - TICK - PAD, sy(t), name, size_y, anchor="end", role="ytick")
    size = 8 * PT  # the label's top 4 points below the tick labels, the title's bottom 6 above the panel
    svg.text((x0 + x1) / 2, y1 + TICK + PAD + tall + 4 * PT + LINE * size / 2, xlabel, size, role="xlabel")
    svg.text((x0 + x1) / 2, y0 - 6 * PT - LINE * 9 * PT / 2, title, 9 * PT, weight="bold", role="title")
    if not drawn:
        svg.text((x0 + x1) / 2, (y0 + y1) / 2, "not recorded", 9 * PT, colour=MUTED)


LEGEND_COLUMNS = 6


def _angle(names: list[str]) -> float:
    """The x axis' labels' slant: 30 degrees from seven labels on (as they were)."""
    return 30.0 if len(names) > 6 else 0.0


def _tall(name: str, angle: float) -> float:
    """The height of the box an x tick label covers, slanted by ``angle`` degrees."""
    a = math.radians(angle)
    return text_width(name, TICK_SIZE) * math.sin(a) + LINE * TICK_SIZE * math.cos(a)


ROOM = _tall("0000", 30.0)
"""The x axis' labels' height the layout leaves room for (four slanted digits); taller
ones lengthen the figure by the difference, under each row of panels."""


LEGEND_SIZE = 8 * PT
HANDLE, HANDLE_GAP, COLUMN_GAP = 2.0 * LEGEND_SIZE, 0.8 * LEGEND_SIZE, 2.0 * LEGEND_SIZE
"""The legend's line through the marker, the space before its name and between columns."""
LEGEND_ROWS = 2
"""Rows of legend the layout leaves room for above the panels; more lower them."""


def _legend_columns(entries: list) -> tuple[list[list], list[float]]:
    """``entries`` in columns filled top to bottom (as matplotlib's), at most
    ``LEGEND_COLUMNS``, fewer where their names would not fit the width, and each
    column's width."""
    ncols = min(len(entries), LEGEND_COLUMNS)
    while True:
        rows, longer = divmod(len(entries), ncols)
        columns, start = [], 0
        for c in range(ncols):
            count = rows + (1 if c < longer else 0)
            columns.append(entries[start:start + count])
            start += count
        widths = [HANDLE + HANDLE_GAP + max(text_width(e[1], LEGEND_SIZE) for e in col) for col in columns]
        if ncols == 1 or sum(widths) + COLUMN_GAP * (ncols - 1) <= WIDTH:
            return columns, widths
        ncols -= 1


def _legend(svg: Svg, columns: list[list], widths: list[float]) -> None:
    """The variants' handles (a line through the marker) and names, centred on top."""
    x = (WIDTH - sum(widths) - COLUMN_GAP * (len(columns) - 1)) / 2
    for col, w in zip(columns, widths):
        for r, (i, name, colour) in enumerate(col):
            y = 1.25 * LEGEND_SIZE + 1.5 * LEGEND_SIZE * r
            _polyline(svg, [(x, y), (x + HANDLE / 2, y), (x + HANDLE, y)], i, colour)
            svg.text(x + HANDLE + HANDLE_GAP, y, name, LEGEND_SIZE, anchor="start", role="legend")
        x += w + COLUMN_GAP


def draw(axis: str, xs: list, labels: list[str], series: dict[str, dict[str, list]],
         log_x: bool) -> Svg:
    """The four panels of ``scaling`` as an ``Svg`` (a log x axis only where every value
    is above zero: else the values side by side, as a text axis is)."""
    log_x = log_x and all(float(x) > 0 for x in xs)
    positions = list(range(len(xs))) if not log_x else [float(x) for x in xs]
    shown = labelled(positions, log_x)
    ticks, names = [positions[i] for i in shown], [label_text(labels[i]) for i in shown]
    svg = Svg()
    styles = [_marker(i) for i in range(len(series))]
    svg.add("<defs>" + "".join(m for m, _ in styles) + "</defs>")
    legend = [(i, label_text(variant), styles[i][1]) for i, (variant, values) in enumerate(series.items())
              if any(is_value(v) for v in values.get(PANELS[0][0], []))]  # the first panel's lines
    columns, widths = _legend_columns(legend) if legend else ([], [])
    width = (RIGHT - LEFT) * WIDTH / (2 + WSPACE)
    height = (TOP - BOTTOM) * HEIGHT / (2 + HSPACE)
    extra = max(0.0, max((_tall(n, _angle(names)) for n in names), default=0.0) - ROOM)
    above = max(0, max(map(len, columns), default=0) - LEGEND_ROWS) * 1.5 * LEGEND_SIZE
    svg.height = HEIGHT + 2 * extra + above
    xlabel = label_text(axis) + (" (log scale)" if log_x else "")
    for p, (key, title, may_log) in enumerate(PANELS):
        left = LEFT * WIDTH + (p % 2) * width * (1 + WSPACE)
        top = (1 - TOP) * HEIGHT + above + (p // 2) * (height * (1 + HSPACE) + extra)
        lines = [(i, label_text(variant), styles[i][1],
                  [(x, float(v)) for x, v in zip(positions, values.get(key, [])) if is_value(v)])
                 for i, (variant, values) in enumerate(series.items())]
        svg.add(f'<g data-panel="{key}">')
        _panel(svg, (left, top, left + width, top + height), title, xlabel, positions, log_x,
               ticks, names, lines, may_log)
        svg.add("</g>")
    _legend(svg, columns, widths)
    return svg


def scaling(chart_id: str, axis: str, xs: list, labels: list[str], series: dict[str, dict[str, list]],
            where: str, log_x: bool) -> ChartView:
    """Four panels (time, TB/s, TFLOP/s, % of ceiling) against ``xs``; ``series``:
    variant -> panel key -> values (None where not measured). Ticks: ``labelled``."""
    svg = draw(axis, xs, labels, series, log_x)
    alt = "; ".join(
        f"{variant}: " + ", ".join(
            f"{axis} {lab} {fmt_us(vals.get('time_us', [None] * len(xs))[j])}"
            for j, lab in enumerate(labels))
        for variant, vals in series.items())
    title = f"Scaling with {axis}" + (f" {where}" if where else "")
    caption = (f"Time per step, throughput from the family's work model and the share of the "
               f"measured read ceiling against {axis}{' ' + where if where else ''}; one line per variant.")
    data = base64.b64encode(svg.document().encode("utf-8")).decode("ascii")
    return ChartView(chart_id, title, caption, f"{title}: {alt}", f"data:image/svg+xml;base64,{data}",
                     WIDTH, round(svg.height))


def fmt_us(value) -> str:
    return fmt.duration_us(value) if is_value(value) and not math.isinf(float(value)) else "n/a"
