"""``paprof check`` (the CI regression gate) and ``paprof baseline update``.

Thin: options become a ``Settings`` and a baseline; ``paprof.gate`` judges;
this module prints the table and writes JUnit / Markdown.
"""

from __future__ import annotations

import functools
import os
import time

import sys
from pathlib import Path

import click
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from paprof import progress
from paprof.api import gate
from paprof.api import calibration
from paprof.commands import (echo, force_option, json_option, on_stdout, one_on_stdout,
                             output_file, renamed, terminal_width, wide_option)
from paprof.errors import UserError
from paprof import safetext
from paprof.api import Scan, input_files, refuse_inside

_STYLE = {"same": "green", "improved": "cyan", "regressed": "bold red", "changed": "bold red",
          "ambiguous": "yellow", "reported": "yellow", "noise (same code)": "green",
          "ambiguous (environment)": "yellow"}

_METRICS = ", ".join(gate.GATE_RULES)
_DEFAULT_TOLERANCES = ", ".join(
    f"{metric}={rule.tolerance.spec()}" for metric, rule in gate.GATE_RULES.items()
)


TABLE_ROWS = 200
"""Past this many results the terminal table shows only those that are not "same" (every
row is in --markdown and --junit): 30,000 rows took rich longer than loading them."""


@functools.lru_cache(maxsize=None)
def _slug(family: str, shape: str) -> str:
    """The short name of a shape (``b64_ctx4096_h32x8_d128_p16_fp16``: the dtype stays in
    view), as its family writes it; a shape paprof cannot parse (a foreign report's, a
    family not visible here) as it is."""
    from paprof import registry

    try:
        return registry.family(family).parse(shape).slug() if "=" in shape and family else shape
    except (UserError, ValueError):
        return shape


NARROW_NAME = 12
"""On a narrow terminal, the variant column's width (``fmt.abbreviated``: the names'
common prefix goes first; one family: named in the title instead)."""


def _verdict_table(verdict: gate.Verdict, limit: int = TABLE_ROWS,
                   changes_only: bool = False, narrow: bool = False) -> tuple[Table, int]:
    """The terminal table, and how many "same" rows it left out (over ``limit`` rows, or
    all of them with ``changes_only``). ``narrow`` (a terminal that the wide table does
    not fit): variant names shortened so that they still differ, long cells folded, never
    cut."""
    shown = verdict.results
    if len(shown) > limit or changes_only:
        shown = [r for r in verdict.results if r.outcome != "same"]
    shapes = {r.shape for r in verdict.results}
    one_shape = len(shapes) == 1 and not any(r.shape_now for r in verdict.results)
    families = {r.family for r in verdict.results}
    names = {r.name: r.name for r in shown}
    of = ""
    if narrow and len(families) == 1 and next(iter(families)):
        of = f" of {escape(safetext.shown(next(iter(families))))}"
        names = {r.name: r.variant for r in shown}
    elif narrow:
        from paprof.api import abbreviated

        names = abbreviated(names, NARROW_NAME)
    where = ""
    if one_shape:
        r0 = verdict.results[0]
        where = f" at {escape(safetext.shown(_slug(r0.family, r0.shape) if narrow else r0.shape))}"
    table = Table(title="paprof check" + of + where, title_justify="left",
                  **({"box": box.SIMPLE_HEAD, "pad_edge": False, "collapse_padding": True}
                     if narrow else {}))
    table.add_column("variant", no_wrap=narrow)
    if not one_shape:
        table.add_column("shape", overflow="fold")  # never cut: the dtype is at its end
    for name in ("metric", "baseline", "now", "change", "allowed", "status"):
        table.add_column(name, justify="left" if name in ("metric", "status") else "right",
                         overflow="fold" if narrow and name == "metric" else "ellipsis",
                         no_wrap=narrow and name in ("metric", "baseline", "now"))
    for r in shown:
        cells = [escape(safetext.shown(names[r.name]))]
        if not one_shape:
            shape = _slug(r.family, r.shape) + ("" if r.shape_now is None else f" (now {_slug(r.family, r.shape_now)})")
            cells.append(escape(safetext.shown(shape)))
        cells += [
            escape(safetext.shown(r.metric)), r.fmt_stat(r.baseline), r.fmt_stat(r.now), r.delta_text,
            r.allowed_text, f"[{_STYLE[r.outcome]}]{r.outcome}[/]",
        ]
        table.add_row(*cells)
    return table, len(verdict.results) - len(shown)


