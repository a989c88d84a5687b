"""The sweep report's scaling charts, written as SVG (``paprof.render.sweep_charts``):
every point of every series is drawn where the axis' own tick labels put it, every label
is text, odd names are escaped, and no matplotlib figure is made."""

from __future__ import annotations

import base64
import math
import re
import xml.etree.ElementTree as ET

import pytest

from paprof.render import sweep_charts as S

from helpers import recorded

NS = {"s": "http://www.w3.org/2000/svg"}
XS = [1, 2, 4, 8, 16, 32, 64, 128]
SERIES = {
    "v5": {"time_us": [3.0 * x for x in XS], "tbs": [0.5, 1.0, 1.5, 2.0, 2.2, 2.4, 2.5, 2.6],
           "tflops": [None] * 8, "pct_ceiling": [10.0 * i for i in range(8)]},
    'v<6&"x">': {"time_us": [30.0 + x for x in XS], "tbs": [None, 0.7, 0.9, None, 1.2, 1.3, 1.4, 1.5],
                 "tflops": [None] * 8, "pct_ceiling": [None, None, None, 5.0, None, None, None, None]},
}


def _svg(chart) -> ET.Element:
    head, data = chart.uri.split(",", 1)
    assert head == "data:image/svg+xml;base64"
    return ET.fromstring(base64.b64decode(data).decode("utf-8"))


def _chart(log_x=True, series=SERIES, xs=XS):
    return S.scaling("scaling-batch-0", "batch", xs, [str(x) for x in xs], series, "at context 4096",
                     log_x)


def _tag(name: str) -> str:
    return f"{{{NS['s']}}}{name}"


def _texts(element, role: str) -> list:
    return [t for t in element.iter(_tag("text")) if t.get("class") == role]


def _panels(root) -> list[dict]:
    """Each panel's title, y tick labels (value, y), x tick labels (name, x) and points
    by variant, read back from the SVG."""
    panels = []
    for g in root.iter(_tag("g")):
        if g.get("data-panel") is None:
            continue
        panels.append({
            "key": g.get("data-panel"), "title": _texts(g, "title")[0].text,
            "yticks": [(float(t.text), float(t.get("y"))) for t in _texts(g, "ytick")],
            "xticks": [(t.text, float(t.get("x"))) for t in _texts(g, "xtick")],
            "lines": {line.get("data-variant"): [tuple(map(float, pt.split(",")))
                                                 for pt in line.get("points").split()]
                      for line in g.iter(_tag("polyline"))}})
    return panels


def _inverse(ticks: list[tuple[float, float]], log: bool):
    """Pixel -> value from two of an axis' labelled ticks."""
    (v0, p0), (v1, p1) = ticks[0], ticks[-1]
    f = math.log10 if log else float
    return lambda p: (10 ** (f(v0) + (p - p0) * (f(v1) - f(v0)) / (p1 - p0)) if log
                      else v0 + (p - p0) * (v1 - v0) / (p1 - p0))


def test_every_point_is_where_the_axes_labels_put_it():
    panels = _panels(_svg(_chart()))
    assert [p["title"] for p in panels] == [t for _, t, _ in S.PANELS]
    for panel in panels:
        assert [name for name, _ in panel["xticks"]] == [str(x) for x in XS]
        x_of = _inverse([(float(n), x) for n, x in panel["xticks"]], log=True)
        log_y = panel["key"] == "time_us"  # 3 to 384 us: over a decade
        if not panel["lines"]:
            assert panel["key"] == "tflops"
            continue
        y_of = _inverse(panel["yticks"], log=log_y)
        for variant, points in panel["lines"].items():
            want = [(x, v) for x, v in zip(XS, SERIES[variant][panel["key"]]) if v is not None]
            if len(want) == 1:
                want = want * 2  # one point drawn twice, so that its marker shows
            assert len(points) == len(want), (panel["key"], variant)
            for (px, py), (x, v) in zip(points, want):
                assert x_of(px) == pytest.approx(x, rel=0.01)
                assert y_of(py) == pytest.approx(v, rel=0.01, abs=0.01)


def test_axes_ticks_labels_and_legend_are_text():
    root = _svg(_chart())
    texts = [t.text for t in root.iter(_tag("text"))]
    assert [t.text for t in _texts(root, "xlabel")] == ["batch (log scale)"] * 4
    assert texts.count("not recorded") == 1  # TFLOP/s: no value
    assert [t.text for t in _texts(root, "legend")] == ["v5", 'v<6&"x">']  # escaped in the SVG
    assert {"1", "128"} <= set(texts)
    panels = _panels(root)
    assert [v for v, _ in panels[0]["yticks"]] == [10, 100]  # log: its powers of ten
    assert [v for v, _ in panels[3]["yticks"]] == [0, 20, 40, 60]  # 0 to 70 % and its 12 %
    doc = base64.b64decode(_chart().uri.split(",", 1)[1]).decode()
    assert 'v&lt;6&amp;&quot;x&quot;&gt;' in doc and "<6&" not in doc


