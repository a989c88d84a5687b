"""The charts' labels stay legible (issue 39): every chart of the shipped runs' reports
(the comparison of all eight paged_decode variants, the source preset's roofline,
flash_fwd's compute charts, rendered with Agg; both sweeps' scaling charts, written as
SVG, their texts at the widest a font draws them): no two drawn texts overlap (rotated
ones as the rotated rectangles they are), none runs off the figure, and no two variants
of one chart share both their colour and their marker."""

from __future__ import annotations

import itertools
import math

import pytest

from paprof.render import charts, sweep_charts

from helpers import recorded

SLACK = 1.0
"""Pixels two texts may share (anti-aliasing) before they overlap."""


def _drawn(fig) -> list:
    """The texts Agg draws: titles, axis labels, the tick labels inside the view (a
    tick's label outside it is kept but not drawn), the texts put on axes and figure, the
    legends'."""
    texts = [*fig.texts, *(t for legend in fig.legends for t in legend.get_texts())]
    if fig._suptitle is not None:
        texts.append(fig._suptitle)
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        for axis in (ax.xaxis, ax.yaxis):
            texts += [label for tick in axis._update_ticks() for label in (tick.label1, tick.label2)]
            texts.append(axis.label)
        texts += [ax.title, ax._left_title, ax._right_title, *ax.texts]
        if ax.get_legend() is not None:
            texts += ax.get_legend().get_texts()
    unique = {id(t): t for t in texts}
    return [t for t in unique.values() if t.get_visible() and t.get_text().strip()]


def _corners(text, renderer) -> list[tuple[float, float]]:
    """The rectangle ``text`` covers, in pixels: its window extent, or for a slanted
    single line the rotated rectangle of its width and height about the extent's centre
    (the extent of a slanted text is far larger than the text)."""
    box = text.get_window_extent(renderer)
    angle = text.get_rotation() % 180
    if angle % 90 == 0 or "\n" in text.get_text():
        return [(box.x0, box.y0), (box.x1, box.y0), (box.x1, box.y1), (box.x0, box.y1)]
    w, h, _ = renderer.get_text_width_height_descent(text.get_text(), text.get_fontproperties(),
                                                     ismath=False)
    cx, cy, a = (box.x0 + box.x1) / 2, (box.y0 + box.y1) / 2, math.radians(angle)
    ux, uy = math.cos(a) * w / 2, math.sin(a) * w / 2
    vx, vy = -math.sin(a) * h / 2, math.cos(a) * h / 2
    return [(cx - ux - vx, cy - uy - vy), (cx + ux - vx, cy + uy - vy),
            (cx + ux + vx, cy + uy + vy), (cx - ux + vx, cy - uy + vy)]


def _overlap(p, q) -> bool:
    """Whether two convex polygons share more than ``SLACK`` (separating axes)."""
    for poly in (p, q):
        for (x0, y0), (x1, y1) in zip(poly, poly[1:] + poly[:1]):
            nx, ny = y0 - y1, x1 - x0
            norm = math.hypot(nx, ny) or 1.0
            on_p = [(x * nx + y * ny) / norm for x, y in p]
            on_q = [(x * nx + y * ny) / norm for x, y in q]
            if min(max(on_p), max(on_q)) - max(min(on_p), min(on_q)) <= SLACK:
                return False
    return True


def _variant_styles(fig) -> dict[str, tuple]:
    """Each variant's (colour, marker) in the chart's legend (the roofline's level
    entries, drawn in black, left out)."""
    from matplotlib.colors import to_hex
    from matplotlib.lines import Line2D

    legends = [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend())]
    return {text.get_text(): (to_hex(handle.get_color()), handle.get_marker())
            for legend in legends for handle, text in zip(legend.legend_handles, legend.get_texts())
            if isinstance(handle, Line2D) and handle.get_marker() not in (None, "", "None")
            and to_hex(handle.get_color()) != "#000000"}


@pytest.fixture
def drawn_charts(monkeypatch):
    """Each chart made while the test runs: (id, what is wrong with it)."""
    found = []
    finish = charts.finished_chart

    def check(fig, chart_id, *args):
        clear = fig.clear

        def inspected(*a, **kw):  # finished_chart clears the figure once saved (drawn): look first
            look(fig, chart_id)
            return clear(*a, **kw)

        fig.clear = inspected
        return finish(fig, chart_id, *args)

    def look(fig, chart_id):
        renderer = fig.canvas.get_renderer()
        width, height = fig.canvas.get_width_height()
        texts = [(t, _corners(t, renderer)) for t in _drawn(fig)]
        wrong = [f"{a.get_text()!r} overlaps {b.get_text()!r}"
                 for (a, pa), (b, pb) in itertools.combinations(texts, 2) if _overlap(pa, pb)]
        for t, corners in texts:
            xs, ys = [c[0] for c in corners], [c[1] for c in corners]
            if min(xs) < -SLACK or min(ys) < -SLACK or max(xs) > width + SLACK or max(ys) > height + SLACK:
                wrong.append(f"{t.get_text()!r} runs off the figure")
        styles = _variant_styles(fig)
        if len(set(styles.values())) < len(styles):
            wrong.append(f"variants share colour and marker: {styles}")
        found.append((chart_id, wrong, styles))

    monkeypatch.setattr(charts, "finished_chart", check)
    return found