@click.command()
@click.option(
    "--baseline", "baseline_path", required=True, metavar="FILE",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Baseline JSON written by 'paprof baseline update'.",
)
@click.option(
    "--runs", type=click.Path(file_okay=False, path_type=Path), default=None,
    help="Run store to check (default ./runs): the latest run of each baseline variant "
    "and shape counts. With --profile: where the new runs go, replacing those of the same "
    "variant, shape and GPU (default: a temporary folder).",
)
@click.option("--variant", "variants", multiple=True,
              help="Gate only this variant of the baseline (repeatable; v3 or "
              "paged_decode/v3). Default: all it holds.")
@click.option(
    "--profile", is_flag=True,
    help="Profile the baseline's variants at its shapes now (needs the GPU and ncu), "
    "measuring the read ceiling in the same call.",
)
@click.option(
    "--static", "static_gate", is_flag=True,
    help="No GPU: compile the baseline's variants with nvcc and gate registers, spills, "
    "shared, local and constant memory and the SASS instruction mix against a baseline "
    "written by 'paprof baseline update --static'.",
)
@click.option(
    "--profiled-launches", "repeat", type=click.IntRange(min=1), default=None, metavar="N",
    help="With --profile: profile N launches per variant; their median is compared and "
    "their spread widens the allowance. Default 1.",
)
@renamed("--repeat", "--profiled-launches", "repeat", type=click.IntRange(min=1))
@click.option(
    "--timed-launches", "timed", type=click.IntRange(min=1), default=30, show_default=True,
    metavar="N", help="With --profile: CUDA-event-timed launches before ncu, the samples of "
    "duration_us_event (the cheap, many-sample path).",
)
@renamed("--timed", "--timed-launches", "timed", type=click.IntRange(min=1))
@click.option(
    "--rounds", type=click.IntRange(min=1), default=3, show_default=True, metavar="N",
    help="With --profile: measurements of now, at most, for an ambiguous statistical "
    "decision (each re-measurement profiles the variant again and pools the samples).",
)
@click.option("--ratchet", is_flag=True,
              help="Let two-sided counts (registers, shared memory, instruction mix) fall "
              "(reported improved); only a rise fails. Without it a change either way fails.")
@click.option("--fail-ambiguous", is_flag=True,
              help="Count a decision still ambiguous after its rounds as a regression "
              "(exit 1). Default: it passes, with its own status and a note.")
@click.option("--exact-counts", is_flag=True,
              help="With --static: fail every instruction count beyond its tolerance. "
              "Default: counts that change while the kernel's registers, spills, stack, "
              "local and shared memory stay put are reported, not failed.")
@click.option("--metric", "metrics", multiple=True,
              help=f"Metric to gate (repeatable): {_METRICS}. Default: every metric the "
              "baseline holds.")
@click.option(
    "--tolerance", "tolerances", multiple=True, metavar="[METRIC=]VALUE[%]",
    help="Allowed change for the worse (repeatable). Without '%' in the metric's unit "
    "(percentage points for a % metric), with '%' relative to the baseline; without "
    f"METRIC= for every metric. Defaults: {_DEFAULT_TOLERANCES}.",
)
@click.option(
    "--allow-mismatch", is_flag=True,
    help="Compare even if GPU model, ncu version, clock control or shape differ from "
    "the baseline's (otherwise exit 2).",
)
@click.option("--junit", type=output_file(), metavar="FILE|-",
              help="Also write the verdict as JUnit XML ('-' prints it).")
