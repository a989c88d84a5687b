"""The sweep report: scaling per axis, the regime map, its crossovers, as HTML, Markdown
and the regime JSON a dispatcher reads.

``collect`` reads a sweep's results from the store (bench records; or profiled runs,
through ``load_reports``/``variant_rows`` for the ncu duration, throughput and the
bottleneck label); ``regime`` decides the winner at each point, the fastest verified
variant by its event-timed median (bench) or ncu duration (profile), treating variants
within ``NOISE_PCT`` of the fastest as tied; ``crossovers`` walks each axis with the other
axes held at each of their values and says in words where the winner changes;
``build_context`` makes the one object the templates display.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from paprof import __version__, parallel
from paprof.analysis import fmt
from paprof.analysis.verdict import NOISE_PCT, tied
from paprof.errors import UserError
from paprof.family import format_value
from paprof.sweep import manifest as manifests
from paprof.sweep import results

REGIME_KIND = "paprof-regime"
REGIME_SCHEMA = 1
MAX_CHARTS = 24
PARALLEL_CHARTS = 4
"""From this many charts on they are drawn by worker processes (``paprof.parallel``):
each takes matplotlib 0.1-0.2 s, a worker's start about as much."""


@dataclass
class Cell:
    """One variant at one point."""

    variant: str
    status: str
    """``done``, ``failed``, ``skipped``, ``invalid``, ``pending`` (not measured here)."""
    reason: str | None = None
    time_us: float | None = None
    tbs: float | None = None
    tflops: float | None = None
    pct_ceiling: float | None = None
    bottleneck: str | None = None
    event_us: float | None = None
    gpu: str | None = None
    source: str | None = None

    @property
    def measured(self) -> bool:
        return self.status == "done" and self.time_us is not None and self.time_us > 0


def _num(value) -> float | None:
    return None if fmt.is_missing(value) else float(value)


def _bench_cell(vid: str, rec: results.Record) -> Cell:
    d = rec.data
    return Cell(vid, "done", time_us=_num(d.get("median_us")), tbs=_num(d.get("tbs")),
                tflops=_num(d.get("tflops")), pct_ceiling=_num(d.get("pct_of_ceiling")),
                event_us=_num(d.get("median_us")), gpu=d.get("gpu"), source=str(rec.path))


def _profile_cells(chosen: dict, scan=None) -> dict:
    """(variant, slug) -> Cell from the chosen runs' reports (loaded once; ``scan``: the
    ``store.Scan`` that found them, so that their sidecars are not read again)."""
    if not chosen:
        return {}
    from paprof.analysis.gpus import ceiling_for
    from paprof.analysis.load import load_reports, variant_rows

    rows = variant_rows(load_reports([rec.path for rec in chosen.values()], scan=scan))
    # Each report's rows by number, and the columns read as lists: a mask over the whole
    # table per run took 10,000 x 10,000 comparisons.
    where: dict = {}
    for i, path in enumerate(rows["report_path"].tolist()):
        where.setdefault(path, []).append(i)
    columns = {c: rows[c].tolist() for c in ("duration_us", "work_tbs", "work_tflops")
               if c in rows}
    bottlenecks = rows["bottleneck"].tolist()
    out = {}
    for (vid, slug), rec in chosen.items():
        mine = where.get(str(rec.path))
        if not mine:
            continue
        def med(column):
            values = ([v for v in (columns[column][i] for i in mine) if not fmt.is_missing(v)]
                      if column in columns else [])
            return statistics.median(values) if values else None
        tbs = med("work_tbs")
        ceiling = ceiling_for(rec.data.get("gpu"), rec.data)
        labels = Counter(b for b in (bottlenecks[i] for i in mine) if b)
        out[(vid, slug)] = Cell(
            vid, "done", time_us=med("duration_us"), tbs=tbs, tflops=med("work_tflops"),
            pct_ceiling=100.0 * tbs / ceiling.tbs if tbs and ceiling else None,
            bottleneck=labels.most_common(1)[0][0] if labels else None,
            event_us=_num(rec.data.get("duration_us_event")), gpu=rec.data.get("gpu"),
            source=str(rec.path))
    return out


