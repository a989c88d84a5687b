"""A regression verdict as GitHub-flavoured Markdown (for ``$GITHUB_STEP_SUMMARY``).

Regressions first (one line each, naming variant, metric, baseline, now and the
allowance), then every check in one table, then the notes.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable

from paprof import outputs

from paprof.analysis.regress import Verdict

MARK = "## paprof check: "
"""The first line of every check summary: such a file is replaced without --force."""

_STATUS = {"same": "pass (same)", "pass": "pass", "improved": "improved",
           "regressed": "**REGRESSED**", "changed": "**CHANGED**",
           "ambiguous": "pass (*ambiguous*: noisier than the minimum effect)",
           "reported": "pass (*reported*: instruction count moved, resources did not)"}
"""Each outcome as the table shows it; a regression and a changed count fail the gate."""


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def verdict_markdown(verdict: Verdict) -> str:
    """The Markdown text of ``verdict``."""
    mark = "PASS" if verdict.passed else "FAIL"
    lines = [f"{MARK}{mark}", "", verdict.summary, ""]
    prov = verdict.provenance
    where = ", ".join(
        f"{label} {value}"
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
    lines += [
        "| Variant | Shape | Metric | Baseline | Now | Change | Allowed | Status |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in verdict.results:
        shape = r.shape if r.shape_now is None else f"{r.shape} (now {r.shape_now})"
        cells = (
            r.name, shape, f"{r.rule.label} (`{r.metric}`)", r.fmt_stat(r.baseline),
            r.fmt_stat(r.now), r.delta_text, r.allowed_text, _STATUS.get(r.outcome, r.outcome),
        )
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
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