@click.option("--markdown", type=output_file(), metavar="FILE|-",
              help='Also write it as Markdown, e.g. --markdown "$GITHUB_STEP_SUMMARY" '
              "('-' prints it).")
@json_option("The verdict (schema paprof.check/1, docs/ci-gpu-runner.md: each result with "
             "both sides' stats, the allowance and what set it, the cause of each regression "
             "as terms and counters)", then="With --junit, --markdown or --json on stdout "
             "the table goes to stderr.")
@click.option("--no-cause", is_flag=True,
              help="Do not decompose what moved (the cause reads each moved run's report).")
@force_option("--junit / --markdown / --json files that are not earlier paprof check "
              "outputs (empty files and earlier outputs are replaced anyway)")
@click.option("--calibration", "calibration_path", metavar="FILE",
              type=click.Path(dir_okay=False, path_type=Path),
              help="Measured noise (paprof calibrate): a timing metric fails only past "
                   "max(tolerance, k x noise); a note says which set the limit.")
@wide_option("they fit its width: variant names shortened, cells and lines wrapped")
def check(baseline_path, runs, profile, static_gate, repeat, timed, rounds, ratchet,
          fail_ambiguous, exact_counts, variants, metrics, tolerances, allow_mismatch, junit,
          markdown, json_out, no_cause, force, calibration_path, wide):
    """Fail when kernels got slower than a baseline: the CI regression gate.

    With 5+ per-launch samples on both sides (--profile --profiled-launches N;
    duration_us_event:
    the CUDA-event-timed launches, --timed-launches N) a timing or throughput metric is decided
    statistically: regressed when a one-sided Mann-Whitney U test says it is worse than
    the baseline by more than the minimum effect (99 % confidence) and the bootstrap
    interval of the median ratio lies beyond 1; improved symmetrically; same when the
    interval lies within +-min effect; else ambiguous, re-measured (with --profile) up
    to --rounds measurements, then reported as ambiguous. Minimum effects: 2 % for
    duration_us_event, 3 % under ncu; --tolerance METRIC=X% sets one.

    Otherwise a value is a regression when it is worse than the baseline by more than
    the larger of the tolerance and the measured spread (baseline + current). Counts
    (DRAM bytes, registers, shared memory, instructions, spills) are exact: no spread
    allowance; registers, shared memory and the instruction mix fail when they move
    either way ("changed") unless --ratchet lets them fall. Higher is better for
    throughput and bandwidth, lower for duration and counts. A check whose allowance
    reaches below zero cannot fail: its row says so.

    --static needs no GPU: nvcc compiles the baseline's variants and the cubin's
    registers, spills, stack, shared/local/constant memory and SASS mix are gated.
    Instruction counts that move while a kernel's registers, spills, stack, local and
    shared memory do not (a deliberate unroll) are reported, not failed, unless
    --exact-counts. Launch-time settings (dynamic shared memory, grid, block) are not
    in the cubin: out of --static's reach (--profile gates them). Cubins are cached by
    the hash of their sources ($XDG_CACHE_HOME/paprof/cubins; PAPROF_CUBIN_CACHE=off:
    none).

    \b
    Exit codes: 0 pass (ambiguous decisions pass, noted: after the re-measurements
      they mean the runner's noise exceeds the minimum effect, and a red build on
      noise teaches people to ignore the gate; --fail-ambiguous makes them 1),
    1 regression (each one named), 2 bad input: missing or corrupt baseline, runs
      from another GPU model, ncu version, clock control, compiler or shape
      (unless --allow-mismatch), no nvcc for --static.

    \b
    Examples:
      paprof check --baseline perf/h200.json --runs runs/
      paprof check --baseline perf/h200.json --profile --profiled-launches 5 \\
          --junit check.xml --markdown "$GITHUB_STEP_SUMMARY" --json verdict.json
      paprof check --static --baseline perf/static.json
    """
    if repeat is not None and not profile:
        raise click.UsageError("--profiled-launches needs --profile (stored runs are not re-measured)")
    if static_gate and (profile or runs):
        raise click.UsageError("--static compiles the sources: it takes no --profile or --runs")
    from contextlib import nullcontext

    from paprof.api import check_json, check_markdown, junit as junit_xml

    started = time.monotonic()
    one_on_stdout(("--junit", junit), ("--markdown", markdown), ("--json", json_out))
    scan = Scan()  # the store is read once: for the inputs and for the runs checked
    inputs = [baseline_path, *input_files([runs or Path("runs")], scan)]
    printed = on_stdout(junit, markdown, json_out)
    junit_path, markdown_path, json_path = (None if on_stdout(o) else o
                                            for o in (junit, markdown, json_out))
    named = [os.path.abspath(p) for p in (junit_path, markdown_path, json_path) if p]
    if len(set(named)) < len(named):
        raise UserError("--junit, --markdown and --json name the same file; name one file each")
    for path, writer in ((junit_path, junit_xml), (markdown_path, check_markdown),
                         (json_path, check_json)):
        if path:  # before any work: profiling can take minutes
            refuse_inside(path, runs or Path("runs"), "the verdict's output")
            writer.check_target(path, force, inputs)
    baseline = _only(gate.load_baseline(baseline_path), variants, baseline_path)
    settings = gate.Settings(
        metrics=tuple(metrics) or None,
        tolerances=dict(gate.parse_tolerance(t) for t in tolerances),
        allow_mismatch=allow_mismatch,
        ratchet=ratchet,
        rounds=rounds,
        fail_ambiguous=fail_ambiguous,
        exact_counts=exact_counts,
        calibration=calibration.load(calibration_path) if calibration_path else None,
    )
    remeasure = kernels = None
    if static_gate:
        from paprof.api import static

        current, said = static.current_for(baseline)
    elif baseline.gate == "static":
        raise UserError(f"{baseline_path} is a static baseline: check it with --static")
    elif profile:
        from paprof.api import recheck

        current = recheck.profile_current(baseline, launches=repeat or 1, runs=runs,
                                          time_launches=timed)
        remeasure = recheck.remeasure_by_profiling(repeat or 1, timed)
    # the stored runs' progress (profiling shows its own)
    shown = (progress.shown("check", since=started) if not (static_gate or profile)
             else nullcontext())
    with shown:
        if not (static_gate or profile):
            names = sorted({e.name for e in baseline.entries})
            kernels, current = gate.load_runs(runs or Path("runs"), variants=names, scan=scan)
        verdict = gate.compare_to_baseline(baseline, current, settings, remeasure=remeasure)
        if static_gate:
            verdict.notes.extend([*said, static.REACH_NOTE])
        elif not no_cause:
            from paprof.api import cause

            cause.attach(verdict, kernels, current)

    # With an output on stdout, the rest goes to stderr so that stdout stays clean.
    err = printed
    # A terminal: its width (--wide: the table's own); not one (CI logs): wide enough that
    # the table does not wrap.
    terminal = terminal_width(err)
    width = 160 if terminal is None else 10_000 if wide else terminal
    # the static gate's counts are exact: its table lists what changed, not 28 "same" rows
    # a kernel
    table, hidden = _verdict_table(verdict, changes_only=static_gate)
    if terminal is not None and not wide and Console(width=10_000).measure(table).maximum > width:
        table, hidden = _verdict_table(verdict, changes_only=static_gate, narrow=True)
    wide = wide or terminal is None
    if hidden == len(verdict.results):  # nothing but "same": one line, not an empty table
        echo(_all_unchanged(verdict, static_gate), err=err, wide=wide)
    else:
        Console(highlight=False, width=width, stderr=err).print(table)
        if hidden:
            echo(f"({hidden} results the same as the baseline are not listed; "
                 "--markdown and --junit have every row)", err=err, wide=wide)
    for r in verdict.regressions:
        echo(f"REGRESSION {safetext.shown(r.message)}", err=err, wide=wide)
    for (family, variant, shape), c in verdict.causes.items():
        name = f"{family}/{variant}" if family else variant
        echo(f"CAUSE {safetext.shown(name)} ({c.outcome}): {safetext.shown(c.line())}", err=err,
             wide=wide)
    for note in verdict.notes:
        echo(f"note: {safetext.shown(note)}", err=err, wide=wide)
    echo(safetext.shown(verdict.summary), err=err, wide=wide)
    if junit_path:
        junit_xml.write_junit(verdict, junit_path, force, inputs)
    if markdown_path:
        check_markdown.write_markdown(verdict, markdown_path, force, inputs)
    if json_path:
        check_json.write_json(verdict, json_path, force, inputs)
    if on_stdout(json_out):
        import json

        click.echo(json.dumps(check_json.verdict_json(verdict), indent=1))
    elif on_stdout(markdown):
        click.echo(check_markdown.verdict_markdown(verdict), nl=False)
    elif on_stdout(junit):
        click.echo(junit_xml.junit_text(verdict), nl=False)
    sys.exit(verdict.exit_code)