@pytest.fixture
def sweep_svgs(monkeypatch):
    """Each sweep chart written while the test runs: (what is wrong with it, its variants'
    styles)."""
    found = []
    draw = sweep_charts.draw

    def check(axis, xs, labels, series, log_x):
        svg = draw(axis, xs, labels, series, log_x)
        texts = [(text, corners) for text, corners in svg.boxes]
        wrong = [f"{a!r} overlaps {b!r}" for (a, pa), (b, pb) in itertools.combinations(texts, 2)
                 if _overlap(pa, pb)]
        wrong += [f"{t!r} runs off the figure" for t, corners in texts
                  if min(x for x, _ in corners) < 0 or min(y for _, y in corners) < 0
                  or max(x for x, _ in corners) > sweep_charts.WIDTH
                  or max(y for _, y in corners) > svg.height]
        styles = {name: charts.variant_style(i) for i, name in enumerate(series)}
        if len(set(styles.values())) < len(styles):
            wrong.append(f"variants share colour and marker: {styles}")
        found.append((wrong, styles))
        return svg

    monkeypatch.setattr(sweep_charts, "draw", check)
    return found


def _report(runs, variants, tmp_path, **kw):
    from paprof.api import write_report

    write_report(variants, runs=runs, out=tmp_path / "r.html", **kw)


CASES = {
    "eight paged_decode variants": lambda tmp: _report(
        recorded("h200"), ["baseline", "handbook", "v1", "v2", "v3", "v4", "v5", "v6"], tmp),
    "the source preset's roofline": lambda tmp: _report(
        recorded("h200-source"), ["v2", "v3", "v4", "v5"], tmp),
    "flash_fwd's compute charts": lambda tmp: _report(
        recorded("h200-flash_fwd"), ["handbook", "mma", "sdpa_cudnn", "wgmma2"], tmp, cross=True),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_comparison_charts_have_no_overlapping_labels(drawn_charts, tmp_path, case):
    CASES[case](tmp_path)
    made = {chart_id for chart_id, _, _ in drawn_charts}
    assert {"speed-of-light", "duration", "occupancy", "stalls", "ledger"} <= made
    assert made & {"bandwidth", "pipes"}
    assert [(chart_id, wrong) for chart_id, wrong, _ in drawn_charts if wrong] == []
    if case != "eight paged_decode variants":
        styles = next(s for chart_id, _, s in drawn_charts if chart_id == "roofline")
        assert len(styles) == 4  # a colour and a marker shape of its own each
        assert len({c for c, _ in styles.values()}) == len({m for _, m in styles.values()}) == 4


@pytest.mark.parametrize("sweep", ["h200-bench", "h200-profile"])
def test_sweep_charts_have_no_overlapping_labels(sweep_svgs, drawn_charts, tmp_path, sweep):
    from paprof.sweep.report import write_sweep_report

    write_sweep_report(recorded(f"sweeps/{sweep}"), tmp_path / "s.html")
    assert sweep_svgs and not drawn_charts  # no matplotlib figure
    assert [wrong for wrong, _ in sweep_svgs if wrong] == []
    assert all(len(styles) == 2 for _, styles in sweep_svgs)  # v5 and v6


def test_sweep_chart_of_many_points_and_long_names_has_no_overlapping_labels(sweep_svgs):
    """100 context lengths (a dozen labelled), eight variants of long names."""
    xs = list(range(4096, 4096 + 16 * 100, 16))
    series = {f"variant_with_a_long_name_{i}": {k: [float(i + 1 + j) for j in range(100)]
                                                for k, _, _ in sweep_charts.PANELS} for i in range(8)}
    sweep_charts.scaling("scaling-context-0", "context", xs, [str(x) for x in xs], series, "", False)
    assert sweep_svgs and sweep_svgs[0][0] == []


def test_no_two_variants_share_colour_and_marker():
    styles = [charts.variant_style(i) for i in range(56)]
    assert len(set(styles)) == len(styles)
    assert len({c for c, _ in styles[:7]}) == 7  # the first seven: a colour each
    assert "#000000" not in charts.VARIANT_COLOURS  # black marks the roofline's levels


def test_log_axis_ticks_are_drawn_once():
    """Steps (1, 10) named each power of ten twice: two labels on one spot."""
    from matplotlib.figure import Figure

    ax = Figure().subplots()
    charts._log_axis(ax.xaxis, 0.1, 1000, (1, 10))
    ticks = list(ax.xaxis.get_major_locator()())
    assert ticks == sorted(set(ticks)) and len(ticks) == 5
