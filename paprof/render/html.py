"""The HTML report: the context through ``templates/report.html.j2``, autoescaped.

The result is one self-contained file: styles and the chart PNGs are inline, a Content
Security Policy forbids fetching anything, and every value goes through Jinja's
autoescape (a kernel called ``<script>`` prints as text).
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from paprof.render.context import ReportContext
from paprof.explain.fmt import identifier_breaks, identifier_tail as tail
from paprof.safetext import is_safe, shown

TEMPLATES = Path(__file__).resolve().parent / "templates"

GENERATOR_MARK = '<meta name="generator" content="paprof'
"""Every HTML report carries this near its top; ``paprof compare`` overwrites a file that
has it without asking (see ``paprof.compare_flow``)."""


def css_class(value) -> str:
    """A CSS class name from a label: ``occupancy/launch-bound`` -> ``occupancy-launch-bound``."""
    if value is None:
        return "unknown"
    return re.sub(r"[^a-z0-9]+", "-", str(value).lower()).strip("-") or "unknown"


LONG_WORD = 16
"""Identifiers longer than this (kernel names) get break opportunities; other words wrap
at spaces and hyphens as usual."""
IDENTIFIER = re.compile(r"_|::|<|[a-z][A-Z]")


def word_breaks(value):
    """Escaped text with a ``<wbr>`` at each identifier boundary of its long words (after
    ``_ / : , < > ( )``, inside CamelCase: ``fmt.identifier_breaks``) so that long kernel
    names wrap at their parts, never mid-identifier."""
    from markupsafe import Markup, escape


    def word(w: str) -> str:
        if len(w) <= LONG_WORD or not IDENTIFIER.search(w):
            return str(escape(w))
        pieces, last = [], 0
        for i in identifier_breaks(w):
            pieces.append(str(escape(w[last:i])))
            last = i
        pieces.append(str(escape(w[last:])))
        return "<wbr>".join(pieces)

    text = "" if value is None else str(value)
    return Markup("".join(word(w) for w in re.split(r"(\s+)", text)))


HEADER_NAME_CHARS = 18
"""A kernel name in a column header: its last characters, whole identifier parts only."""


def identifier_tail(value, width: int = HEADER_NAME_CHARS) -> str:
    return tail("" if value is None else str(value), width)


def shown_html(value):
    """Every value a template prints, before autoescaping: control and bidi characters
    shown escaped (``paprof.safetext``; a U+202E in a name would reorder the page's text),
    already-safe markup kept markup."""
    if not isinstance(value, str) or is_safe(value, newlines=True):
        return value
    from markupsafe import Markup

    text = shown(value, limit=None, newlines=True)
    return Markup(text) if isinstance(value, Markup) else text


@lru_cache(maxsize=1)
def environment():
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=shown_html,
    )
    env.filters["css"] = css_class
    env.filters["wbr"] = word_breaks
    env.filters["tail"] = identifier_tail
    return env


def render_html(ctx: ReportContext) -> str:
    """The report as one HTML document."""
    return environment().get_template("report.html.j2").render(ctx=ctx)
