"""``paprof sweep``, ``paprof sweep-report`` and ``paprof merge``: thin over ``paprof.sweep``."""

from __future__ import annotations

import functools
import os
from pathlib import Path

import click

from paprof import registry, safetext
from paprof.commands import (echo, force_option, json_option, on_stdout, output_file, renamed,
                             terminal_width, wide_option)
from paprof.errors import UsageError, VerificationError
from paprof.api import CLOCK_CONTROLS
from paprof.api import PRESETS


def _child_args(variants, family, grid, shape, mode, force, name, launches, rounds, seed, preset,
                clock_control, profile_launches) -> list[str]:
    """The options a ``--gpus`` worker gets (it adds ``--shard`` and ``--runs``)."""
    args = [a for v in variants for a in ("--variant", v)]
    args += [a for g in grid for a in ("--grid", g)]
    args += ["--family", family, "--shape", shape or "", f"--{mode}", "--name", name,
             "--timed-launches", str(launches), "--rounds", str(rounds), "--preset", preset,
             "--clock-control", clock_control, "--profiled-launches", str(profile_launches)]
    args += ["--seed", str(seed)] if seed is not None else []
    return args + (["--force"] if force else [])


@click.command("sweep")
@click.option("--variant", "variants", multiple=True, required=True,
              help="Variant id (repeatable), family/id, or 'all'.")
@click.option("--family", default=None, help="Kernel family (needed for 'all' when several are visible).")
@click.option("--grid", "grid", multiple=True, required=True, metavar="KEY=VALUES",
              help="A swept parameter (repeatable, one key each): values a,b,c and ranges "
                   "a..bxF (geometric) or a..b+S (arithmetic), e.g. batch=1,4,16,64 or "
                   "context=1024..131072x2.")
@click.option("--shape", default="", metavar="KEY=VALUE,...",
              help="Fixed parameters under the grid (the family's defaults otherwise).")
@click.option("--bench", "mode", flag_value="bench", default=True,
              help="Verify and time each point with CUDA events (the default).")
@click.option("--profile", "mode", flag_value="profile",
              help="Verify, time and profile each point under ncu into the run store.")
@click.option("--runs", "runs_dir", type=click.Path(file_okay=False, path_type=Path), default="runs",
              show_default=True, help="Run store the points go into.")
@force_option("the points already stored: measure them again")
@click.option("--shard", default=None, metavar="K/N",
              help="Run only shard K of N (K from 1 to N): every N-th point from the K-th.")
@click.option("--gpus", default=None, metavar="0,1,...",
              help="One worker per GPU (CUDA_VISIBLE_DEVICES), each on a shard, stored in "
                   "RUNS-shards/shard-I and merged into RUNS at the end.")
@click.option("--name", default=None,
              help="The sweep's name (its manifest RUNS/sweeps/NAME.json); default: "
                   "FAMILY-MODE-<digest of variants, grid and fixed parameters>.")
@click.option("--timed-launches", "launches", default=100, show_default=True, metavar="N",
              type=click.IntRange(5), help="bench: timed launches per round.")
@renamed("--launches", "--timed-launches", "launches", type=click.IntRange(5))
@click.option("--rounds", default=2, show_default=True, type=click.IntRange(1), metavar="N",
              help="bench: rounds over the variants at each point.")
@click.option("--seed", type=int, default=None, help="Input seed (default: fresh inputs).")
@click.option("--preset", type=click.Choice(list(PRESETS)), default="default", show_default=True,
              help="profile: ncu sections.")
@click.option("--clock-control", type=click.Choice(CLOCK_CONTROLS), default="none",
              show_default=True, help="profile: ncu --clock-control.")
@click.option("--profiled-launches", "profile_launches", default=1, show_default=True,
              metavar="N", type=click.IntRange(1), help="profile: launches of each variant profiled.")
@renamed("--profile-launches", "--profiled-launches", "profile_launches", type=click.IntRange(1))
@click.option("--list", "list_only", is_flag=True,
              help="Print this shard's points and what is stored, and measure nothing (no GPU).")
@click.option("--report", "report", type=output_file(), default=None, metavar="FILE.html|-",
              help="Afterwards write the sweep report there (and FILE.md, FILE.regime.json); "
              "'-' prints the HTML (alone), the sweep's own lines then go to stderr.")
