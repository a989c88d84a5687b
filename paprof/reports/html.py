"""The HTML report: the context through ``templates/report.html.j2``, autoescaped.

The result is one self-contained file: styles and the chart PNGs are inline, a Content
Security Policy forbids fetching anything, and every value goes through Jinja's
autoescape (a kernel called ``<script>`` prints as text).
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from paprof.reports.context import ReportContext

TEMPLATES = Path(__file__).resolve().parent / "templates"

GENERATOR_MARK = '<meta name="generator" content="paprof'
"""Every HTML report carries this near its top; ``paprof compare`` overwrites a file that
has it without asking (see ``paprof.reports.build``)."""


def css_class(value) -> str:
    """A CSS class name from a label: ``l2/l1-bound`` -> ``l2-l1-bound``."""
    if value is None:
        return "unknown"
    return re.sub(r"[^a-z0-9]+", "-", str(value).lower()).strip("-") or "unknown"


def word_breaks(value):
    """Escaped text with a ``<wbr>`` after each ``_``, ``/`` or ``:`` so that long kernel
    names wrap at their parts rather than mid-word."""
    from markupsafe import Markup, escape

    text = str(escape("" if value is None else value))
    return Markup(re.sub(r"([_/:])", r"\1<wbr>", text))


@lru_cache(maxsize=1)
def environment():
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["css"] = css_class
    env.filters["wbr"] = word_breaks
    return env


def render_html(ctx: ReportContext) -> str:
    """The report as one HTML document."""
    return environment().get_template("report.html.j2").render(ctx=ctx)