def _only(baseline: gate.Baseline, variants, path) -> gate.Baseline:
    """``baseline`` with only the entries of ``variants`` (``v3`` or ``family/v3``; a
    static entry ``v3:kernel`` is v3's); all of them for none or ``all``."""
    if not variants or "all" in variants:
        return baseline
    import dataclasses

    def names(e: gate.Entry) -> set[str]:
        vid = e.variant.split(":")[0]
        return {vid, f"{e.family}/{vid}" if e.family else vid}

    unknown = [v for v in variants if not any(v in names(e) for e in baseline.entries)]
    if unknown:
        held = ", ".join(sorted({n for e in baseline.entries for n in names(e) if "/" in n}
                                or {e.variant for e in baseline.entries}))
        raise UserError(f"baseline {path} holds no {', '.join(unknown)}; it holds: {held}")
    kept = [e for e in baseline.entries if names(e) & set(variants)]
    return dataclasses.replace(baseline, entries=kept)


def _all_unchanged(verdict: gate.Verdict, static_gate: bool) -> str:
    """The one line of a verdict with nothing but "same" results."""
    pairs = len({(r.family, r.variant, r.shape) for r in verdict.results})
    metrics = len({r.metric for r in verdict.results})
    what = "kernels" if static_gate else "variant/shape pairs"
    return (f"all {pairs} {what} unchanged ({metrics} metrics each, as in the baseline; "
            "--markdown and --junit list every one)")