@wide_option("the --list columns are as wide as their cells and its lines wrap")
def sweep(variants, family, grid, shape, mode, runs_dir, force, shard, gpus, name, launches, rounds,
          seed, preset, clock_control, profile_launches, list_only, report, wide):
    """Measure variants over a grid of shapes: every point verified, timed and (with
    --profile) profiled into the run store.

    Points are the Cartesian product of the --grid axes over the --shape fixed
    parameters, in order (the last axis varies fastest). Resumable: a point whose result
    is stored (RUNS/<gpu>/<family>/<variant>/<shape>.bench.json, or the .ncu-rep of
    --profile) is passed over unless --force, so after an interrupt the same command
    goes on where it stopped. A point a variant cannot take is recorded as skipped with
    its reason. The manifest RUNS/sweeps/NAME.json records the grid and each point's
    status. Progress and an ETA go to stderr. Needs a GPU (and ncu for --profile),
    except with --list.

    \b
    Examples:
      paprof sweep --variant v5 --variant v6 --grid batch=1,4,16,64 \\
          --grid context=4096,32768 --shape dtype=fp16
      paprof sweep ... --profile --runs sweep-runs --report sweep.html
      paprof sweep ... --shard 2/8          # job 2 of a CI matrix or Slurm array
      paprof sweep ... --gpus 0,1,2,3       # a worker per GPU, merged into --runs
      paprof sweep-report --runs sweep-runs --out sweep.html

    Exit codes: 0 ok, 1 a variant failed verification at some point, 2 bad input or
    environment.
    """
    from paprof.api import grid as grids
    from paprof.api import manifest as manifests
    from paprof.api import results
    from paprof.api import SweepSettings, run_sweep

    from paprof import names

    # with the report on stdout (--report -), the sweep's own lines go to stderr
    say = functools.partial(echo, err=on_stdout(report), wide=wide)
    if name is not None:
        names.check(name, "--name")
    chosen = registry.resolve(variants, family)
    fam = registry.family_of(chosen[0])
    the_grid = grids.make_grid(fam.params, list(grid), shape)
    k, n = grids.parse_shard(shard)
    defn = manifests.definition(fam.name, [v.id for v in chosen], the_grid, mode)
    name = name or manifests.default_name(defn)
    if list_only:
        points = grids.shard(the_grid.points, k, n)
        # on a terminal the columns are as wide as their longest cell, else 40
        fit = not wide and terminal_width(on_stdout(report)) is not None
        lw, sw = ((max((len(p.label) for p in points), default=0),
                   max((len(p.slug or "-") for p in points), default=0)) if fit else (40, 40))
        for p in points:
            held = [v.id for v in chosen if p.params is not None
                    and results.stored(runs_dir, None, fam.name, v.id, p.slug, mode)]
            state = f"invalid: {p.error}" if p.error else ("stored: " + ", ".join(held) if held else "to do")
            say(f"{p.index + 1:>5}  {p.label:<{lw}}  {p.slug or '-':<{sw}}  {state}")
        say(f"sweep {name}: {len(the_grid.points)} points; shard {k}/{n} holds "
                   f"{len(grids.shard(the_grid.points, k, n))}")
        return
    settings = SweepSettings(mode=mode, force=force, launches=launches, rounds=rounds, seed=seed,
                             preset=preset, clock_control=clock_control,
                             profile_launches=profile_launches)
    ids = None
    if gpus is not None:
        from paprof.api import parse_gpus

        ids = parse_gpus(gpus)
        if len(ids) == 1:
            os.environ["CUDA_VISIBLE_DEVICES"] = ids[0]  # one GPU: as without --gpus
            ids = None
    if ids:
        from paprof.api import run_on_gpus

        args = _child_args([v.name for v in chosen], fam.name, grid, shape, mode, force,
                           name, launches, rounds, seed, preset, clock_control, profile_launches)
        workers, merged = run_on_gpus(args, ids, runs_dir, shard=(k, n), name=name)
        say(f"merged {len(workers)} shard stores into {runs_dir}: {merged.copied} results "
                   f"copied, {merged.identical} already there")
        for line in merged.conflicts:
            echo(f"paprof: warning: conflict: {safetext.shown(line)}", err=True)
        data = manifests.load(manifests.path(runs_dir, name))
        failed_workers = [w for w in workers if w.returncode]
        counts = manifests.status_counts(data)
        say(f"sweep {name}: " + ", ".join(f"{c} {s}" for s, c in counts.items() if c))
        if report:
            _write_report(runs_dir, report, name, _md_beside(report))
        if failed_workers:
            worst = max(w.returncode for w in failed_workers)
            logs = ", ".join(str(w.log) for w in failed_workers)
            if worst == 1 and all(w.returncode == 1 for w in failed_workers):
                raise VerificationError(f"variants failed verification in {len(failed_workers)} "
                                        f"shard(s); see {logs}")
            raise UsageError(f"{len(failed_workers)} of {len(workers)} workers failed; see {logs}")
        return
    result = run_sweep(fam, chosen, the_grid, runs_dir, settings, shard=(k, n), name=name)
    say(f"sweep {name}, shard {k}/{n}: {result.points} points; {result.measured} "
               f"variant-points measured now, {result.resumed} already stored, "
               f"{len(result.skipped)} skipped, {len(result.failed)} failed, "
               f"{len(result.invalid)} invalid points")
    for line in result.skipped[:10] + result.invalid[:10]:
        say(f"  skipped {safetext.shown(line)}")
    hidden = max(len(result.skipped) - 10, 0) + max(len(result.invalid) - 10, 0)
    if hidden:
        say(f"  ... and {hidden} more (see {result.path})")
    say(f"manifest: {result.path}")
    if report:
        _write_report(runs_dir, report, name, _md_beside(report))
    if result.failed:
        raise VerificationError(f"{len(result.failed)} variant-point(s) failed verification: "
                                + "; ".join(result.failed[:3]))