@dataclass
class Collected:
    manifest: dict
    cells: dict
    """point index -> {variant: Cell}"""
    gpu: str | None
    warnings: list[str] = field(default_factory=list)


def collect(runs, data: dict) -> Collected:
    """Each point's cells from the store ``runs`` for the sweep ``data`` (its manifest)."""
    from paprof.profiler.store import Scan

    mode, family = data["mode"], data["family"]
    scan = Scan()  # the store is read once: to find the records, then to load them
    found = results.latest([r for r in results.find_records(runs, mode, scan)
                            if r.data.get("family") == family])
    gpus = Counter(key[0] for key in found)
    warnings = []
    gpu_slug = None
    if gpus:
        gpu_slug = gpus.most_common(1)[0][0]
        if len(gpus) > 1:
            warnings.append(f"the store holds this sweep's results from {len(gpus)} GPU models "
                            f"({', '.join(sorted(map(str, gpus)))}); the report shows {gpu_slug} only")
    chosen = {}
    for p in data["points"]:
        for vid in data["variants"]:
            rec = found.get((gpu_slug, family, vid, p["shape_slug"]))
            if rec is not None:
                chosen[(vid, p["shape_slug"])] = rec
    profiled = _profile_cells(chosen, scan) if mode == "profile" else {}
    cells: dict = {}
    gpu_name = None
    for p in data["points"]:
        row = {}
        for vid in data["variants"]:
            state = p["variants"].get(vid) or {"status": "pending", "reason": None}
            rec = chosen.get((vid, p["shape_slug"]))
            if rec is not None and state["status"] not in ("skipped", "invalid"):
                cell = _bench_cell(vid, rec) if mode == "bench" else profiled.get((vid, p["shape_slug"]))
                cell = cell or Cell(vid, "pending", "its report could not be read")
                gpu_name = gpu_name or cell.gpu
            elif p.get("error"):
                cell = Cell(vid, "invalid", p["error"])
            else:
                cell = Cell(vid, state["status"] if state["status"] != "done" else "pending",
                            state.get("reason"))
            row[vid] = cell
        cells[p["index"]] = row
    missing = sum(1 for row in cells.values() for c in row.values() if c.status == "pending")
    if missing:
        shards = ", ".join(f"{s['shard']}/{s['of']}" for s in data.get("shards", []))
        warnings.append(f"{missing} variant-point(s) have no result in this store (shards merged: "
                        f"{shards or 'none'}); run the missing shards or resume the sweep")
    return Collected(data, cells, gpu_name, warnings)


# ---------------------------------------------------------------------------------------
# The regime: winners and crossovers
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Leader:
    winner: str
    tied: tuple[str, ...]
    """Every variant within the noise of the fastest, fastest first (1: a clear win)."""
    ratio: float | None
    """The runner-up's time over the winner's (None with one variant measured)."""

    @property
    def key(self) -> tuple:
        return ("tie", tuple(sorted(self.tied))) if len(self.tied) > 1 else ("win", self.winner)


def leader(row: dict, noise_pct: float = NOISE_PCT) -> Leader | None:
    """The fastest measured variant of one point (None when none was measured)."""
    timed = sorted((c.time_us, c.variant) for c in row.values() if c.measured)
    if not timed:
        return None
    ratio = timed[1][0] / timed[0][0] if len(timed) > 1 else None
    return Leader(timed[0][1], tied(timed, noise_pct), ratio)


def _axis_values(data: dict) -> list[tuple[str, list]]:
    return [(a["key"], list(a["values"])) for a in data["axes"]]


