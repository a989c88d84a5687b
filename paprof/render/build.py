"""``paprof compare``'s render stage: a told comparison and its explanation in, the
report's outputs out.

``render_outputs(cmp, explained, out=...)`` builds the context once (``paprof.render.context``,
from the model's comparison and the explanation document, ``paprof.explain.explanation``)
and renders the HTML report, the Markdown one and the JSON document that were asked for,
writing those named by a path. It reads no run and explains nothing: the stages before it
did (``paprof.compare_flow`` calls each stage once, in order). Nothing here computes.

Overwriting is decided before any stage runs (``paprof.compare_flow``): re-running compare
is the normal way to refresh a report, so a file that paprof itself wrote (the HTML
generator tag, or the Markdown report's first-line marker) is replaced; any other
existing file is left alone with a ``UserError`` unless ``force`` is set.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from paprof import outputs
from paprof.errors import UserError
from paprof.render.context import build_context
from paprof.render.html import GENERATOR_MARK, render_html
from paprof.render.markdown import MARK, render_markdown

STDOUT = outputs.STDOUT
MARKS = {"html": GENERATOR_MARK, "markdown": MARK}
"""The mark that says paprof wrote a report file (so that compare may replace it)."""


@dataclass
class ReportFiles:
    """What ``paprof.compare_flow.write_report`` did."""

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
    """Seconds spent per stage: resolve, load, compare, source, explain, context (with
    charts), render, total."""
    json: Path | None = None
    """The explanation written as JSON (None when not asked for, or sent to stdout)."""
    json_text: str | None = None
    html_text: str | None = None
    """The HTML report when it went to stdout (``out="-"``)."""


@dataclass
class Rendered:
    """What ``render_outputs`` made: the context and the texts that go to stdout."""

    context: object
    html_text: str | None
    markdown_text: str | None
    json_text: str | None


def render_outputs(cmp, explained: dict, *, out=None, markdown=None, json_out=None,
                   force: bool = False, generated: str | None = None,
                   timings: dict | None = None) -> Rendered:
    """Render the told comparison ``cmp`` with its explanation document ``explained``:
    the HTML report at ``out``, the Markdown one at ``markdown``, the document as JSON at
    ``json_out`` (each None: not made; ``"-"``: returned as text instead of written).
    ``timings`` (when given) gets the seconds spent on the context and the rendering."""
    timings = {} if timings is None else timings
    t = time.perf_counter()
    ctx = build_context(cmp, charts=out is not None, generated=generated, explained=explained)
    timings["context"] = time.perf_counter() - t

    t = time.perf_counter()
    out_path = Path(out) if out not in (None, STDOUT) else None
    html_text = outputs.text_for_stdout(None if out is None else out_path or STDOUT,
                                        lambda: render_html(ctx))
    md_text = None
    if markdown is not None:
        md_text = render_markdown(ctx)
        if markdown != STDOUT:
            outputs.write(Path(markdown), md_text)
    json_text = None
    if json_out is not None:
        json_text = json.dumps(explained, indent=1) + "\n"
        if json_out != STDOUT:
            json_path = Path(json_out)
            if json_path.exists() and not force:
                raise UserError(f"{json_path} exists: pass --force to replace it")
            outputs.write(json_path, json_text)
    timings["render"] = time.perf_counter() - t
    return Rendered(ctx, html_text, md_text, json_text)