def _md_beside(html) -> Path | None:
    if on_stdout(html):
        return None
    html = Path(html)
    return html.with_name(html.name.rsplit(".", 1)[0] + ".md")


def _write_report(runs, out: Path, name: str | None, markdown=None, regime=None, noise=None,
                  force=False):
    from paprof import progress
    from paprof.api import NOISE_PCT, write_sweep_report

    with progress.shown("sweep-report"):
        done = write_sweep_report(runs, out, markdown, regime, name=name,
                                  noise_pct=NOISE_PCT if noise is None else noise, force=force)
    err = on_stdout(out, markdown, regime)  # stdout holds a report: the rest to stderr
    for warning in done.context.warnings:
        echo(f"paprof: warning: {safetext.shown(warning)}", err=True)
    for text in (done.html_text, done.regime_text,
                 done.markdown_text if on_stdout(markdown) else None):
        if text is not None:
            click.echo(text, nl=False)
    for sentence in done.context.changes:
        echo(f"crossover: {safetext.shown(sentence)}", err=err)
    for path in (done.html, done.markdown, done.regime):
        if path is not None:
            again = " (replaced the earlier paprof report there)" if path in done.overwrote else ""
            echo(f"wrote {safetext.shown(path)}{again}", err=err)
    return done


SWEEP_OUT = "paprof-sweep.html"
"""sweep-report's HTML report when no output is named."""


@click.command("sweep-report")
@click.option("--runs", type=click.Path(file_okay=False, path_type=Path), default="runs",
              show_default=True, help="Run store holding the sweep (a merged store too).")
@click.option("--name", default=None, help="Which sweep, when the store holds several.")
@click.option("--out", type=output_file(), default=None, metavar="FILE.html|-",
              help=f"HTML report ('-' prints it). Default: {SWEEP_OUT}, unless only --markdown "
              "or --json is asked for (then no HTML).")
@click.option("--markdown", type=output_file(), default=None, metavar="FILE.md|-",
              help="Also the Markdown report; '-' prints it.")
@json_option("The regime map", then="Without --json it is written beside --out, as "
             "NAME.regime.json.")
@click.option("--noise", type=float, default=None, metavar="PCT",
              help="Times within PCT % of the fastest are a tie (default 2).")
@force_option("--out / --markdown / --json files that are not paprof reports")
def sweep_report(runs, name, out, markdown, json_out, noise, force):
    """The sweep report: time, TB/s, TFLOP/s and % of the measured ceiling against each
    swept axis (one line per variant), the regime map (the winner and, when profiled,
    the bottleneck at every point) and the crossovers in words; the regime JSON a
    dispatcher can read.

    \b
    Example:
      paprof sweep-report --runs sweep-runs --out sweep.html --markdown sweep.md
    """
    if out is None and markdown is None and json_out is None:
        out = SWEEP_OUT
    _write_report(runs, out, name, markdown, json_out, noise, force)


@click.command("merge")
@click.argument("stores", nargs=-1, required=True, type=click.Path(file_okay=False, path_type=Path))
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="The store to merge into (created if needed).")
def merge(stores, out):
    """Merge run stores (sweep shards, other machines) into --out.

    Runs, bench records and sweep manifests are copied to the same places. The same
    file twice is kept once; the same point measured twice keeps both launches (the
    second as <shape>.<digest>.*; readers take the newest), and a difference in their
    provenance (GPU, driver, ncu, clocks, preset, commit) is reported as a conflict.
    compare, check and sweep-report read the merged store.

    \b
    Example:
      paprof merge shard-1 shard-2 shard-3 --out runs
    """
    from paprof import progress
    from paprof.api import merge_stores

    with progress.shown("merge"):
        res = merge_stores(list(stores), out)
    for line in res.kept_both:
        echo(f"kept both: {safetext.shown(line)}")
    for line in res.conflicts:
        echo(f"paprof: warning: conflict: {safetext.shown(line)}", err=True)
    echo(f"merged {len(stores)} store(s) into {out}: {res.copied} results copied, "
         f"{res.identical} already there, {len(res.kept_both)} kept twice, "
         f"{len(res.conflicts)} conflicts; sweeps: "
         f"{safetext.shown(', '.join(res.manifests) or 'none')}")


COMMANDS = [sweep, sweep_report, merge]