def _sort_key(value):
    return (0, value) if isinstance(value, (int, float)) and not isinstance(value, bool) else (1, str(value))


def _freeze(value):
    return tuple(value) if isinstance(value, list) else value


def _index_by_coords(data: dict) -> dict:
    return {tuple(_freeze(p["coords"][k]) for k, _ in _axis_values(data)): p for p in data["points"]}


def _phrase(lead: Leader, present: list[str], noise_pct: float, ratios: list[float]) -> str:
    noise = f"{fmt.sig(noise_pct)} %"
    if len(lead.tied) > 1:
        if len(lead.tied) == len(present) == 2:
            return f"they are within {noise}"
        return f"{' and '.join(sorted(lead.tied))} are within {noise}"
    spread = ""
    if ratios:
        lo, hi = min(ratios), max(ratios)
        spread = f" by {fmt.ratio(lo)}" if fmt.ratio(lo) == fmt.ratio(hi) else f" by {fmt.ratio(lo)} to {fmt.ratio(hi)}"
    others = [v for v in present if v != lead.winner]
    if len(others) == 1:
        return f"{lead.winner} is faster than {others[0]}{spread}"
    return f"{lead.winner} is the fastest{spread}"


@dataclass
class Line:
    """One axis walked with the other axes fixed: its segments and the sentence."""

    axis: str
    at: dict
    """The other axes' values."""
    segments: list[dict]
    """``{"from": v, "to": v, "winner": id, "tied": [...]}`` in axis order."""
    sentence: str
    crossovers: list[dict]
    """``{"between": [a, b], "from": state, "to": state}`` where the leader changes."""


def _state_text(lead: Leader) -> str:
    return lead.winner if len(lead.tied) == 1 else "tie:" + "+".join(sorted(lead.tied))


def crossovers(data: dict, cells: dict, noise_pct: float = NOISE_PCT) -> list[Line]:
    """Every axis (with 2+ values) walked at each combination of the other axes."""
    axes = _axis_values(data)
    by = _index_by_coords(data)
    lines = []
    for ai, (key, values) in enumerate(axes):
        if len(values) < 2:
            continue
        others = [(k, v) for j, (k, v) in enumerate(axes) if j != ai]
        ordered = sorted(values, key=_sort_key)
        for combo in itertools.product(*(v for _, v in others)):
            at = {k: val for (k, _), val in zip(others, combo)}
            walk = []
            for value in ordered:
                coords = dict(at, **{key: value})
                point = by[tuple(_freeze(coords[k]) for k, _ in axes)]
                row = cells[point["index"]]
                lead = leader(row, noise_pct)
                if lead is not None:
                    walk.append((value, lead, [v for v in data["variants"] if row[v].measured]))
            if len(walk) < 2:
                continue
            segments: list[list] = []
            for value, lead, present in walk:
                if segments and segments[-1][0].key == lead.key:
                    segments[-1][1].append(value)
                    segments[-1][2].append(lead.ratio)
                else:
                    segments.append([lead, [value], [lead.ratio], present])
            lines.append(_line(key, at, segments, noise_pct))
    return lines


def _line(key: str, at: dict, segments: list, noise_pct: float) -> Line:
    where = (" at " + ", ".join(f"{k} {format_value(v)}" for k, v in at.items())) if at else ""
    v = format_value
    clauses = []
    for i, (lead, vals, ratios, present) in enumerate(segments):
        phrase = _phrase(lead, present, noise_pct, [r for r in ratios if r] if len(lead.tied) == 1 else [])
        if i == 0 and phrase.startswith("they "):  # nobody named yet
            phrase = f"{' and '.join(sorted(lead.tied))} are within {fmt.sig(noise_pct)} %"
        if len(segments) == 1:
            clauses.append(f"{phrase} at every {key} from {v(vals[0])} to {v(vals[-1])}{where}")
        elif i == 0:
            clauses.append(f"{phrase} below {key} {v(segments[1][1][0])}{where}")
        elif i == len(segments) - 1:
            clauses.append(f"from {key} {v(vals[0])} on {phrase}")
        else:
            span = f"at {key} {v(vals[0])}" if len(vals) == 1 else f"from {key} {v(vals[0])} to {v(vals[-1])}"
            clauses.append(f"{span} {phrase}")
    changes = []
    for (a, avals, _r, _p), (b, bvals, _r2, _p2) in zip(segments, segments[1:]):
        changes.append({"between": [avals[-1], bvals[0]], "from": _state_text(a), "to": _state_text(b)})
    segs = [{"from": vals[0], "to": vals[-1], "winner": lead.winner if len(lead.tied) == 1 else None,
             "tied": list(lead.tied)} for lead, vals, _r, _p in segments]
    return Line(key, dict(at), segs, "; ".join(clauses), changes)


