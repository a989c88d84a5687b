"""``paprof run``: verify, then profile variants under ncu and store the runs."""

from __future__ import annotations

import shlex
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from paprof import registry
from paprof.commands import force_option, renamed
from paprof.errors import UsageError, VerificationError
from paprof.api import CLOCK_CONTROLS, NcuSettings
from paprof.api import PRESETS
from paprof.api import Outcome, profile_variants


def _check_cell(outcome: Outcome) -> str:
    if outcome.skipped:
        return f"skipped: {outcome.skipped}"
    if outcome.failed:
        return f"[red]FAILED[/red]: {outcome.failed}"
    if not outcome.variant.verified:
        return "not verified (a command)"
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
    table.add_column("event us", justify="right")
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


def _command_variant(cmd, nvtx_range, name, kernel_regex):
    if not nvtx_range or not name:
        raise UsageError("--cmd needs --nvtx-range NAME (the program's NVTX range to profile) "
                         "and --name ID (what to call it in the run store)")
    try:
        argv = shlex.split(cmd)
    except ValueError as err:
        raise UsageError(f"--cmd is not a valid command line: {err}") from None
    if not argv:
        raise UsageError("--cmd is empty")
    try:
        return registry.command_variant(argv, nvtx_range, name, kernel_regex)
    except ValueError as err:
        raise UsageError(f"--name {name!r}: {err}") from None


def report_lines(outcomes: list[Outcome]) -> list[str]:
    """``variant: path`` of each stored report, one line each, never wrapped."""
    return [f"{o.variant.name}: {o.run.report}" for o in outcomes if o.run]


@click.command("run")
@click.option("--variant", "variants", multiple=True,
              help="Variant id (v3) or family/id; repeat for several, or 'all'.")
@click.option("--family", default=None, help="Kernel family (needed for 'all' when several are visible).")
@click.option("--shape", default=None, metavar="KEY=VALUE,...",
              help="The family's parameters (paprof list shows them), e.g. "
                   "batch=8,dtype=fp16.")
@click.option("--cmd", default=None, metavar="'PROGRAM ARGS'",
              help="Profile an external program instead of a variant (with --nvtx-range "
                   "and --name); it is not verified.")
@click.option("--nvtx-range", default=None, metavar="NAME",
              help="With --cmd: the NVTX push/pop range whose kernels are profiled "
                   "(domain@range for a named domain).")
@click.option("--name", default=None, metavar="ID",
              help="With --cmd: the variant id it is stored under (family 'command').")
@click.option("--kernel-regex", default=None, metavar="REGEX",
              help="With --cmd: profile only kernels whose names match.")
@click.option("--preset", type=click.Choice(list(PRESETS)), default="default", show_default=True,
              help="ncu sections: default (13 sections incl. traffic per memory level and "
                   "instruction counts; 35 replay passes a kernel on the H200), source (+ stall "
                   "samples per source line, -lineinfo builds), basic (8 sections, 20 passes), "
                   "memory (4, faster), full (--set full, slow).")
@click.option("--runs", "runs_dir", type=click.Path(file_okay=False, path_type=Path),
              default="runs", show_default=True, help="Run store folder.")
@click.option("--clock-control", type=click.Choice(CLOCK_CONTROLS), default="none",
              show_default=True,
              help="none: the GPU's own clocks, as in production; base: locked base clocks.")
@click.option("--profiled-launches", "launches", type=click.IntRange(min=1), default=1, metavar="N",
              show_default=True, help="Launches of each variant profiled under ncu.")
@renamed("--launches", "--profiled-launches", "launches", type=click.IntRange(min=1))
@force_option("an existing run of the same variant, shape and GPU")
@renamed("--replace", "--force", "force", is_flag=True)
@click.option("--seed", type=int, default=None, help="Seed for the random inputs.")
def run(variants, family, shape, cmd, nvtx_range, name, kernel_regex, preset, runs_dir,
        clock_control, launches, force, seed):
    """Verify each variant against the float64 reference, then profile it under ncu.

    Each variant first runs without ncu (checked, then CUDA-event timed), then under
    ncu with the chosen sections. Runs are stored as
    RUNS/<gpu>/<family>/<variant>/<shape>.ncu-rep with a .json provenance sidecar.
    With --cmd, an external program is profiled inside its NVTX range instead (stored
    under family 'command'; not verified). Needs an NVIDIA GPU and Nsight Compute (ncu
    on PATH, or NCU=/path/to/ncu).

    \b
    Examples:
      paprof run --variant v3
      paprof run --variant v2 --variant v3 --shape batch=8,dtype=fp32
      paprof run --family softmax --variant all --force
      paprof run --cmd 'python train_step.py' --nvtx-range step --name mine

    Exit codes: 0 ok, 1 a variant failed verification, 2 bad input or environment.
    """
    settings = NcuSettings(preset=preset, clock_control=clock_control, launches=launches, seed=seed)
    if cmd is not None:
        if variants or shape:
            raise UsageError("--cmd profiles a program: give neither --variant nor --shape with it")
        chosen, params, fam = [_command_variant(cmd, nvtx_range, name, kernel_regex)], None, None
    else:
        if nvtx_range or name or kernel_regex:
            raise UsageError("--nvtx-range, --name and --kernel-regex go with --cmd")
        if not variants:
            raise UsageError("name a variant (--variant v3, or --variant all), or a program (--cmd)")
        chosen = registry.resolve(variants, family)
        fam = registry.family_of(chosen[0])
        params = fam.parse(shape)
        registry.check_params(chosen, params)
    outcomes = profile_variants(chosen, params, settings, runs_dir, force, family=fam)
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
