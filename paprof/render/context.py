"""The one object the report templates display.

``build_context(comparison, explained=...)`` turns a told ``paprof.explain.compare.Comparison``
(``paprof.model.analysis``: roofline, ledgers and stall ranking attached;
``paprof.explain.finish``: each step told) and its explanation document into a
``ReportContext``: plain dataclasses holding, for every number, its raw value (for tests
and for the charts) and its text (for the templates). The HTML and the Markdown
templates read the same context; neither computes anything. Each part has its module:
``table_view`` (the side-by-side and traffic tables), ``step_views``, ``run_views``
(variant cards, provenance), ``chart_views`` (charts, stalls, ledgers), ``verdict_view``
and ``views`` (roofline, hot spots).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone

from paprof._version import __version__
from paprof.explain import fmt
from paprof.explain.compare import Comparison
from paprof.render.chart_views import StallView, build_charts, build_ledgers, build_stalls
from paprof.render.charts import ChartView
from paprof.render.program_view import program_view
from paprof.render.run_views import ProvenanceView, VariantView, provenance_view, variant_view
from paprof.render.step_views import StepView, step_views
from paprof.render.table_view import (
    TRAFFIC_TABLE,
    TableRow,
    TableSection,
    attach_notes,
    build_table,
    fold_same_rows,
)
from paprof.explain.explanation import explanation
from paprof.render.views import hotspots_view, roofline_view
from paprof.render.verdict_view import verdict_view
from paprof.read.metrics import BY_COLUMN


@dataclass
class ReportContext:
    """Everything the templates show."""

    title: str
    subtitle: str
    summary: str
    generated: str
    paprof_version: str
    labels: list[str]
    variants: list[VariantView]
    steps: list[StepView]
    table: list[TableSection]
    charts: list[ChartView]
    provenance: ProvenanceView
    warnings: list[str]
    notes: list[str]
    ceiling_text: str
    thresholds_text: str
    absent: list[str] = field(default_factory=list)
    """Table rows left out: no variant's report or sidecar records them."""
    stalls: StallView | None = None
    """The warp-stall breakdown; None when no variant recorded WarpStateStats."""
    raw: dict = field(default_factory=dict, repr=False)
    """Raw per-variant series the charts were drawn from (label -> column -> value)."""
    ledgers: list = field(default_factory=list)
    """One ``LedgerView`` per step with both durations (``paprof.model.ledger``)."""
    roofline: object = None
    """The roofline's tables (``paprof.render.views.RooflineView``); None without points."""
    hotspots: object = None
    """The source hot spots (``paprof.render.views.HotspotsView``); None without
    SourceCounters in the runs."""
    traffic: list[TableSection] = field(default_factory=list)
    """Traffic per memory level (:data:`TRAFFIC_TABLE`); empty when no variant's report
    records it (runs of the ``basic`` preset)."""
    traffic_note: str = ""
    """Why some variant has no traffic figures, when one has none."""
    verdict: object = None
    """The verdict table (``paprof.render.verdict_view.VerdictView``): every variant
    against the baseline; None without variants."""
    program: object = None
    """The program view (``paprof.render.program_view.ProgramView``): whole programs'
    kernels by time, what moved, what was skipped; None unless programs are compared."""
    star: bool = False
    """Every step starts at the baseline (``compare --baseline``): deltas are against it,
    not against the variant to the left."""

    def section(self, title: str) -> TableSection:
        return next(s for s in self.table if s.title == title)

    def row(self, key: str) -> TableRow:
        for s in self.table:
            for r in s.rows:
                if r.key == key:
                    return r
        raise KeyError(key)


# -- the whole thing ---------------------------------------------------------------------
def _ceiling_text(cmp: Comparison) -> str:
    seen = []
    for v in cmp.variants:
        c = v.ceiling
        if c is None:
            continue
        text = f"{fmt.sig(c.tbs)} TB/s ({c.source})"
        if c.datasheet_tbs and c.datasheet_tbs != c.tbs:
            text += f"; datasheet {fmt.sig(c.datasheet_tbs)} TB/s"
        if text not in seen:
            seen.append(text)
    if not seen:
        return "No bandwidth ceiling is known for this GPU (add it to paprof/model/gpus.py)."
    return "Bandwidth ceiling: " + " | ".join(seen) + "."