def regime_json(col: Collected, lines: list[Line], noise_pct: float = NOISE_PCT) -> dict:
    """The regime map for a dispatcher: per point the winner (None: a tie or nothing
    measured), the tied variants, each variant's time and bottleneck; the crossovers."""
    data = col.manifest
    points = []
    for p in data["points"]:
        row = col.cells[p["index"]]
        lead = leader(row, noise_pct)
        points.append({
            "coords": p["coords"], "shape": p["shape"], "shape_slug": p["shape_slug"],
            "winner": lead.winner if lead and len(lead.tied) == 1 else None,
            "fastest": lead.winner if lead else None,
            "tied": list(lead.tied) if lead else [],
            "time_us": {c.variant: c.time_us for c in row.values() if c.measured},
            "bottleneck": {c.variant: c.bottleneck for c in row.values() if c.bottleneck},
            "not_measured": {c.variant: {"status": c.status, "reason": c.reason}
                             for c in row.values() if not c.measured},
        })
    return {
        "kind": REGIME_KIND, "schema": REGIME_SCHEMA, "sweep": data["name"], "family": data["family"],
        "variants": data["variants"], "mode": data["mode"], "gpu": col.gpu,
        "time": "CUDA-event median, us" if data["mode"] == "bench" else "ncu duration, us",
        "noise_pct": noise_pct, "axes": data["axes"], "fixed": data["fixed"], "points": points,
        "lines": [{"axis": ln.axis, "at": ln.at, "segments": ln.segments, "crossovers": ln.crossovers,
                   "sentence": ln.sentence} for ln in lines],
    }


# ---------------------------------------------------------------------------------------
# The report's context (templates only display it)
# ---------------------------------------------------------------------------------------


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
    from paprof.reports.html import TEMPLATES

    text = (TEMPLATES / "report.html.j2").read_text()
    start, end = text.find("<style>"), text.find("</style>")
    return text[start + len("<style>"):end] if start >= 0 and end > start else ""


def _cell_text(c: Cell) -> dict:
    status = {"done": "", "skipped": "skipped", "failed": "FAILED", "invalid": "invalid",
              "pending": "not measured"}.get(c.status, c.status)
    return {"time": fmt.duration_us(c.time_us) if c.measured else status,
            "tbs": fmt.sig(c.tbs) if c.tbs else "", "tflops": fmt.sig(c.tflops) if c.tflops else "",
            "pct": fmt.pct(c.pct_ceiling, 0) if c.pct_ceiling else "", "bottleneck": c.bottleneck or "",
            "status": c.status, "reason": c.reason or ""}


def _regime_cell(row: dict, noise_pct: float) -> RegimeCell:
    lead = leader(row, noise_pct)
    times = ", ".join(f"{c.variant} {fmt.duration_us(c.time_us)}" for c in row.values() if c.measured)
    necks = [(c.variant, c.bottleneck) for c in row.values() if c.bottleneck]
    if lead is None:
        states = {c.status for c in row.values()}
        return RegimeCell("invalid" if states == {"invalid"} else "not measured", "none", "", [])
    if len(lead.tied) > 1:
        return RegimeCell("tie: " + ", ".join(sorted(lead.tied)), "tie", times, necks)
    extra = f" ({fmt.ratio(lead.ratio)})" if lead.ratio else ""
    return RegimeCell(lead.winner + extra, "win", times, necks)


