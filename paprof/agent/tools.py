"""What each tool of ``paprof mcp`` does, as plain functions over the library the CLI
calls (no MCP here: ``paprof.agent.server`` registers them).

Each function takes the run store it reads (``runs``: the folder the client named, or
the server's default) and returns a JSON-ready dict, bounded; paprof's ``UserError``
propagates with its one-line message. Tools that write take the path to write and
``force``: an existing file is replaced only with ``force``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from paprof.agent import summary
from paprof.errors import UserError

ROWS = 50
"""Rows a table answer holds unless the client asks for fewer (or more, up to ``MAX_ROWS``)."""

MAX_ROWS = 500

IDEA_CHARS = 160
"""A variant's idea is cut to this many characters in the family listing."""


def _cut(text: str | None, width: int = IDEA_CHARS) -> str | None:
    if text is None or len(text) <= width:
        return text
    return text[:width - 3].rstrip() + "..."


def _rows(limit: int | None) -> int:
    limit = ROWS if limit is None else limit
    if not 1 <= limit <= MAX_ROWS:
        raise UserError(f"max_rows must be 1 to {MAX_ROWS}, got {limit}")
    return limit


def _within(path: Path, store: Path) -> str:
    """``path`` relative to the store it is in (as the client may name it again)."""
    path, root = path.resolve(), store.resolve()
    return str(path.relative_to(root)) if path.is_relative_to(root) else str(path)


def refuse_existing(path: Path, force: bool) -> None:
    """A tool writes a new file, or replaces one only when told (``force``)."""
    if (path.exists() or path.is_symlink()) and not force:
        raise UserError(f"{path} exists; choose another path or pass force=true to replace it")


def families() -> dict:
    """The kernel families visible here (paprof list) and their variants."""
    from paprof import registry

    out = []
    for fam in registry.discover().values():
        try:
            shape = fam.params().spec()
        except UserError as err:  # a broken family says why, as paprof list does
            out.append({"family": fam.name, "origin": fam.origin, "error": str(err)})
            continue
        out.append({"family": fam.name, "origin": fam.origin, "summary": _cut(fam.summary),
                    "default_shape": shape,
                    "variants": [{"id": v.id, "kind": v.kind, "idea": _cut(v.idea)}
                                 for v in fam.variants]})
    return {"families": out}


ORDERS = ("path", "slowest")


def _event_us(run) -> float:
    value = (run.sidecar or {}).get("duration_us_event")
    return value if isinstance(value, (int, float)) else float("-inf")


def runs(store: Path, variant: str | None = None, max_rows: int | None = None,
         order: str = "path") -> dict:
    """The runs of the store: variant, shape, GPU, when, and the event-timed duration;
    in the store's order, or the slowest first (``order="slowest"``; runs without an
    event time last)."""
    from paprof.api import find_runs

    if order not in ORDERS:
        raise UserError(f"order must be one of {', '.join(ORDERS)}, got {order!r}")
    limit = _rows(max_rows)
    found = [r for r in find_runs(store)
             if variant is None or variant in (r.variant, r.name)]
    if order == "slowest":
        found.sort(key=_event_us, reverse=True)
    rows = []
    for r in found[:limit]:
        side = r.sidecar or {}
        rows.append({"name": r.name, "family": r.family, "variant": r.variant,
                     "shape": r.shape_slug, "gpu": side.get("gpu") or r.gpu_slug,
                     "created": r.created, "duration_us_event": side.get("duration_us_event"),
                     "verified": side.get("verified"),
                     "report": _within(r.report, store)})
    return {"runs_folder": str(store), "total": len(found), "runs": rows,
            "left_out": len(found) - len(rows)}


def table(store: Path, per_variant: bool = True, columns: list[str] | None = None,
          max_rows: int | None = None, step_range: str | None = None) -> dict:
    """``paprof table``'s rows (the key columns, or ``columns``), at most ``max_rows``."""
    from paprof.api import export
    from paprof.api import load_reports, variant_rows

    limit = _rows(max_rows)
    df = load_reports([store], step_range=step_range)
    if per_variant:
        df = variant_rows(df).drop(columns=["launch"])
    chosen = export.parse_columns(tuple(columns or ()), df)
    shown = chosen if chosen is not None else [c for c in export.TEXT_COLUMNS if c in df]
    rows = json.loads(df[shown].head(limit).to_json(orient="records"))
    return {"runs_folder": str(store), "per_variant": per_variant, "columns": shown,
            "total": len(df), "rows": rows, "left_out": max(0, len(df) - limit),
            "notes": list(df.attrs.get("notes", ()))}


SUMMARY_COLUMNS = ("kernel", "launch", "duration_us", "bottleneck", "bottleneck_evidence",
                   "top_stall_reason", "dram_throughput_pct", "sm_throughput_pct",
                   "achieved_occupancy_pct", "registers_per_thread", "grid_size", "block_size")
