"""``paprof run``: verify, then profile variants under ncu and store the runs."""

from __future__ import annotations

import shlex
import time
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from paprof import registry
from paprof.phases import TIMING_ALONE
from paprof.commands import force_option, renamed, terminal_width, wide_option
from paprof.errors import UsageError, VerificationError
from paprof.api import CLOCK_CONTROLS, TARGET_PROCESSES, NcuSettings
from paprof.api import PRESETS
from paprof.api import Outcome, profile_variants
from paprof.api import DEFAULT_COVER
from paprof.safetext import shown


def _check_cell(outcome: Outcome) -> Text:
    """The check's cell: plain text (a family's messages are never read as markup)."""
    if outcome.skipped:
        return Text(f"skipped: {shown(outcome.skipped)}")
    if outcome.failed:
        return Text.assemble(("FAILED", "red"), f": {shown(outcome.failed)}")
    if not outcome.variant.verified:
        return Text("not verified (a command)")
    check = outcome.run.sidecar.get("verification") or {}
    rel = check.get("rel_error")
    return Text(f"ok ({rel:.1e})" if isinstance(rel, (int, float)) else "ok")


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
            Text(shown(o.variant.name)),
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


def _top_kernels(cmd, cover, top, every_kernel, every_launch) -> dict:
    """``NcuSettings``' cover, top and every_launch from --cover, --top, --all and
    --profile-every-launch."""
    if cmd is None:
        if cover is not None or top is not None or every_kernel or every_launch:
            raise UsageError("--cover, --top, --all and --profile-every-launch go with --cmd")
        return {}
    if every_kernel:
        if cover is not None or top is not None:
            raise UsageError("--all profiles every kernel: give neither --cover nor --top with it")
        return {}  # every launch of every kernel: no timing pass to count configurations
    return {"cover": DEFAULT_COVER if cover is None else cover, "top": top,
            "every_launch": every_launch}


def selection_lines(outcomes: list[Outcome]) -> list[str]:
    """For a command profiled by its top kernels: what was profiled and what skipped."""
    lines = []
    for o in outcomes:
        chosen = o.run.sidecar.get("selection") if o.run else None
        if not isinstance(chosen, dict):
            continue
        done, skipped = chosen["profiled"], chosen["skipped"]
        alone = [p.seconds for p in o.run.sidecar.phases if p.name == TIMING_ALONE]
        line = (f"{shown(o.variant.name)}: profiled {done['kernels']} of {len(chosen['kernels'])} kernels, "
                f"{done['launches']} launches, {100 * done['share']:.1f} % of the range's time "
                f"(timed in {chosen.get('seconds', 0):.1f} s"
                + (f", {alone[0]:.1f} s of it trying the program's own process alone: its kernels "
                   "ran in child processes)" if alone else ")"))
        planned, verb = done["launches"], "saw"
        if chosen.get("represented"):
            planned = len(chosen.get("sequence") or ())
            verb = "planned"
            line += (f"; {planned} launches standing for the others, by launch configuration "
                     "(--profile-every-launch profiles them all)")
        if skipped["kernels"]:
            line += (f"; skipped {skipped['kernels']} kernels, {skipped['launches']} launches, "
                     f"{100 * skipped['share']:.1f} % (--all profiles every kernel)")
        seen = chosen.get("launches_profiled")
        if isinstance(seen, int) and seen != planned:
            line += (f". Warning: ncu profiled {seen} launch{'es' if seen != 1 else ''} where the timing pass {verb} "
                     f"{planned} of these kernels: the program ran differently the second time")
        lines.append(line)
    return lines


def report_lines(outcomes: list[Outcome], width: int | None = None) -> list[str]:
    """``variant: path`` of each stored report, one line each, never wrapped: where that
    is wider than ``width`` (a terminal's), the path alone on the next line."""
    lines = []
    for o in outcomes:
        if o.run:
            name, path = shown(o.variant.name), shown(o.run.report)
            line = f"{name}: {path}"
            fits = width is None or len(line) <= width
            lines += [line] if fits else [f"{name}:", f"  {path}"]
    return lines


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
@click.option("--cover", type=click.FloatRange(0, 1, min_open=True), default=None, metavar="FRACTION",
              help="With --cmd: time every launch in the range first (ncu, duration only), then "
                   "profile only the kernels that make up this fraction of its time "
                   f"[default: {DEFAULT_COVER}].")
@click.option("--top", type=click.IntRange(min=1), default=None, metavar="N",
              help="With --cmd: profile at most N kernels (the longest first).")
@click.option("--all", "every_kernel", is_flag=True,
              help="With --cmd: profile every launch of every kernel in the range (no timing "
                   "pass).")
