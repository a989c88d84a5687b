"""The sweep report: scaling per axis, the regime map, its crossovers, as HTML, Markdown
and the regime JSON a dispatcher reads.

``write_sweep_report(runs)`` reads the sweep's results (``paprof.sweep.regime.collect``),
decides the winners and crossovers there, formats them (``paprof.render.sweep``) and
writes the files.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from paprof._version import __version__  # noqa: F401  (the version every writer of reports uses)
from paprof.explain.verdict import NOISE_PCT
from paprof.errors import UserError
from paprof.render.sweep import SweepContext, render_html, render_markdown
from paprof.read import store
from paprof.sweep import manifest as manifests
from paprof.sweep.regime import (  # noqa: F401  (the computation, by the names callers used)
    REGIME_KIND,
    Collected,
    collect,
    crossovers,
    findings,
    leader,
    regime_json,
    scaling_lines,
)
from paprof.render.sweep import draw_scaling
from paprof.render import sweep as view
from paprof import jsonsafe, outputs
from paprof.render.build import STDOUT


MAX_CHARTS = 24
"""Scaling charts at most; the regime map and the JSON hold every point."""


def _charts(data: dict, cells: dict) -> tuple[list, int]:
    """The scaling charts (at most ``MAX_CHARTS``) and how many were left out."""
    lines, left_out = scaling_lines(data, cells, limit=MAX_CHARTS)
    return draw_scaling(lines), left_out


def build_context(col: Collected, noise_pct: float = NOISE_PCT, charts: bool = True,
                  generated: str | None = None) -> SweepContext:
    """The report's context of the collected results ``col``: decided
    (``paprof.sweep.regime.findings``), then formatted (``paprof.render.sweep``)."""
    found = findings(col, noise_pct, scaling=False)
    made = []
    if charts:
        made, found.left_out = _charts(col.manifest, col.cells)
    return view.build_context(found, made, generated)


@dataclass
class SweepReport:
    html: Path | None
    markdown: Path | None
    markdown_text: str | None
    regime: Path | None
    context: SweepContext
    overwrote: list[Path]
    regime_text: str | None = None
    """The regime JSON when ``regime`` was ``"-"`` (for stdout), else None."""
    html_text: str | None = None
    """The HTML report when ``out`` was ``"-"`` (for stdout), else None."""


def regime_path_for(out: Path) -> Path:
    """``sweep.html`` -> ``sweep.regime.json``."""
    return out.with_name(out.name.rsplit(".", 1)[0] + ".regime.json")


def _store_records(runs):
    """The store's JSON files (its manifests and sidecars), found only when asked for:
    ``outputs.check_target`` looks at them only for an output that exists already (10,000
    runs: 0.1 s, every report)."""
    if Path(runs).is_dir():
        yield from Path(runs).rglob("*.json")


def write_sweep_report(runs, out: Path | str | None = "paprof-sweep.html", markdown=None,
                       regime: Path | str | None = None, *, name: str | None = None,
                       noise_pct: float = NOISE_PCT, force: bool = False,
                       generated: str | None = None) -> SweepReport:
    """Write the sweep report of the store ``runs``: HTML (``out``), Markdown (``markdown``)
    and the regime JSON (``regime``; default beside an ``out`` file); ``"-"`` returns an
    output as text instead (``html_text``, ``markdown_text``, ``regime_text``).

    Earlier paprof reports are replaced; other files only with ``force`` (as compare).
    """
    from paprof.render.html import GENERATOR_MARK
    from paprof.render.markdown import MARK

    if not noise_pct >= 0 or math.isinf(noise_pct):
        raise UserError(f"--noise must be a percentage of 0 or more, got {noise_pct}")
    out_path = Path(out) if out not in (None, STDOUT) else None
    md_path = Path(markdown) if markdown not in (None, STDOUT) else None
    outputs.one_on_stdout(("--out", out), ("--markdown", markdown), ("--json", regime))
    json_path = (None if regime == STDOUT else Path(regime) if regime is not None
                 else regime_path_for(out_path) if out_path else None)
    targets = [(p, mark) for p, mark in ((out_path, GENERATOR_MARK), (md_path, MARK),
                                         (json_path, f'"kind": "{REGIME_KIND}"')) if p is not None]
    if len({str(p.resolve()) for p, _ in targets}) < len(targets):
        raise UserError("the HTML, Markdown and regime JSON outputs must be different files")
    overwrote = [p for p, mark in targets  # never a manifest or record it reads, even with --force
                 if outputs.check_target(p, what="a paprof report", mark=mark, force=force,
                                         inputs=_store_records(runs))]
    for p, _ in targets:
        store.refuse_inside(p, runs, "the sweep report's output")
    data = manifests.find(runs, name)
    col = collect(runs, data)
    ctx = build_context(col, noise_pct, charts=out is not None, generated=generated)
    md_text = None
    html_text = outputs.text_for_stdout(None if out is None else out_path or STDOUT,
                                        lambda: render_html(ctx))
    if markdown is not None:
        md_text = render_markdown(ctx)
        if md_path is not None:
            outputs.write(md_path, md_text)
    regime_text = jsonsafe.dumps(ctx.regime_data, 1) + "\n"  # json.dumps's text
    if json_path is not None:
        outputs.write(json_path, regime_text)
    return SweepReport(out_path, md_path, md_text, json_path, ctx, overwrote,
                       regime_text if regime == STDOUT else None, html_text)