def test_a_linear_axis_of_many_points_labels_a_dozen():
    xs = list(range(4096, 4096 + 16 * 100, 16))
    series = {"v5": {"time_us": [50.0 + i for i in range(100)], "tbs": [1.0] * 100,
                     "tflops": [2.0] * 100, "pct_ceiling": [30.0] * 100}}
    panels = _panels(_svg(_chart(log_x=False, series=series, xs=xs)))
    assert len(panels) == 4 and all(len(p["lines"]["v5"]) == 100 for p in panels)
    names = [n for n, _ in panels[0]["xticks"]]
    assert names[0] == "4096" and names[-1] == str(xs[-1]) and 3 <= len(names) <= S.MAX_LABELS
    x_of = _inverse([(xs.index(int(n)), x) for n, x in panels[0]["xticks"]], log=False)
    assert [round(x_of(px)) for px, _ in panels[0]["lines"]["v5"]] == list(range(100))


def test_variants_keep_their_colour_and_marker():
    root = _svg(_chart())
    markers = {m.get("id"): m[0] for m in root.iter(_tag("marker"))}
    assert set(markers) == {"m0", "m1"}
    for i in (0, 1):
        colour, _shape = S.variant_style(i)
        assert markers[f"m{i}"].get("fill") == colour
    lines = [p for p in root.iter(_tag("polyline")) if p.get("data-variant") is not None]
    assert {(p.get("data-variant"), p.get("stroke"), p.get("marker-mid")) for p in lines} == {
        ("v5", S.variant_style(0)[0], "url(#m0)"), ('v<6&"x">', S.variant_style(1)[0], "url(#m1)")}


def test_nice_and_log_ticks():
    assert S.nice_ticks(0, 104.2) == ([0, 20, 40, 60, 80, 100], 0)
    ticks, decimals = S.nice_ticks(0, 1.31)
    assert ticks == pytest.approx([0, 0.25, 0.5, 0.75, 1.0, 1.25]) and decimals == 2
    assert S.nice_ticks(0, 29.0)[0] == [0, 5, 10, 15, 20, 25]
    assert S.log_ticks(2.0, 5000.0) == [10.0, 100.0, 1000.0]
    assert S.log_ticks(1.5, 60.0) == [2.0, 5.0, 10.0, 20.0, 50.0]
    assert S.log_ticks(1.5, 120.0) == [10.0, 100.0]


def test_no_matplotlib_figure_is_made(monkeypatch):
    """The charts were matplotlib's: 0.3-0.4 s of CPU each, most of the report's time."""
    import matplotlib.figure

    def refuse(*a, **kw):
        raise AssertionError("a matplotlib figure was made")

    monkeypatch.setattr(matplotlib.figure.Figure, "__init__", refuse)
    chart = _chart()
    assert chart.width == 1152 and chart.height == 778
    assert re.search(r"batch 128 384 us", chart.alt)


def test_at_most_max_charts_drawn_in_this_process(monkeypatch):
    """The charts were drawn by worker processes (matplotlib's 0.3-0.4 s each); now in
    this one, the lines past ``MAX_CHARTS`` counted as left out."""
    import multiprocessing

    from paprof.sweep import report as R

    runs = recorded("sweeps/h200-profile")
    col = R.collect(runs, R.manifests.find(runs))
    monkeypatch.setattr(R, "MAX_CHARTS", 3)  # 3 of its 7
    drawn, left_out = R._charts(col.manifest, col.cells)
    assert (len(drawn), left_out) == (3, 4)
    assert all(c.uri.startswith("data:image/svg+xml;base64,") for c in drawn)
    assert multiprocessing.active_children() == []


def test_a_zero_on_the_axis_or_a_huge_value_is_drawn_not_a_crash():
    """A log x axis needs values above zero (an axis of 0, 1, 2, 4, 8 splits is drawn
    side by side); a value near the drawable limit is labelled 1e+200, not in 201 digits."""
    xs = [0, 1, 2, 4, 8]
    series = {"v5": {"time_us": [1.0, 2.0, 3.0, 4.0, 5.0], "tbs": [1e200, 1.0, 1.0, 1.0, 1.0],
                     "tflops": [None] * 5, "pct_ceiling": [None] * 5}}
    panels = _panels(_svg(_chart(log_x=True, series=series, xs=xs)))
    assert [n for n, _ in panels[0]["xticks"]] == ["0", "1", "2", "4", "8"]
    xs_px = [x for x, _ in panels[0]["lines"]["v5"]]
    gaps = [b - a for a, b in zip(xs_px, xs_px[1:])]
    assert max(gaps) - min(gaps) < 0.2  # evenly spaced: not a log axis
    root = _svg(_chart(log_x=True, series=series, xs=xs))
    assert "batch (log scale)" not in {t.text for t in root.iter(_tag("text"))}
    labels = [t.text for t in _texts(root, "ytick")]
    assert max(map(len, labels)) <= 8 and "1e+200" in labels