@click.option("--profile-every-launch", "every_launch", is_flag=True,
              help="With --cmd: profile every launch of the top kernels, not the first few "
                   "of each launch configuration (kernel, grid, block) standing for the others.")
@click.option("--target-processes", "processes", type=click.Choice(TARGET_PROCESSES), default=None,
              help="With --cmd: the processes ncu profiles (its --target-processes). auto "
                   "[default]: ncu tries the program's own process first and its child "
                   "processes only where that launched nothing in the range (each "
                   "process ncu connects to slows every launch: torch.compile starts one); "
                   "all: the program and its children throughout (a program whose children "
                   "also run the range); application-only: its own process alone.")
@click.option("--preset", type=click.Choice(list(PRESETS)), default="default", show_default=True,
              help="What ncu collects: default (10 sections whole and the metrics paprof reads of "
                   "the memory tables, memory chart and roofline chart: traffic per memory level, "
                   "instruction counts, roofline inputs; 27 replay passes a kernel on an H100), "
                   "tables (those three sections whole too: ncu's uncoalesced-access and "
                   "bank-conflict estimates and their pages in Nsight Compute; 35 passes), source "
                   "(default + stall samples per source line, -lineinfo builds), basic (8 "
                   "sections, 20 passes), memory (4, faster), full (--set full, slow).")
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
@wide_option("the summary fits its width, a long report path alone on its line")
@click.option("--timings", is_flag=True,
              help="Also show where each variant's run spent its time (build, inputs and reference, "
                   "check, timing, ncu start, replay passes, ...), then the totals. Where replay "
                   "passes were most of it, a line says what --preset basic saves (shown for "
                   "--cmd programs without --timings too).")
def run(variants, family, shape, cmd, nvtx_range, name, kernel_regex, cover, top, every_kernel,
        every_launch, processes, preset, runs_dir, clock_control, launches, force, seed, wide,
        timings):
    """Verify each variant against the float64 reference, then profile it under ncu.

    Each variant first runs without ncu (checked, then CUDA-event timed), then under
    ncu with the chosen sections. Runs are stored as
    RUNS/<gpu>/<family>/<variant>/<shape>.ncu-rep with a .json provenance sidecar.
    With --cmd, an external program is profiled inside its NVTX range instead (stored
    under family 'command'; not verified): every launch in the range is timed first
    (ncu, duration, grid and block only), then the kernels that make up 90 % of its time
    (--cover, --top) are profiled with the preset's sections, the first launches of each
    launch configuration (kernel, grid, block) standing for the step's others
    (--profile-every-launch: all of them), and the run record says what was skipped and
    what each profiled launch stands for (--all: every launch of every kernel, no timing
    pass). Needs an NVIDIA GPU and Nsight Compute (ncu on PATH, or NCU=/path/to/ncu).

    \b
    Examples:
      paprof run --variant v3
      paprof run --variant v2 --variant v3 --shape batch=8,dtype=fp32
      paprof run --family softmax --variant all --force
      paprof run --cmd 'python train_step.py' --nvtx-range step --name mine

    Exit codes: 0 ok, 1 a variant failed verification, 2 bad input or environment.
    """
    started = time.perf_counter()
    if processes is not None and cmd is None:
        raise UsageError("--target-processes goes with --cmd (paprof's own launcher runs alone)")
    settings = NcuSettings(preset=preset, clock_control=clock_control, launches=launches, seed=seed,
                           target_processes=processes or ("auto" if cmd else "all"),
                           **_top_kernels(cmd, cover, top, every_kernel, every_launch))
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
    width = None if wide else terminal_width()
    Console(width=10_000 if wide else width).print(summary_table(outcomes))
    chosen_lines = selection_lines(outcomes)
    if width:
        from paprof.api import wrapped

        chosen_lines = [part for line in chosen_lines for part in wrapped(line, width)]
    for line in report_lines(outcomes, width) + chosen_lines:
        click.echo(line)
    if timings:
        from paprof.commands.run_timings import timing_tables

        for table in timing_tables(outcomes, time.perf_counter() - started):
            Console(width=10_000 if wide else width).print(table)
    if timings or cmd is not None:  # a program's replay passes are most of its wait: say so
        from paprof.commands.run_timings import faster_hint

        hint = faster_hint(outcomes, preset)
        if hint:
            from paprof.api import wrapped

            for part in (wrapped(hint, width) if width else [hint]):
                click.echo(part)
    failed = [o for o in outcomes if o.failed]
    if failed:
        raise VerificationError(
            f"{len(failed)} of {len(outcomes)} variants failed verification: "
            + ", ".join(o.variant.name for o in failed)
        )


COMMANDS = [run]