"""The columns of a report's summary (the resource), per kernel launch."""


def report_summary(report: Path, store: Path, max_rows: int | None = None) -> dict:
    """One report of ``store`` in brief: its variant, shape, GPU, the step's time and
    bottleneck, and per kernel launch (at most ``max_rows``) the key columns."""
    from paprof.api import load_reports, variant_rows

    limit = _rows(max_rows)
    df = load_reports([report])
    step = json.loads(variant_rows(df)[["variant", "family", "shape", "gpu", "duration_us",
                                        "bottleneck"]].head(1).to_json(orient="records"))
    shown = [c for c in SUMMARY_COLUMNS if c in df]
    return {"report": _within(report, store), "step": step[0] if step else None,
            "kernels": json.loads(df[shown].head(limit).to_json(orient="records")),
            "left_out": max(0, len(df) - limit)}


def explanation(store: Path, variants: list[str], shape: str | None = None,
                cross: bool = False, step_range: str | None = None) -> dict:
    """The explanation document (``paprof compare --json``) of ``variants``, in full."""
    from paprof.api import STDOUT, write_report

    done = write_report(list(variants), runs=store, out=None, shape=shape, cross=cross,
                        step_range=step_range, json_out=STDOUT)
    return json.loads(done.json_text)


def compare(store: Path, variants: list[str], shape: str | None = None, cross: bool = False,
            step_range: str | None = None, **limits) -> dict:
    """The explanation of ``variants`` in the order given, summarised."""
    return summary.explanation(explanation(store, variants, shape, cross, step_range), **limits)


def _cause(key: tuple, c) -> dict:
    """The gate's cause of one entry's change (``paprof.gate.cause``): its paragraph and
    its leading terms, each with its leading counters."""
    family, variant, shape = key
    return {"variant": f"{family}/{variant}" if family else variant, "shape": shape,
            "outcome": c.outcome, "paragraph": c.line(), "change": c.change,
            "terms": [{**t, "counters": (t.get("counters") or [])[:summary.COUNTERS]}
                      for t in c.terms[:summary.TERMS]]}


def _verdict(verdict, max_rows: int | None) -> dict:
    limit = _rows(max_rows)
    changed = [r for r in verdict.results if r.outcome != "same"]
    return {
        "passed": verdict.passed, "exit_code": verdict.exit_code, "summary": verdict.summary,
        "regressions": [r.message for r in verdict.regressions],
        "causes": [_cause(key, c) for key, c in verdict.causes.items()],
        "results": [{"variant": r.name, "shape": r.shape, "metric": r.metric,
                     "baseline": r.fmt_stat(r.baseline), "now": r.fmt_stat(r.now),
                     "change": r.delta_text, "allowed": r.allowed_text, "outcome": r.outcome}
                    for r in changed[:limit]],
        "unchanged": len(verdict.results) - len(changed),
        "left_out": max(0, len(changed) - limit),
        "notes": list(verdict.notes),
    }


def _settings(metrics, tolerances, allow_mismatch: bool, ratchet: bool = False):
    from paprof.api import gate

    return gate.Settings(metrics=tuple(metrics or ()) or None,
                         tolerances=dict(gate.parse_tolerance(t) for t in tolerances or ()),
                         allow_mismatch=allow_mismatch, ratchet=ratchet)


def check(store: Path, baseline: Path, metrics: list[str] | None = None,
          tolerances: list[str] | None = None, allow_mismatch: bool = False,
          max_rows: int | None = None) -> dict:
    """``paprof check``: the stored runs against ``baseline``."""
    from paprof.api import gate
    from paprof.api import Scan

    made = gate.load_baseline(baseline)
    if made.gate == "static":
        raise UserError(f"{baseline} is a static baseline: check it with check_static")
    from paprof.api import cause

    names = sorted({e.name for e in made.entries})
    kernels, current = gate.load_runs(store, variants=names, scan=Scan())
    verdict = gate.compare_to_baseline(made, current,
                                       _settings(metrics, tolerances, allow_mismatch))
    cause.attach(verdict, kernels, current)
    return _verdict(verdict, max_rows)


def check_static(baseline: Path, ratchet: bool = False, max_rows: int | None = None) -> dict:
    """``paprof check --static``: compile the baseline's variants now, gate the cubins."""
    from paprof.api import static
    from paprof.api import gate

    made = gate.load_baseline(baseline)
    if made.gate != "static":
        raise UserError(f"{baseline} is not a static baseline (paprof baseline update --static)")
    current, said = static.current_for(made)
    verdict = gate.compare_to_baseline(made, current, _settings((), (), False, ratchet))
    verdict.notes.extend([*said, static.REACH_NOTE])
    return _verdict(verdict, max_rows)


