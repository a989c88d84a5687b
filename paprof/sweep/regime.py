"""A sweep's results and what they decide: the winner at each point, the crossovers, the
regime JSON a dispatcher reads.

``collect`` reads a sweep's results from the store (bench records; or profiled runs,
through ``load_reports``/``variant_rows`` for the ncu duration, throughput and the
bottleneck label); ``leader`` decides the winner at a point, the fastest verified
variant by its event-timed median (bench) or ncu duration (profile), treating variants
within ``NOISE_PCT`` of the fastest as tied; ``crossovers`` walks each axis with the other
axes held at each of their values and says in words where the winner changes;
``scaling_lines`` gathers each metric along each axis for the charts. The sweep report
(``paprof.render.sweep``) only formats these.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from dataclasses import dataclass, field

from paprof.explain import fmt
from paprof.explain.verdict import NOISE_PCT, tied
from paprof.family import format_value
from paprof.sweep import results
from paprof.model.gpus import ceiling_for
from paprof.read.store import Scan

REGIME_KIND = "paprof-regime"
REGIME_SCHEMA = 1


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
    from paprof.model.load import load_reports, variant_rows

    rows = variant_rows(load_reports([rec.path for rec in chosen.values()], scan=scan))
    medians, labels = _per_report(rows)
    ceilings: dict = {}
    out = {}
    for (vid, slug), rec in chosen.items():
        path = str(rec.path)
        if path not in labels:
            continue
        time_us, tbs, tflops = medians.get(path, (None, None, None))
        gpu, recorded = rec.data.get("gpu"), rec.data.get("read_ceiling_tbs")
        key = (gpu, repr(recorded))
        if key not in ceilings:  # one look-up a GPU (and recorded ceiling), not one a run
            ceilings[key] = ceiling_for(gpu, rec.data)
        ceiling = ceilings[key]
        out[(vid, slug)] = Cell(
            vid, "done", time_us=time_us, tbs=tbs, tflops=tflops,
            pct_ceiling=100.0 * tbs / ceiling.tbs if tbs and ceiling else None,
            bottleneck=labels[path], event_us=_num(rec.data.get("duration_us_event")), gpu=gpu,
            source=path)
    return out


MEDIANS = ("duration_us", "work_tbs", "work_tflops")
"""The columns a profiled cell takes the median of, over its report's rows (a step's
kernels)."""


def _per_report(rows) -> tuple[dict, dict]:
    """Each report's medians of ``MEDIANS`` (None where it has no value; a column the
    table lacks is None throughout) and its most common bottleneck label (the first seen
    among equals; None without one), by report path: grouped over the whole table at
    once, not a pass over its rows per run."""
    import pandas as pd

    paths = rows["report_path"].astype(str)
    labels: dict = dict.fromkeys(paths.tolist())
    present = [c for c in MEDIANS if c in rows]
    medians: dict = {}
    if present:
        values = pd.DataFrame({c: pd.to_numeric(rows[c], errors="coerce") for c in present})
        found = values.groupby(paths.to_numpy(), sort=False).median()
        columns = [found[c].tolist() if c in found else [math.nan] * len(found) for c in MEDIANS]
        medians = {path: tuple(None if v != v else float(v) for v in cells)
                   for path, *cells in zip(found.index.tolist(), *columns)}
    named = [bool(b) and isinstance(b, str) for b in rows["bottleneck"].tolist()] \
        if "bottleneck" in rows else []
    if any(named):
        kept = pd.DataFrame({"path": paths[named].to_numpy(), "label": rows["bottleneck"][named].to_numpy()})
        counts = kept.groupby(["path", "label"], sort=False).size()
        best = counts.groupby(level=0, sort=False).idxmax()  # the first largest, in order seen
        labels.update({path: label for path, (_, label) in best.items()})
    return medians, labels


@dataclass
class Collected:
    manifest: dict
    cells: dict
    """point index -> {variant: Cell}"""
    gpu: str | None
    warnings: list[str] = field(default_factory=list)


def collect(runs, data: dict) -> Collected:
    """Each point's cells from the store ``runs`` for the sweep ``data`` (its manifest)."""
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


