"""The Markdown report (for a pull-request comment): the same context, no charts.

Values are escaped for Markdown rather than HTML: ``<`` (HTML), ``|`` (tables) and the
characters that start emphasis, code or links get a backslash, so a kernel name prints as itself and
cannot break a table or inject markup.
"""

from __future__ import annotations

import re
from functools import lru_cache

from paprof.render.context import ReportContext
from paprof.render.html import TEMPLATES
from paprof.safetext import shown

MARK = "<!-- paprof report"
"""The first line of every Markdown report (see ``paprof.compare_flow``)."""

_SPECIAL = re.compile(r"([\\`*_\[\]<|])")


def md_escape(value) -> str:
    """Text safe inside Markdown (tables included): punctuation that means something gets
    a backslash; newlines become spaces; control and bidi characters are shown escaped
    (``paprof.safetext``)."""
    if value is None:
        return ""
    text = shown(str(value).replace("\r", " ").replace("\n", " "), limit=None)
    return _SPECIAL.sub(r"\\\1", text)


@lru_cache(maxsize=1)
def environment():
    import jinja2

    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        autoescape=False,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=md_escape,
        keep_trailing_newline=True,
    )


def render_markdown(ctx: ReportContext) -> str:
    """The report as GitHub-flavoured Markdown."""
    text = environment().get_template("report.md.j2").render(ctx=ctx)
    return re.sub(r"\n{3,}", "\n\n", text).strip() + "\n"
