"""A regression verdict as GitHub-flavoured Markdown (for ``$GITHUB_STEP_SUMMARY``).

Regressions first (one line each, naming variant, metric, baseline, now and the
allowance), then every check in one table, then the notes.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Iterable

from paprof import outputs
from paprof.safetext import shown

from paprof.gate import Verdict

MARK = "## paprof check: "
"""The first line of every check summary: such a file is replaced without --force."""

_STATUS = {"same": "pass (same)", "pass": "pass", "improved": "improved",
           "regressed": "**REGRESSED**", "changed": "**CHANGED**",
           "ambiguous": "pass (*ambiguous*: noisier than the minimum effect)",
           "reported": "pass (*reported*: instruction count moved, resources did not)",
           "noise (same code)": "pass (*noise*: same SASS and launch settings)",
           "ambiguous (environment)": "pass (*ambiguous*: GPU throttled or shared)"}
"""Each outcome as the table shows it; a regression and a changed count fail the gate."""


_SPECIAL = re.compile(r"([\\`\[\]<>|!&])")
"""Punctuation that starts HTML, code, links or images, or breaks a table (as the report
Markdown escapes them, ``paprof.render.markdown.md_escape``; emphasis, harmless, is
left alone so that names read plainly)."""


def _cell(text: str) -> str:
    """Plain text (a name, a shape, a message) made safe in Markdown and its tables:
    control and bidi characters shown escaped (``paprof.safetext``), markup characters
    escaped: a variant named ``<script>`` or ``[a](javascript:...)`` prints as itself."""
    return _SPECIAL.sub(r"\\\1", shown(text))


def _code(text: str) -> str:
    """``text`` as inline code (no backtick inside can end it)."""
    return "`" + shown(text).replace("`", "'").replace("|", "\\|") + "`"


def verdict_markdown(verdict: Verdict) -> str:
    """The Markdown text of ``verdict``."""
    mark = "PASS" if verdict.passed else "FAIL"
    lines = [f"{MARK}{mark}", "", _cell(verdict.summary), ""]
    prov = verdict.provenance
    where = ", ".join(
        f"{label} {_cell(value)}"
        for label, value in (
            ("GPU", prov.gpu),
            ("ncu", prov.ncu_version),
            ("clock control", prov.clock_control),
            ("commit", prov.git_commit),
        )
        if value
    )
    if where:
        lines += [f"Runs: {where}.", ""]
    if verdict.regressions:
        lines += ["### Regressions", ""]
        lines += [f"- {_cell(r.message)}" for r in verdict.regressions]
        lines.append("")
    if verdict.causes:
        lines += ["### Causes", ""]
        for (family, variant, _shape), c in verdict.causes.items():
            name = f"{family}/{variant}" if family else variant
            lines.append(f"- **{_cell(name)}** ({c.outcome}): {_cell(c.line())}")
        lines.append("")
    lines += [
        "| Variant | Shape | Metric | Baseline | Now | Change | Allowed | Status |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in verdict.results:
        shape = r.shape if r.shape_now is None else f"{r.shape} (now {r.shape_now})"
        cells = (
            _cell(r.name), _cell(shape), f"{_cell(r.rule.label)} ({_code(r.metric)})",
            _cell(r.fmt_stat(r.baseline)), _cell(r.fmt_stat(r.now)), _cell(r.delta_text),
            _cell(r.allowed_text), _STATUS.get(r.outcome) or _cell(r.outcome),
        )
        lines.append("| " + " | ".join(cells) + " |")
    if verdict.notes:
        lines += ["", "### Notes", ""]
        lines += [f"- {_cell(n)}" for n in verdict.notes]
    return "\n".join(lines) + "\n"


def write_markdown(verdict: Verdict, path: str | os.PathLike, force: bool = False,
                   inputs: Iterable = ()) -> Path:
    """Write ``verdict``'s Markdown to ``path``, atomically; see ``paprof.outputs`` for
    what may be replaced."""
    check_target(path, force, inputs)
    return outputs.write(path, verdict_markdown(verdict), parents=True)


def check_target(path: str | os.PathLike, force: bool = False, inputs: Iterable = ()) -> None:
    """``UserError`` now when ``write_markdown`` would refuse ``path``."""
    outputs.check_target(path, what="a paprof check summary", mark=MARK, force=force,
                         inputs=inputs, parents=True)
