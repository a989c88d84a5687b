"""The sweep report as text and charts: the regime map, the scaling charts, the results
table, rendered by the ``sweep.html.j2`` and ``sweep.md.j2`` templates.

``build_context(collected)`` formats what ``paprof.sweep.regime`` decided (the winner at
each point, the crossovers, the scaling lines); the templates only display it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from paprof._version import __version__
from paprof.explain import fmt
from paprof.family import format_value
from paprof.measure.provenance import now

@dataclass
class RegimeCell:
    winner: str
    """``v6``, ``tie: v5, v6``, or a status (``not measured``)."""
    css: str
    """``win``, ``tie`` or ``none``."""
    times: str
    """``v5 12.3 us, v6 4.1 us``."""
    bottlenecks: list[tuple[str, str]]
    """(variant, label) where profiled."""


@dataclass
class RegimeTable:
    title: str
    row_key: str
    col_key: str | None
    col_values: list[str]
    rows: list[tuple[str, list[RegimeCell]]]


@dataclass
class ResultRow:
    label: str
    cells: list[dict]
    """Per variant: ``time``, ``tbs``, ``tflops``, ``pct``, ``bottleneck``, ``status``."""


@dataclass
class SweepContext:
    title: str
    subtitle: str
    paprof_version: str
    generated: str
    css: str
    mode: str
    time_label: str
    noise_pct: float
    noise_text: str
    """``2 %``."""
    variants: list[str]
    warnings: list[str]
    changes: list[str]
    """Crossover sentences (where the winner changes along an axis)."""
    steady: list[str]
    """Sentences of lines with one winner throughout."""
    regime: list[RegimeTable]
    charts: list
    results: list[ResultRow]
    not_measured: list[str]
    facts: list[tuple[str, str]]
    regime_data: dict = field(repr=False, default_factory=dict)


def compare_css() -> str:
    """The compare report's stylesheet, so that both reports look alike."""
    from paprof.render.html import TEMPLATES

    text = (TEMPLATES / "report.html.j2").read_text()
    start, end = text.find("<style>"), text.find("</style>")
    return text[start + len("<style>"):end] if start >= 0 and end > start else ""


def _cell_text(c) -> dict:
    status = {"done": "", "skipped": "skipped", "failed": "FAILED", "invalid": "invalid",
              "pending": "not measured"}.get(c.status, c.status)
    return {"time": fmt.duration_us(c.time_us) if c.measured else status,
            "tbs": fmt.sig(c.tbs) if c.tbs else "", "tflops": fmt.sig(c.tflops) if c.tflops else "",
            "pct": fmt.pct(c.pct_ceiling, 0) if c.pct_ceiling else "", "bottleneck": c.bottleneck or "",
            "status": c.status, "reason": c.reason or ""}


def _regime_cell(row: dict, lead, noise_pct: float) -> RegimeCell:
    times = ", ".join(f"{c.variant} {fmt.duration_us(c.time_us)}" for c in row.values() if c.measured)
    necks = [(c.variant, c.bottleneck) for c in row.values() if c.bottleneck]
    if lead is None:
        states = {c.status for c in row.values()}
        return RegimeCell("invalid" if states == {"invalid"} else "not measured", "none", "", [])
    if len(lead.tied) > 1:
        return RegimeCell("tie: " + ", ".join(sorted(lead.tied)), "tie", times, necks)
    extra = f" ({fmt.ratio(lead.ratio)})" if lead.ratio else ""
    return RegimeCell(lead.winner + extra, "win", times, necks)


def _regime_tables(grids, noise_pct: float) -> list[RegimeTable]:
    return [RegimeTable(", ".join(f"{k} {format_value(v)}" for k, v in g.at.items()), g.row_key, g.col_key,
                        [format_value(v) for v in g.col_values],
                        [(format_value(rv), [_regime_cell(row, lead, noise_pct) for row, lead in out])
                         for rv, out in g.rows])
            for g in grids]


def draw_scaling(lines) -> list:
    """One chart per ``paprof.sweep.regime.ScalingLine`` (``sweep_charts.scaling``: SVG
    written in a few milliseconds, in this process)."""
    from paprof.render import sweep_charts

    charts = []
    for ln in lines:
        numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in ln.values)
        where = ("at " + ", ".join(f"{k} {format_value(v)}" for k, v in ln.at.items())) if ln.at else ""
        series = {vid: {k: got[k] for k, _l, _g in sweep_charts.PANELS} for vid, got in ln.series.items()}
        charts.append(sweep_charts.scaling(f"scaling-{ln.key}-{len(charts)}", ln.key, ln.values,
                                           [format_value(v) for v in ln.values], series, where,
                                           numeric and sweep_charts.spans(ln.values)))
    return charts


def build_context(found, charts: list | None = None, generated: str | None = None) -> SweepContext:
    """The sweep report's context from the ``paprof.sweep.regime.Findings`` ``found`` and
    the ``charts`` drawn of its scaling lines (``draw_scaling``; none for Markdown)."""
    col, noise_pct, lines, left_out = found.collected, found.noise_pct, found.lines, found.left_out
    data = col.manifest
    made = list(charts or [])
    warnings = list(col.warnings)
    if left_out:
        warnings.append(f"{left_out} chart(s) left out (at most {len(found.scaling)}); the regime map and "
                        "the JSON hold every point")
    results_rows = [ResultRow(p["label"], [_cell_text(col.cells[p["index"]][v]) for v in data["variants"]])
                    for p in data["points"]]
    not_measured = [f"{c.variant} at {p['label']}: {c.status}" + (f" ({c.reason})" if c.reason else "")
                    for p in data["points"] for c in col.cells[p["index"]].values()
                    if c.status in ("skipped", "failed", "invalid")]
    time_label = "CUDA-event median" if data["mode"] == "bench" else "duration under ncu"
    axes_text = " x ".join(f"{a['key']} ({len(a['values'])})" for a in data["axes"])
    facts = [("sweep", data["name"]), ("family", data["family"]), ("mode", data["mode"]),
             ("GPU", col.gpu or "unknown"), ("time", time_label), ("axes", axes_text),
             ("fixed", data.get("fixed_spec") or "the family's defaults"),
             ("shards merged", ", ".join(f"{s['shard']}/{s['of']}" for s in data.get("shards", []))),
             ("ties", f"times within {fmt.sig(noise_pct)} % of the fastest")]
    return SweepContext(
        title=f"Sweep: {', '.join(data['variants'])} over {axes_text}",
        subtitle=f"{data['family']} on {col.gpu or 'an unknown GPU'}, {data['mode']} mode, "
                 f"{len(data['points'])} points",
        paprof_version=__version__, generated=generated or now(), css=compare_css(),
        mode=data["mode"], time_label=time_label, noise_pct=noise_pct,
        noise_text=f"{fmt.sig(noise_pct)} %" if noise_pct else "0 %", variants=list(data["variants"]),
        warnings=warnings, changes=[ln.sentence for ln in lines if ln.crossovers],
        steady=[ln.sentence for ln in lines if not ln.crossovers],
        regime=_regime_tables(found.grids, noise_pct), charts=made, results=results_rows,
        not_measured=not_measured, facts=facts, regime_data=found.regime_data)


def render_html(ctx: SweepContext) -> str:
    from paprof.render.html import environment

    return environment().get_template("sweep.html.j2").render(ctx=ctx)


def render_markdown(ctx: SweepContext) -> str:
    import re

    from paprof.render.markdown import environment

    text = environment().get_template("sweep.md.j2").render(ctx=ctx)
    return re.sub(r"\n{3,}", "\n\n", text).strip() + "\n"