def _axis_walks(data: dict, cells: dict):
    """Each axis (with 2+ values) at each combination of the other axes: (axis key, its
    values in order, the others' values, the point's cells at each value)."""
    axes = _axis_values(data)
    by = _index_by_coords(data)
    for ai, (key, values) in enumerate(axes):
        if len(values) < 2:
            continue
        others = [(k, v) for j, (k, v) in enumerate(axes) if j != ai]
        ordered = sorted(values, key=_sort_key)
        for combo in itertools.product(*(v for _, v in others)):
            at = {k: val for (k, _), val in zip(others, combo)}
            rows = [cells[by[tuple(_freeze(dict(at, **{key: value})[k]) for k, _ in axes)]["index"]]
                    for value in ordered]
            yield key, ordered, at, rows


def crossovers(data: dict, cells: dict, noise_pct: float = NOISE_PCT) -> list[Line]:
    """Every axis (with 2+ values) walked at each combination of the other axes."""
    lines = []
    for key, ordered, at, rows in _axis_walks(data, cells):
        walk = []
        for value, row in zip(ordered, rows):
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
# The grids the report lays out
# ---------------------------------------------------------------------------------------


@dataclass
class RegimeGrid:
    """One table of the regime map: the first axis down, the second across, the other
    axes held at ``at``; ``rows`` holds each point's cells (variant -> ``Cell``) and its
    ``Leader`` (None where nothing was measured)."""

    at: dict
    row_key: str
    col_key: str | None
    col_values: list
    rows: list[tuple[object, list[tuple[dict, Leader | None]]]]


def regime_grids(data: dict, cells: dict, noise_pct: float = NOISE_PCT) -> list[RegimeGrid]:
    """The regime map as tables of points, one per combination of the axes after the
    first two."""
    axes = _axis_values(data)
    by = _index_by_coords(data)
    row_key, row_vals = axes[0]
    col_key, col_vals = axes[1] if len(axes) > 1 else (None, [None])
    rest = axes[2:]
    cols = sorted(col_vals, key=_sort_key) if col_key else [None]
    grids = []
    for combo in itertools.product(*(v for _, v in rest)):
        at = {k: val for (k, _), val in zip(rest, combo)}
        rows = []
        for rv in sorted(row_vals, key=_sort_key):
            out = []
            for cv in cols:
                coords = dict(at, **{row_key: rv}, **({col_key: cv} if col_key else {}))
                row = cells[by[tuple(_freeze(coords[k]) for k, _ in axes)]["index"]]
                out.append((row, leader(row, noise_pct)))
            rows.append((rv, out))
        grids.append(RegimeGrid(at, row_key, col_key, cols if col_key else [], rows))
    return grids


@dataclass
class ScalingLine:
    """Metrics along one swept axis with the other axes held at ``at``: per variant,
    per metric key, one value per point of ``values`` (None where not measured)."""

    key: str
    values: list
    at: dict
    series: dict[str, dict[str, list]]


SCALING_METRICS = ("time_us", "tbs", "tflops", "pct_ceiling")
"""The ``Cell`` fields a scaling chart draws."""

def scaling_lines(data: dict, cells: dict, metrics: tuple[str, ...] = SCALING_METRICS,
                  limit: int = 24) -> tuple[list[ScalingLine], int]:
    """Every axis of two or more values, at each combination of the others (at most
    ``limit`` lines), and how many were left out."""
    lines: list[ScalingLine] = []
    left_out = 0
    for key, ordered, at, rows in _axis_walks(data, cells):
        if len(lines) >= limit:
            left_out += 1
            continue
        series = {vid: {k: [getattr(row[vid], k) if row[vid].measured else None for row in rows]
                        for k in metrics} for vid in data["variants"]}
        lines.append(ScalingLine(key, ordered, at, series))
    return lines, left_out


@dataclass
class Findings:
    """What a sweep's results decide, for the report to format."""

    collected: Collected
    noise_pct: float
    lines: list[Line]
    """Each axis walked at each value of the others (``crossovers``)."""
    grids: list[RegimeGrid]
    scaling: list[ScalingLine]
    left_out: int
    """Scaling lines beyond the limit (not drawn)."""
    regime_data: dict


def findings(col: Collected, noise_pct: float = NOISE_PCT, scaling: bool = True) -> Findings:
    """The crossovers, the regime map and (``scaling``) the scaling lines of ``col``."""
    data = col.manifest
    lines = crossovers(data, col.cells, noise_pct)
    drawn, left_out = scaling_lines(data, col.cells) if scaling else ([], 0)
    return Findings(col, noise_pct, lines, regime_grids(data, col.cells, noise_pct), drawn, left_out,
                    regime_json(col, lines, noise_pct))