def baseline(store: Path, out: Path, variants: list[str] | None = None,
             metrics: list[str] | None = None, force: bool = False) -> dict:
    """``paprof baseline update``: the baseline of the stored runs, written to ``out``."""
    from paprof.api import gate
    from paprof.api import Scan, input_files, refuse_inside

    refuse_existing(out, force)
    refuse_inside(out, store, "the baseline")
    scan = Scan()
    inputs = input_files([store], scan)
    gate.check_baseline_target(out, force, inputs)
    made = gate.make_baseline(store, metrics=tuple(metrics or ()) or None,
                                 variants=variants, scan=scan)
    gate.save_baseline(made, out, force=force, inputs=inputs)
    return {"wrote": str(out), "entries": [
        {"variant": e.name, "shape": e.shape, "gpu": e.provenance.gpu,
         "metrics": {m: gate.fmt_value(s.value, gate.unit(m)) for m, s in e.metrics.items()}}
        for e in made.entries]}


def baseline_static(out: Path, family: str | None = None, shape: str | None = None,
                    variants: list[str] | None = None, force: bool = False,
                    arch: str | None = None) -> dict:
    """``paprof baseline update --static``: compile the family's variants, record their
    registers, spills, memory and SASS mix in ``out``."""
    from paprof import registry
    from paprof.api import static
    from paprof.api import gate

    refuse_existing(out, force)
    gate.check_baseline_target(out, force)
    fam = registry.family_for(variants, family)
    made, notes = static.make_static_baseline(fam, fam.parse(shape), variants or (), arch)
    gate.save_baseline(made, out, force=force)
    return {"wrote": str(out), "kernels": len(made.entries),
            "compiler": made.entries[0].provenance.compiler if made.entries else None,
            "notes": [*notes, static.REACH_NOTE]}


def sweep_report(store: Path, out: Path, name: str | None = None, force: bool = False) -> dict:
    """``paprof sweep-report``: the HTML report at ``out``, its Markdown and regime JSON
    beside it (``out`` with .md and .regime.json); the crossovers in the answer."""
    from paprof.api import regime_path_for, write_sweep_report

    markdown = out.with_suffix(".md")
    regime = regime_path_for(out)
    for path in (out, markdown, regime):
        refuse_existing(path, force)
    done = write_sweep_report(store, out, markdown, regime, name=name, force=force)
    ctx = done.context
    return {"wrote": [str(p) for p in (done.html, done.markdown, done.regime) if p],
            "crossovers": list(ctx.changes), "warnings": list(ctx.warnings)}


def gpu_refusal() -> str | None:
    """Why ``run`` and ``bench`` cannot measure here (no NVIDIA GPU, no ncu), or None."""
    from paprof.api import query_gpus

    if shutil.which("nvidia-smi") is None or not query_gpus():
        return ("no NVIDIA GPU here (nvidia-smi is missing or lists none): run and bench "
                "measure on a GPU; compare, table and check read stored runs anywhere")
    return None


def _chosen(variants: list[str], family: str | None, shape: str | None):
    from paprof import registry

    chosen = registry.resolve(tuple(variants), family)
    fam = registry.family_of(chosen[0])
    params = fam.parse(shape)
    registry.check_params(chosen, params)
    return chosen, fam, params


def run(store: Path, variants: list[str], family: str | None = None, shape: str | None = None,
        preset: str = "default", force: bool = False) -> dict:
    """``paprof run``: verify, then profile ``variants`` under ncu into the store (a run
    already there again only with ``force``, as ``paprof run --force``)."""
    from paprof.api import NcuSettings
    from paprof.api import find_ncu
    from paprof.api import profile_variants

    why = gpu_refusal()
    if why:
        raise UserError(why)
    find_ncu()  # UserError saying how to get it
    chosen, fam, params = _chosen(variants, family, shape)
    outcomes = profile_variants(chosen, params, NcuSettings(preset=preset), store, force,
                                family=fam)
    return {"runs": [{"variant": o.variant.name, "report": str(o.run.report) if o.run else None,
                      "failed": o.failed, "skipped": o.skipped,
                      "duration_us_event": (o.run.sidecar or {}).get("duration_us_event")
                      if o.run else None} for o in outcomes]}


def bench(variants: list[str], family: str | None = None, shape: str | None = None,
          launches: int = 100, rounds: int = 2) -> dict:
    """``paprof bench``: verify, then time ``variants`` with CUDA events."""
    from paprof.api import run_bench

    why = gpu_refusal()
    if why:
        raise UserError(why)
    chosen, fam, params = _chosen(variants, family, shape)
    return run_bench(fam, chosen, params, launches, rounds).to_dict()
