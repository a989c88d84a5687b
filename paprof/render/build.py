"""``paprof compare`` as a library call: variants in, report files out.

``write_report(["v2", "v3"], runs="examples/h200")`` resolves each variant (a run-store id
or an ``.ncu-rep`` path: ``paprof.read.resolve``), has the analysis compare and finish
them (``paprof.explain.compare_runs``), builds the explanation and the context once and
writes the HTML report (and the Markdown and JSON ones when asked). Nothing here computes.

Overwriting: re-running compare is the normal way to refresh a report, so a file that
paprof itself wrote (the HTML generator tag, or the Markdown report's first-line marker)
is replaced and the result says so (``ReportFiles.overwrote``). Any other existing file
is left alone with a ``UserError`` unless ``force`` is set; so is anything that is not a
regular file, and the compared reports themselves (``paprof.outputs``).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from paprof import outputs
from paprof.read.resolve import DEFAULT_RUNS, resolve_variants  # noqa: F401  (callers' names)
from paprof.errors import UserError
from paprof.read.store import input_files, refuse_inside
from paprof.explain.compare_runs import finished_comparison
from paprof.explain.explanation import explanation

DEFAULT_OUT = Path("paprof-report.html")
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
    html_text: str | None = None
    """The HTML report when it went to stdout (``out="-"``)."""


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
    """Compare ``specs`` and write the report(s). ``"-"`` returns an output as text instead
    of writing a file (``out``: ``ReportFiles.html_text``; ``markdown``:
    ``ReportFiles.markdown_text``); ``out=None`` writes no HTML; ``json_out`` also writes
    the explanation as data (``paprof.explain.explanation``; "-": ``ReportFiles.json_text``).
    ``baseline`` (a spec like those of ``specs``) compares every variant with it
    (``paprof.explain.verdict.against``) instead of telling the ordered list as a chain."""
    from paprof.render.html import GENERATOR_MARK
    from paprof.render.markdown import MARK

    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    out_path = Path(out) if out not in (None, STDOUT) else None
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

    for path in (out_path, md_path, json_path):
        refuse_inside(path, runs, "the report's output")
    replacing = [
        path for path, mark in ((out_path, GENERATOR_MARK), (md_path, MARK))
        if path is not None and outputs.check_target(
            path, what="a paprof report", mark=mark, force=force, inputs=input_files(paths))
    ]
    timings["resolve"] = time.perf_counter() - t0


    cmp = finished_comparison(paths, thresholds=thresholds, cross=cross, step_range=step_range,
                              baseline=baseline is not None, timings=timings)

    from paprof.render.context import build_context

    t = time.perf_counter()
    explained = explanation(cmp)
    ctx = build_context(cmp, charts=out is not None, generated=generated, explained=explained)
    timings["context"] = time.perf_counter() - t

    t = time.perf_counter()
    from paprof.render.html import render_html

    md_text = None
    html_text = outputs.text_for_stdout(None if out is None else out_path or STDOUT,
                                        lambda: render_html(ctx))
    if markdown is not None:
        from paprof.render.markdown import render_markdown

        md_text = render_markdown(ctx)
        if md_path is not None:
            outputs.write(md_path, md_text)
    json_text = None
    if json_out is not None:
        import json

        json_text = json.dumps(explained, indent=1) + "\n"
        if json_path is not None:
            if json_path.exists() and not force:
                raise UserError(f"{json_path} exists: pass --force to replace it")
            outputs.write(json_path, json_text)
    timings["render"] = time.perf_counter() - t
    timings["total"] = time.perf_counter() - t0
    return ReportFiles(out_path, md_path, md_text, replacing, paths, cmp, ctx, timings,
                       json_path, json_text, html_text)