@click.group()
def baseline():
    """Write the baseline that 'paprof check' compares against."""


@baseline.command()
@click.option("--runs", type=click.Path(path_type=Path), default=Path("runs"),
              show_default=True, help="Run store (or report) to take the baseline from.")
@click.option("--variant", "variants", multiple=True,
              help="Variant to include (repeatable; v3 or paged_decode/v3). Default: all.")
@click.option("--metric", "metrics", multiple=True,
              help=f"Metric to record (repeatable): {_METRICS}. Default: the family's own "
              f"gate metrics (its hint), else {', '.join(gate.DEFAULT_METRICS)}.")
@click.option("--out", required=True, type=output_file(), metavar="FILE|-",
              help="Baseline JSON to write ('-' prints it; the summary then goes to stderr).")
@force_option("FILE if it exists")
@click.option("--static", "static_gate", is_flag=True,
              help="No GPU, no runs: compile the family's CUDA variants with nvcc at --shape "
              "and record per kernel what 'check --static' gates.")
@click.option("--family", default=None, help="With --static: the family (needed when several are visible and --variant does not say which).")
@click.option("--shape", "shapes", multiple=True, metavar="KEY=VALUE,...",
              help="With --static: the family's parameters (default: its defaults); "
              "repeat for several shapes in one baseline ('check --static' checks each).")