def _regime_tables(data: dict, cells: dict, noise_pct: float) -> list[RegimeTable]:
    axes = _axis_values(data)
    by = _index_by_coords(data)
    row_key, row_vals = axes[0]
    col_key, col_vals = axes[1] if len(axes) > 1 else (None, [None])
    rest = axes[2:]
    tables = []
    for combo in itertools.product(*(v for _, v in rest)):
        at = {k: val for (k, _), val in zip(rest, combo)}
        rows = []
        for rv in sorted(row_vals, key=_sort_key):
            out = []
            for cv in sorted(col_vals, key=_sort_key) if col_key else [None]:
                coords = dict(at, **{row_key: rv}, **({col_key: cv} if col_key else {}))
                point = by[tuple(_freeze(coords[k]) for k, _ in axes)]
                out.append(_regime_cell(cells[point["index"]], noise_pct))
            rows.append((format_value(rv), out))
        title = ", ".join(f"{k} {format_value(v)}" for k, v in at.items())
        tables.append(RegimeTable(title, row_key, col_key,
                                  [format_value(v) for v in sorted(col_vals, key=_sort_key)] if col_key else [],
                                  rows))
    return tables


def _charts(data: dict, cells: dict) -> tuple[list, int]:
    from paprof.reports import sweep_charts

    axes = _axis_values(data)
    by = _index_by_coords(data)
    charts, left_out = [], 0
    for ai, (key, values) in enumerate(axes):
        if len(values) < 2:
            continue
        others = [(k, v) for j, (k, v) in enumerate(axes) if j != ai]
        ordered = sorted(values, key=_sort_key)
        numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in ordered)
        log_x = numeric and sweep_charts.spans(ordered)
        for combo in itertools.product(*(v for _, v in others)):
            if len(charts) >= MAX_CHARTS:
                left_out += 1
                continue
            at = {k: val for (k, _), val in zip(others, combo)}
            series = {vid: {k: [] for k, _l, _g in sweep_charts.PANELS} for vid in data["variants"]}
            for value in ordered:
                coords = dict(at, **{key: value})
                row = cells[by[tuple(_freeze(coords[k]) for k, _ in axes)]["index"]]
                for vid in data["variants"]:
                    c = row[vid]
                    for k, _l, _g in sweep_charts.PANELS:
                        series[vid][k].append(getattr(c, k) if c.measured else None)
            where = ("at " + ", ".join(f"{k} {format_value(v)}" for k, v in at.items())) if at else ""
            chart_id = f"scaling-{key}-{len(charts)}"
            charts.append((chart_id, key, ordered, [format_value(v) for v in ordered], series, where,
                           log_x))
    jobs = min(parallel.jobs(), len(charts)) if len(charts) >= PARALLEL_CHARTS else 1
    if jobs > 1:  # imported once here, so that forked workers start with it
        import matplotlib.backends.backend_agg  # noqa: F401
        import matplotlib.figure  # noqa: F401
    with parallel.ordered_map(_scaling, charts, jobs) as drawn:
        return list(drawn), left_out


def _scaling(args: tuple):
    """One scaling chart (in a worker process when there are several)."""
    from paprof.reports import sweep_charts

    return sweep_charts.scaling(*args)


