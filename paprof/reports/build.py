"""``paprof compare`` as a library call: variants in, report files out.

``write_report(["v2", "v3"], runs="examples/h200")`` resolves each variant (a run-store id
or an ``.ncu-rep`` path), loads the reports, compares them, builds the context once and
writes the HTML report (and the Markdown one when asked).

Overwriting: re-running compare is the normal way to refresh a report, so a file that
paprof itself wrote (the HTML generator tag, or the Markdown report's first-line marker)
is replaced and the result says so (``ReportFiles.overwrote``). Any other existing file
is left alone with a ``UserError`` unless ``force`` is set; so is anything that is not a
regular file, and the compared reports themselves (``paprof.outputs``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from paprof import outputs
from paprof.errors import UserError

DEFAULT_RUNS = Path("runs")
DEFAULT_OUT = Path("paprof-report.html")
REPORT_SUFFIX = ".ncu-rep"
STDOUT = "-"


@dataclass
class ReportFiles:
    """What ``write_report`` did."""

    html: Path | None
    markdown: Path | None
    """None when not asked for, or when it went to stdout (``markdown_text`` holds it)."""
    markdown_text: str | None
    overwrote: list[Path]
    """Earlier paprof reports that were replaced."""
    reports: list[Path]
    """The ``.ncu-rep`` files compared, in order."""
    comparison: object
    context: object
    timings: dict[str, float] = field(default_factory=dict)
    """Seconds spent per stage: resolve, load, compare, context (with charts), render."""
    json: Path | None = None
    """The explanation written as JSON (None when not asked for, or sent to stdout)."""
    json_text: str | None = None


class _Store:
    """The runs of one store, scanned on first use and once per ``resolve_variants`` call
    (a store of 10,000 runs was rescanned once per variant)."""

    def __init__(self, root):
        self.root, self._runs = root, None

    def runs(self):
        if self._runs is None:
            from paprof.profiler import store

            self._runs = store.find_runs(self.root)
        return self._runs


def _shape_slug(shape: str | None, runs: _Store, specs) -> str | None:
    """A ``--shape`` value as the store's slug: a slug as it is; ``KEY=VALUE,...`` parsed
    by the family of the first run-store id (found in the store, so only its parameters
    class is imported, never kernel code)."""
    if not shape:
        return None
    if "=" not in shape:
        return shape
    from paprof import registry

    family = None
    for spec in specs:
        if spec.endswith(REPORT_SUFFIX) or Path(spec).is_file():
            continue
        fam, _, vid = spec.rpartition("/")
        held = [r for r in runs.runs() if r.variant == vid and (not fam or r.family == fam)]
        family = fam or next((r.family for r in held if r.family), None)
        break
    if family is None:
        raise UserError(f"--shape {shape}: give the shape as its slug (the file name in the "
                        "run store), or name a run-store variant whose family can parse it")
    try:
        return registry.family(family).parse(shape).slug()
    except UserError:
        if family in registry.families():
            raise
    # The family is not installed here (a colleague's runs): the stored runs' own
    # parameters say which slug the spec names.
    given = _spec_items(shape)
    slugs = {r.sidecar.get("shape_slug") for r in runs.runs()
             if r.family == family and isinstance(r.sidecar, Mapping)
             and given.items() <= _spec_items(str(r.sidecar.get("shape") or "")).items()}
    slugs.discard(None)
    if len(slugs) == 1:
        return slugs.pop()
    raise UserError(f"--shape {shape}: family {family} is not installed here and "
                    + (f"{len(slugs)} stored shapes match it ({', '.join(sorted(slugs)[:4])}): "
                       "give more parameters or the slug" if slugs else
                       "no stored run of it has those parameters"))


def _spec_items(spec: str) -> dict[str, str]:
    """``KEY=VALUE,...`` as a dict of strings (a family's own spec, compared as text)."""
    out = {}
    for part in spec.split(","):
        key, eq, value = part.partition("=")
        if eq:
            out[key.strip()] = value.strip()
    return out


def resolve_variants(specs: list[str], runs: Path | str = DEFAULT_RUNS, shape: str | None = None) -> list[Path]:
    """Each spec as a report path, in order.

    A spec ending in ``.ncu-rep`` (or naming an existing file) is a path. Anything else is
    a run-store id (``v3`` or ``paged_decode/v3``): the latest run of it in ``runs``, at
    ``shape`` (a slug or a ``--shape`` spec) when given; otherwise at the first variant's
    shape and GPU where the store has that, so that one command compares like with like.
    """
    specs = list(specs)
    if len(specs) < 2:
        raise UserError(f"compare needs at least 2 variants, got {len(specs)}: "
                        "e.g. paprof compare v2 v3 --runs examples/h200")
    from paprof.profiler import store

    scanned = _Store(runs)
    wanted_shape = _shape_slug(shape, scanned, specs)
    first_run = None
    paths: list[Path] = []
    chosen: set = set()  # the shapes of the runs the ids resolved to
    for spec in specs:
        path = Path(spec)
        if spec.endswith(REPORT_SUFFIX) or path.is_file():
            if not path.is_file():
                raise UserError(f"no such report: {spec}")
            paths.append(path)
            continue
        if first_run is None:
            run = store.latest(runs, spec, shape_slug=wanted_shape, runs=scanned.runs())
            first_run = run
        else:
            run = None
            tries = [(wanted_shape or first_run.shape_slug, first_run.gpu_slug),
                     (wanted_shape or first_run.shape_slug, None)]
            for shape_slug, gpu in tries:
                try:
                    run = store.latest(runs, spec, shape_slug=shape_slug, gpu=gpu, runs=scanned.runs())
                    break
                except UserError:
                    continue
            if run is None:
                # Not at the first variant's shape: the latest of any shape (the report
                # then warns that the shapes differ), or the store's own error message.
                run = store.latest(runs, spec, shape_slug=wanted_shape, runs=scanned.runs())
        paths.append(Path(run.report))
        chosen.add(run.shape_slug)
    held = {}
    for spec in specs:
        if not (spec.endswith(REPORT_SUFFIX) or Path(spec).is_file()):
            fam, _, vid = spec.rpartition("/")
            held[spec] = {r.sidecar.get("shape_slug") for r in scanned.runs()
                          if r.variant == vid and (not fam or r.family == fam)
                          and isinstance(r.sidecar, Mapping)}
    if not wanted_shape and len(held) > 1:
        common = set.intersection(*held.values()) - {None}
        if len(chosen) > 1 and common:
            raise UserError("these variants' latest runs are at different shapes; shapes they "
                            "all have: " + ", ".join(sorted(common)[:6])
                            + " (choose one with --shape, or pass --cross)")
    seen: dict[str, str] = {}
    for spec, path in zip(specs, paths):
        key = os.path.realpath(path)
        if key in seen:
            raise UserError(f"{seen[key]} and {spec} name the same report ({path}); compare different runs")
        seen[key] = spec
    return paths


def attach_hotspots(cmp) -> None:
    """Read the source hot spots (``cmp.hotspots``) of the runs profiled with SourceCounters;
    without any, ``cmp.hotspots`` stays None and the report has no hot-spot section."""
    from paprof import source_text
    from paprof.analysis import source

    cmp.hotspots = source.for_comparison(cmp, lambda v: source_text.for_run(v.sidecar))


def write_report(
    specs: list[str],
    runs: Path | str = DEFAULT_RUNS,
    out: Path | str | None = DEFAULT_OUT,
    markdown: Path | str | None = None,
    *,
    shape: str | None = None,
    force: bool = False,
    generated: str | None = None,
    thresholds=None,
    cross: bool = False,
    step_range: str | None = None,
    json_out: Path | str | None = None,
    baseline: str | None = None,
) -> ReportFiles:
    """Compare ``specs`` and write the report(s). ``markdown="-"`` returns the Markdown in
    ``ReportFiles.markdown_text`` instead of writing a file; ``out=None`` writes no HTML;
    ``json_out`` also writes the explanation as data (``paprof.analysis.explanation``; "-":
    ``ReportFiles.json_text``). ``baseline`` (a spec like those of ``specs``) compares
    every variant with it (``paprof.analysis.verdict.against``) instead of telling the
    ordered list as a chain."""
    from paprof.reports.html import GENERATOR_MARK
    from paprof.reports.markdown import MARK

    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    out_path = Path(out) if out is not None else None
    md_path = Path(markdown) if markdown not in (None, STDOUT) else None
    if out_path is not None and md_path is not None and os.path.realpath(out_path) == os.path.realpath(md_path):
        raise UserError(f"--out and --markdown both name {out_path}")
    json_path = Path(json_out) if json_out not in (None, STDOUT) else None
    named = [p for p in (out_path, md_path, json_path) if p is not None]
    if len({os.path.realpath(p) for p in named}) < len(named):
        raise UserError("--out, --markdown and --json must name different files")
    if baseline is not None:
        specs = [baseline] + [s for s in specs if s != baseline]
    paths = resolve_variants(specs, runs, shape)
    from paprof.profiler.store import input_files

    replacing = [
        path for path, mark in ((out_path, GENERATOR_MARK), (md_path, MARK))
        if path is not None and outputs.check_target(
            path, what="a paprof report", mark=mark, force=force, inputs=input_files(paths))
    ]
    timings["resolve"] = time.perf_counter() - t0

    from paprof.analysis.compare import THRESHOLDS, compare
    from paprof.analysis.load import load_reports, variant_rows

    t = time.perf_counter()
    df = load_reports(paths, step_range=step_range)
    summed = variant_rows(df)
    timings["load"] = time.perf_counter() - t

    t = time.perf_counter()
    cmp = compare(df, summed, order=paths, thresholds=thresholds or THRESHOLDS, cross=cross)
    if len(cmp.variants) < 2:
        raise UserError(f"compare needs at least 2 variants; the reports given hold {len(cmp.variants)}")
    if baseline is not None:
        from paprof.analysis.verdict import against

        cmp = against(cmp, cmp.variants[0].label)
    timings["compare"] = time.perf_counter() - t

    t = time.perf_counter()
    attach_hotspots(cmp)
    timings["source"] = time.perf_counter() - t

    from paprof.reports.context import build_context

    t = time.perf_counter()
    ctx = build_context(cmp, charts=out_path is not None, generated=generated)
    timings["context"] = time.perf_counter() - t

    t = time.perf_counter()
    md_text = None
    if out_path is not None:
        from paprof.reports.html import render_html

        outputs.write(out_path, render_html(ctx))
    if markdown is not None:
        from paprof.reports.markdown import render_markdown

        md_text = render_markdown(ctx)
        if md_path is not None:
            outputs.write(md_path, md_text)
    json_text = None
    if json_out is not None:
        import json

        from paprof.analysis.explanation import explanation

        json_text = json.dumps(explanation(cmp), indent=1) + "\n"
        if json_path is not None:
            if json_path.exists() and not force:
                raise UserError(f"{json_path} exists: pass --force to replace it")
            outputs.write(json_path, json_text)
    timings["render"] = time.perf_counter() - t
    timings["total"] = time.perf_counter() - t0
    return ReportFiles(out_path, md_path, md_text, replacing, paths, cmp, ctx, timings,
                       json_path, json_text)