@click.option("--arch", default=None, metavar="sm_XX",
              help="With --static: the GPU target nvcc compiles for (sm_90 for an H100 or H200, "
              "sm_80 for an A100). Default: the family's own (its arch); a variant that names "
              "its own target (sm_90a) keeps it. 'check --static' reuses the baseline's.")
def update(runs, variants, metrics, out, force, static_gate, family, shapes, arch):
    """Write a baseline from the latest runs: per variant and shape the median and
    spread of each metric, and the runs' provenance (GPU, ncu version, clocks, sections).

    \b
    Example:
      paprof baseline update --runs runs/ --variant v3 --out perf/h200.json
      paprof baseline update --static --arch sm_90 --shape batch=8 \\
          --shape batch=64 --out perf/static.json
    """
    if static_gate:
        return _update_static(variants, out, force, family, shapes, arch)
    say = _say(out)
    if family or shapes or arch:
        raise click.UsageError("--family, --shape and --arch go with --static (runs know theirs)")
    scan = Scan()  # the store is read once: for the inputs and for the baseline
    with progress.shown("baseline update"):
        inputs = input_files([runs], scan)
        refuse_inside(out, runs, "the baseline")
        gate.check_baseline_target(out, force, inputs)  # before reading the runs
        made = gate.make_baseline(
            runs, metrics=tuple(metrics) or None, variants=variants, scan=scan
        )
        gate.save_baseline(made, out, force=force, inputs=inputs)
    for e in made.entries[:SHOWN_ENTRIES]:
        stats = ", ".join(
            f"{m} {gate.fmt_value(s.value, gate.unit(m))}" for m, s in e.metrics.items()
        )
        say(safetext.shown(f"{e.name} at {e.shape} on {e.provenance.gpu or 'unknown GPU'}: {stats}"))
    if len(made.entries) > SHOWN_ENTRIES:
        say(f"... and {len(made.entries) - SHOWN_ENTRIES:,} more entries (the file holds every one)")
    say(f"wrote {safetext.shown(out)} ({len(made.entries)} entries)")


SHOWN_ENTRIES = 50
"""``baseline update`` prints its first entries, one line each, and counts the others:
a sweep's store of 10,000 runs wrote 10,000 lines (a second of printing)."""


def _say(out):
    """``echo`` (fitted to a terminal) for the summary of a command that writes ``out``:
    on stderr when ``out`` is printed on stdout ('-')."""
    return functools.partial(echo, err=on_stdout(out))


def _update_static(variants, out, force, family, shapes, arch):
    from paprof import registry
    from paprof.api import static

    say = _say(out)

    gate.check_baseline_target(out, force)
    fam = registry.family_for(variants, family)
    params = list(dict.fromkeys(fam.parse(s) for s in shapes or [None]))
    made, notes = static.make_static_baseline(fam, params, variants, arch)
    gate.save_baseline(made, out, force=force)
    for e in made.entries:
        m = e.metrics
        local = m.get("local_mem_bytes")
        say(f"{e.name} at {e.shape}: {m['registers_per_thread'].value:g} registers, "
                   f"{m['spill_stores_bytes'].value:g} bytes spilled, "
                   + (f"{local.value:g} bytes local memory, " if local is not None else "")
                   + f"{m['shared_mem_static_bytes'].value:g} bytes static shared memory")
    for note in [*notes, static.REACH_NOTE]:
        say(f"note: {note}")
    say(f"wrote {out} ({len(made.entries)} kernels, {made.entries[0].provenance.compiler})")


COMMANDS = [check, baseline]
