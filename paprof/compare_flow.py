"""``paprof compare`` as a library call: each stage called once, in the order data flows.

``write_report(["v2", "v3"], runs="examples/h200")`` checks the options, then

1. **read** (``paprof.read.resolve``): each variant (a run-store id or an ``.ncu-rep``
   path) resolved into a run, its report's path and its record read once; the outputs'
   targets checked against them (a file paprof did not write is left alone unless
   ``force``, and so are the compared reports);
2. **model** (``paprof.model.analysis.analyse``): the runs loaded into the tidy table,
   compared and completed in numbers (steps, roofline, ledgers, stalls, hot spots);
3. **explain** (``paprof.explain.compare_runs.explain``): every step told, the
   explanation document made;
4. **render** (``paprof.render.build.render_outputs``): the HTML, Markdown and JSON from
   the explanation document and the model's comparison.

No stage calls back into one before it (``tests/test_data_flow.py`` follows a real
comparison). The CLI's ``compare``, the notebook's ``paprof.compare`` and the MCP tools
take these through ``paprof.api``. Overwriting: re-running compare is the normal way to
refresh a report, so a file that paprof itself wrote (the HTML generator tag, or the
Markdown report's first-line marker) is replaced and the result says so
(``ReportFiles.overwrote``).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from paprof import api, outputs
from paprof.errors import UserError

DEFAULT_OUT = Path("paprof-report.html")
STDOUT = outputs.STDOUT


def _sources_for(variant):
    """A variant's source files, for its hot spots (``paprof.measure.source_text``: only
    the measuring side knows which files a variant was built from)."""
    return api.source_lines(variant.sidecar)


def finished_comparison(runs, *, thresholds=None, cross: bool = False,
                        step_range: str | None = None, baseline: bool = False,
                        sources: bool = True, timings: dict | None = None):
    """The comparison of ``runs`` (resolved runs, or report paths), measured by the model
    and told by the explain stage (``Comparison.finished``), as ``paprof compare`` reads
    it: a chain in their order, or with ``baseline`` every variant against the first.
    ``sources``: read the hot spots' source lines."""
    cmp = api.analyse(runs, thresholds=thresholds, cross=cross, step_range=step_range,
                      baseline=baseline, sources_for=_sources_for if sources else None,
                      timings=timings)
    return api.finish(cmp)


def _output_paths(out, markdown, json_out) -> tuple[Path | None, Path | None, Path | None]:
    """The files the options name (None: not asked for, or stdout); a ``UserError`` when
    two name one file."""
    out_path = Path(out) if out not in (None, STDOUT) else None
    md_path = Path(markdown) if markdown not in (None, STDOUT) else None
    if out_path is not None and md_path is not None and os.path.realpath(out_path) == os.path.realpath(md_path):
        raise UserError(f"--out and --markdown both name {out_path}")
    json_path = Path(json_out) if json_out not in (None, STDOUT) else None
    named = [p for p in (out_path, md_path, json_path) if p is not None]
    if len({os.path.realpath(p) for p in named}) < len(named):
        raise UserError("--out, --markdown and --json must name different files")
    return out_path, md_path, json_path


def write_report(
    specs: list[str],
    runs: Path | str | None = None,
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
):
    """Compare ``specs`` and write the report(s) (a ``paprof.render.build.ReportFiles``).
    ``"-"`` returns an output as text instead of writing a file (``out``:
    ``ReportFiles.html_text``; ``markdown``: ``ReportFiles.markdown_text``); ``out=None``
    writes no HTML; ``json_out`` also writes the explanation as data
    (``paprof.explain.explanation``; "-": ``ReportFiles.json_text``). ``baseline`` (a spec
    like those of ``specs``) compares every variant with it
    (``paprof.explain.verdict.against``) instead of telling the ordered list as a chain.
    ``runs``: the run store (default ``paprof.read.resolve.DEFAULT_RUNS``)."""
    runs = api.DEFAULT_RUNS if runs is None else runs
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    out_path, md_path, json_path = _output_paths(out, markdown, json_out)
    if baseline is not None:
        specs = [baseline] + [s for s in specs if s != baseline]

    # read: the runs, each record read once; the outputs' targets checked against them
    resolved = api.resolve_variants(specs, runs, shape)
    reports = [run.report for run in resolved]
    for path in (out_path, md_path, json_path):
        api.refuse_inside(path, runs, "the report's output")
    inputs = api.input_files(reports)
    replacing = [
        path for path, mark in ((out_path, api.REPORT_MARKS["html"]),
                                (md_path, api.REPORT_MARKS["markdown"]))
        if path is not None and outputs.check_target(
            path, what="a paprof report", mark=mark, force=force, inputs=inputs)
    ]
    timings["resolve"] = time.perf_counter() - t0

    # model: the tables and the comparison's numbers
    cmp = api.analyse(resolved, thresholds=thresholds, cross=cross, step_range=step_range,
                      baseline=baseline is not None, sources_for=_sources_for, timings=timings)

    # explain: every word, in the explanation document
    t = time.perf_counter()
    explained = api.explain(cmp)
    timings["explain"] = time.perf_counter() - t

    # render: from the explanation document and the model's comparison only
    done = api.render_outputs(cmp, explained, out=out, markdown=markdown, json_out=json_out,
                              force=force, generated=generated, timings=timings)
    timings["total"] = time.perf_counter() - t0
    return api.ReportFiles(out_path, md_path, done.markdown_text, replacing, reports, cmp,
                           done.context, timings, json_path, done.json_text, done.html_text)
