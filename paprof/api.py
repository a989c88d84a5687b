"""paprof's public library: what the front ends (the CLI's commands, the notebook API,
the MCP tools) take from the layers below, in one place. Each name is looked up in its
module on use (``from paprof.api import load_reports`` imports ``paprof.model.load``
then), so that ``import paprof.api`` stays as light as ``import paprof``: the command
line starts without pandas, and a command imports what it calls.

``paprof.family`` is the plugin contract (the kernel lab ``kernels/`` and users' families
import it there); it is also here as ``family``, with ``registry``, which finds families.
Everything else of the package is internal: its modules may move, these names stay.
"""

from __future__ import annotations

import importlib

_NAMES: dict[str, tuple[str, str | None]] = {
    "find_ncu": ("paprof.read.locate", "find_ncu"),
    "resolve_variants": ("paprof.read.resolve", "resolve_variants"),
    "Scan": ("paprof.read.store", "Scan"),
    "find_runs": ("paprof.read.store", "find_runs"),
    "input_files": ("paprof.read.store", "input_files"),
    "refuse_inside": ("paprof.read.store", "refuse_inside"),
    "store_folder": ("paprof.read.store_files", "folder"),
    "load_reports": ("paprof.model.load", "load_reports"),
    "variant_rows": ("paprof.model.load", "variant_rows"),
    "analyse": ("paprof.model.analysis", "analyse"),
    "finished_comparison": ("paprof.compare_flow", "finished_comparison"),
    "explain": ("paprof.explain.compare_runs", "explain"),
    "explanation": ("paprof.explain.explanation", "explanation"),
    "finish": ("paprof.explain.finish", "finish"),
    "gate": ("paprof.gate", None),
    "calibration": ("paprof.gate.calibration", None),
    "cause": ("paprof.gate.cause", None),
    "CLOCK_CONTROLS": ("paprof.measure.argv", "CLOCK_CONTROLS"),
    "NcuSettings": ("paprof.measure.argv", "NcuSettings"),
    "TARGET_PROCESSES": ("paprof.measure.argv", "TARGET_PROCESSES"),
    "KEY": ("paprof.measure.environment", "KEY"),
    "Watch": ("paprof.measure.environment", "Watch"),
    "run_bench": ("paprof.measure.kernels.bench", "run_bench"),
    "PRESETS": ("paprof.measure.presets", "PRESETS"),
    "DEFAULT_COVER": ("paprof.measure.top_kernels", "DEFAULT_COVER"),
    "wrapped": ("paprof.explain.fmt", "wrapped"),
    "abbreviated": ("paprof.explain.fmt", "abbreviated"),
    "Outcome": ("paprof.measure.profile", "Outcome"),
    "profile_variants": ("paprof.measure.profile", "profile_variants"),
    "query_gpus": ("paprof.measure.provenance", "query_gpus"),
    "recheck": ("paprof.measure.recheck", None),
    "static": ("paprof.measure.static", None),
    "source_lines": ("paprof.measure.source_text", "for_run"),
    "DEFAULT_OUT": ("paprof.compare_flow", "DEFAULT_OUT"),
    "DEFAULT_RUNS": ("paprof.read.resolve", "DEFAULT_RUNS"),
    "STDOUT": ("paprof.compare_flow", "STDOUT"),
    "write_report": ("paprof.compare_flow", "write_report"),
    "render_outputs": ("paprof.render.build", "render_outputs"),
    "ReportFiles": ("paprof.render.build", "ReportFiles"),
    "REPORT_MARKS": ("paprof.render.build", "MARKS"),
    "check_json": ("paprof.render.check_json", None),
    "check_markdown": ("paprof.render.check_markdown", None),
    "build_context": ("paprof.render.context", "build_context"),
    "export": ("paprof.render.export", None),
    "render_html": ("paprof.render.html", "render_html"),
    "junit": ("paprof.render.junit", None),
    "parse_gpus": ("paprof.sweep.gpus", "parse_gpus"),
    "run_on_gpus": ("paprof.sweep.gpus", "run_on_gpus"),
    "grid": ("paprof.sweep.grid", None),
    "manifest": ("paprof.sweep.manifest", None),
    "merge_stores": ("paprof.sweep.merge", "merge_stores"),
    "NOISE_PCT": ("paprof.sweep.report", "NOISE_PCT"),
    "regime_path_for": ("paprof.sweep.report", "regime_path_for"),
    "write_sweep_report": ("paprof.sweep.report", "write_sweep_report"),
    "results": ("paprof.sweep.results", None),
    "SweepSettings": ("paprof.sweep.run", "SweepSettings"),
    "run_sweep": ("paprof.sweep.run", "run_sweep"),
    "family": ("paprof.family", None),
    "registry": ("paprof.registry", None),
}
"""Each public name: (its module, its name there; None: the module itself)."""

__all__ = sorted(_NAMES)


def __getattr__(name: str):
    try:
        module, attr = _NAMES[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    found = importlib.import_module(module)
    return found if attr is None else getattr(found, attr)


def __dir__() -> list[str]:
    return __all__