def build_context(col: Collected, noise_pct: float = NOISE_PCT, charts: bool = True,
                  generated: str | None = None) -> SweepContext:
    from paprof.profiler.provenance import now

    data = col.manifest
    lines = crossovers(data, col.cells, noise_pct)
    made, left_out = _charts(data, col.cells) if charts else ([], 0)
    warnings = list(col.warnings)
    if left_out:
        warnings.append(f"{left_out} chart(s) left out (at most {MAX_CHARTS}); the regime map and "
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
        regime=_regime_tables(data, col.cells, noise_pct), charts=made, results=results_rows,
        not_measured=not_measured, facts=facts, regime_data=regime_json(col, lines, noise_pct))


def render_html(ctx: SweepContext) -> str:
    from paprof.reports.html import environment

    return environment().get_template("sweep.html.j2").render(ctx=ctx)


def render_markdown(ctx: SweepContext) -> str:
    import re

    from paprof.reports.markdown import environment

    text = environment().get_template("sweep.md.j2").render(ctx=ctx)
    return re.sub(r"\n{3,}", "\n\n", text).strip() + "\n"


@dataclass
class SweepReport:
    html: Path | None
    markdown: Path | None
    markdown_text: str | None
    regime: Path | None
    context: SweepContext
    overwrote: list[Path]
    regime_text: str | None = None
    """The regime JSON when ``regime`` was ``"-"`` (for stdout), else None."""


def regime_path_for(out: Path) -> Path:
    """``sweep.html`` -> ``sweep.regime.json``."""
    return out.with_name(out.name.rsplit(".", 1)[0] + ".regime.json")


def write_sweep_report(runs, out: Path | str | None = "paprof-sweep.html", markdown=None,
                       regime: Path | str | None = None, *, name: str | None = None,
                       noise_pct: float = NOISE_PCT, force: bool = False,
                       generated: str | None = None) -> SweepReport:
    """Write the sweep report of the store ``runs``: HTML (``out``), Markdown (``markdown``;
    ``"-"`` returns it as text) and the regime JSON (``regime``; default beside ``out``;
    ``"-"`` returns it as text).

    Earlier paprof reports are replaced; other files only with ``force`` (as compare).
    """
    import json

    from paprof import outputs
    from paprof.reports.build import STDOUT
    from paprof.reports.html import GENERATOR_MARK
    from paprof.reports.markdown import MARK

    if not noise_pct >= 0 or math.isinf(noise_pct):
        raise UserError(f"--noise must be a percentage of 0 or more, got {noise_pct}")
    out_path = Path(out) if out is not None else None
    md_path = Path(markdown) if markdown not in (None, STDOUT) else None
    if regime == STDOUT and markdown == STDOUT:
        raise UserError("--markdown - and --json - cannot both print")
    json_path = (None if regime == STDOUT else Path(regime) if regime is not None
                 else regime_path_for(out_path) if out_path else None)
    targets = [(p, mark) for p, mark in ((out_path, GENERATOR_MARK), (md_path, MARK),
                                         (json_path, f'"kind": "{REGIME_KIND}"')) if p is not None]
    if len({str(p.resolve()) for p, _ in targets}) < len(targets):
        raise UserError("the HTML, Markdown and regime JSON outputs must be different files")
    store_files = sorted(Path(runs).rglob("*.json")) if Path(runs).is_dir() else []
    overwrote = [p for p, mark in targets  # never a manifest or record it reads, even with --force
                 if outputs.check_target(p, what="a paprof report", mark=mark, force=force,
                                         inputs=store_files)]
    data = manifests.find(runs, name)
    col = collect(runs, data)
    ctx = build_context(col, noise_pct, charts=out_path is not None, generated=generated)
    md_text = None
    if out_path is not None:
        outputs.write(out_path, render_html(ctx))
    if markdown is not None:
        md_text = render_markdown(ctx)
        if md_path is not None:
            outputs.write(md_path, md_text)
    regime_text = json.dumps(ctx.regime_data, indent=1) + "\n"
    if json_path is not None:
        outputs.write(json_path, regime_text)
    return SweepReport(out_path, md_path, md_text, json_path, ctx, overwrote,
                       regime_text if regime == STDOUT else None)
