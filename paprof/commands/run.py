"""``paprof run``: verify, then profile variants under ncu and store the runs."""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from paprof.errors import VerificationError
from paprof.kernels import registry
from paprof.kernels.problem import parse_shape
from paprof.profiler.argv import CLOCK_CONTROLS, NcuSettings
from paprof.profiler.presets import PRESETS
from paprof.profiler.profile import Outcome, profile_variants


def _check_cell(outcome: Outcome) -> str:
    if outcome.skipped:
        return f"skipped: {outcome.skipped}"
    if outcome.failed:
        return f"[red]FAILED[/red]: {outcome.failed}"
    check = outcome.run.sidecar.get("verification") or {}
    rel = check.get("rel_error")
    return f"ok ({rel:.1e})" if isinstance(rel, (int, float)) else "ok"


def _number(value, fmt: str) -> str:
    return format(value, fmt) if isinstance(value, (int, float)) else "-"


def summary_table(outcomes: list[Outcome]) -> Table:
    """One row per variant: check, event-timed duration, bandwidth, replay passes. The
    reports are listed after it (``report_lines``), where a path is copied whole."""
    table = Table(title="paprof run")
    table.add_column("variant", no_wrap=True)
    table.add_column("check (rel. error)")
    table.add_column("event µs", justify="right")
    table.add_column("TB/s", justify="right")
    table.add_column("passes", justify="right")
    for o in outcomes:
        side = o.run.sidecar if o.run else {}
        table.add_row(
            o.variant.name,
            _check_cell(o),
            _number(side.get("duration_us_event"), ".1f"),
            _number(side.get("bandwidth_tbs"), ".2f"),
            _number(side.get("replay_passes"), "d"),
        )
    return table


def report_lines(outcomes: list[Outcome]) -> list[str]:
    """``variant: path`` of each stored report, one line each, never wrapped."""
    return [f"{o.variant.name}: {o.run.report}" for o in outcomes if o.run]


@click.command("run")
@click.option("--variant", "variants", multiple=True, required=True,
              help="Variant id (v3) or family/id; repeat for several, or 'all'.")
@click.option("--family", default=None, help="Kernel family (default: every family).")
@click.option("--shape", default=None,
              help="Problem shape, e.g. batch=64,context=4096,heads=32,kv_heads=8,d=128,page=16.")
@click.option("--preset", type=click.Choice(list(PRESETS)), default="default", show_default=True,
              help="ncu sections: default (8 sections), memory (4, faster), "
                   "full (--set full, slow).")
@click.option("--runs", "runs_dir", type=click.Path(file_okay=False, path_type=Path),
              default="runs", show_default=True, help="Run store folder.")
@click.option("--clock-control", type=click.Choice(CLOCK_CONTROLS), default="none",
              show_default=True,
              help="none: the GPU's own clocks, as in production; base: locked base clocks.")
@click.option("--launches", type=click.IntRange(min=1), default=1, show_default=True,
              help="Launches of each variant to profile.")
@click.option("--replace", is_flag=True,
              help="Overwrite an existing run of the same variant, shape and GPU.")
@click.option("--seed", type=int, default=None, help="Seed for the random inputs.")
def run(variants, family, shape, preset, runs_dir, clock_control, launches, replace, seed):
    """Verify each variant against the float64 reference, then profile it under ncu.

    Each variant first runs without ncu (checked, then CUDA-event timed), then under
    ncu with the chosen sections. Runs are stored as
    RUNS/<gpu>/<family>/<variant>/<shape>.ncu-rep with a .json provenance sidecar.
    Needs an NVIDIA GPU and Nsight Compute (ncu on PATH, or NCU=/path/to/ncu).

    \b
    Examples:
      paprof run --variant v3
      paprof run --variant v2 --variant v3 --shape batch=8,context=32768
      paprof run --variant all --preset memory --replace

    Exit codes: 0 ok, 1 a variant failed verification, 2 bad input or environment.
    """
    chosen = registry.resolve(variants, family)
    settings = NcuSettings(preset=preset, clock_control=clock_control, launches=launches, seed=seed)
    outcomes = profile_variants(chosen, parse_shape(shape), settings, runs_dir, replace)
    Console().print(summary_table(outcomes))
    for line in report_lines(outcomes):
        click.echo(line)
    failed = [o for o in outcomes if o.failed]
    if failed:
        raise VerificationError(
            f"{len(failed)} of {len(outcomes)} variants failed verification: "
            + ", ".join(o.variant.name for o in failed)
        )


COMMANDS = [run]