def _thresholds_text(cmp: Comparison) -> str:
    t = cmp.thresholds
    return (f"A metric counts as moved past: duration {fmt.pct(t.duration_rel * 100)}, throughput "
            f"{fmt.number(t.throughput_pts)} pts, occupancy {fmt.number(t.occupancy_pts)} pts, "
            f"DRAM traffic {fmt.pct(t.traffic_rel * 100)}, bandwidth {fmt.pct(t.bandwidth_rel * 100)}, "
            f"waves {fmt.pct(t.waves_rel * 100)}, rule estimates {fmt.number(t.rule_speedup_pts)} pts.")


def build_context(cmp: Comparison, charts: bool = True, generated: str | None = None,
                  explained: dict | None = None) -> ReportContext:
    """The report's context. ``charts=False`` skips matplotlib (the Markdown report has
    none). The verdict table and the steps' words and numbers are read from ``explained``,
    the comparison's ``compare --json`` document (``paprof.explain.explanation``; made
    here when not given), so that the page and the JSON cannot disagree. ``cmp`` is told
    already (``paprof.explain.finish``, which ``paprof.explain.compare.compare`` runs):
    the context only formats it."""
    if not cmp.finished:
        raise ValueError("build_context formats a told comparison: run "
                         "paprof.explain.finish.finish(cmp) on it first")
    if explained is None:
        explained = explanation(cmp)
    labels = [v.label for v in cmp.variants]
    told = cmp.told
    series = told.series
    families = sorted({v.family for v in cmp.variants if v.family})
    shapes = sorted({str(v.shape) for v in cmp.variants if v.shape})
    gpus = sorted({str(v.gpu) for v in cmp.variants if v.gpu})
    subtitle = " · ".join(x for x in (
        ", ".join(families), ", ".join(gpus), ", ".join(shapes)) if x)
    table, absent = build_table(cmp, series)
    table = fold_same_rows(table)
    traffic = fold_same_rows(build_table(cmp, series, TRAFFIC_TABLE)[0])
    attach_notes(table + traffic, cmp.contradictions)
    stalls = build_stalls(cmp.stalls)
    ledgers = build_ledgers(cmp.ledgers)

    roofline = cmp.roofline

    star = told.star
    if star:  # every step starts at the baseline: "over the previous variant" says nothing
        table = [TableSection(sec.title, [r for r in sec.rows if r.key != "speedup_prev"])
                 for sec in table]
    verdicts = verdict_view(explained.get("verdict"), explained.get("program"))
    title = (f"paprof: {', '.join(labels[1:])} against {labels[0]}" if star
             else "paprof: " + " -> ".join(labels))
    return ReportContext(
        title=title,
        subtitle=subtitle,
        summary=verdicts.summary if verdicts else "",
        verdict=verdicts,
        program=program_view(explained.get("program")),
        star=star,
        generated=generated or datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        paprof_version=__version__,
        labels=labels,
        variants=[variant_view(v, told.code_paths.get(v.label)) for v in cmp.variants],
        steps=step_views(cmp, explained["transitions"]),
        table=table,
        charts=build_charts(cmp, series, stalls, ledgers, roofline) if charts else [],
        provenance=provenance_view(cmp),
        warnings=list(cmp.warnings),
        notes=list(cmp.notes),
        ceiling_text=_ceiling_text(cmp),
        thresholds_text=_thresholds_text(cmp),
        absent=absent,
        stalls=stalls,
        raw=series,
        ledgers=ledgers,
        roofline=roofline_view(roofline, {v.label: v.bottleneck for v in cmp.variants},
                               told.readings),
        hotspots=hotspots_view(cmp.hotspots),
        traffic=traffic,
        traffic_note=_traffic_note(cmp),
    )


def _traffic_note(cmp: Comparison) -> str:
    """Names the variants whose reports lack the traffic sections, and those sections."""
    lacking = [v.label for v in cmp.variants if v.get("l2_to_l1_bytes") is None]
    if not lacking:
        return ""
    sections = sorted({BY_COLUMN[c].section for c in ("l2_to_l1_bytes", "l1_global_load_sectors")})
    return (f"No traffic counters for {', '.join(lacking)}: profile with the default preset "
            f"(sections {', '.join(sections)}).")
