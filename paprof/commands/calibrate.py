"""``paprof calibrate``: measure the noise the gate must rise above (A/A repeats)."""

from __future__ import annotations

from pathlib import Path

import click

from paprof.api import calibration
from paprof.commands import echo, force_option, on_stdout, output_file, renamed
from paprof.errors import UserError


@click.command("calibrate")
@click.option("--out", required=True, type=output_file(), metavar="FILE|-",
              help="The calibration file to write (JSON; '-' prints it, the summary then "
              "goes to stderr).")
@click.option("--runs", "runs", multiple=True, type=click.Path(exists=True, path_type=Path),
              help="Runs folder(s) holding several runs of the same variant (repeatable); "
                   "no GPU needed.")
@click.option("--family", default=None, help="On the GPU: the family to measure.")
@click.option("--variant", "variants", multiple=True,
              help="On the GPU: variant id (repeatable; default: every variant of --family).")
@click.option("--shape", default="", metavar="KEY=VALUE,...", help="On the GPU: the shape.")
@click.option("--repeats", default=5, show_default=True, type=click.IntRange(2),
              help="On the GPU: runs of each variant (each a fresh process).")
@click.option("--timed-launches", "timed", default=None, type=click.IntRange(5), metavar="N",
              help="On the GPU: CUDA-event-timed launches per run (default as paprof run).")
@renamed("--timed", "--timed-launches", "timed", type=click.IntRange(5))
@click.option("--metric", "metrics", multiple=True,
              help="Metric to calibrate (repeatable; default: every timing metric found).")
@click.option("--k", "k", default=calibration.DEFAULT_K, show_default=True,
              type=click.FloatRange(min=1.0), help="The multiple of the noise a change must pass.")
@force_option("FILE if it exists")
def calibrate(out, runs, family, variants, shape, repeats, timed, metrics, k, force):
    """Measure the noise of each timing metric, per GPU and family, from A/A repeats: the
    same variant measured several times, each in a fresh process.

    The noise of a metric is the coefficient of variation (standard deviation over mean)
    of its per-run values (each run's median over its launches, as the gate takes it),
    the largest over the variants measured. 'paprof check --calibration FILE' then fails
    a timing metric only past max(the tolerance, K x noise), and says which set the limit.
    Counts (registers, bytes, instructions) are never calibrated: they do not drift.

    \b
    Without a GPU: --runs with several runs of one variant (e.g. runs/a and
      runs/b, each from 'paprof run').
    On a GPU: --family (and --variant, --shape) run --repeats times under ncu.

    \b
    Exit codes: 0 written; 2 bad input (no GPU and no --runs, no repeated runs,
      FILE exists without --force).

    \b
    Examples:
      paprof calibrate --runs runs/a --runs runs/b --out perf/noise.json
      paprof calibrate --family paged_decode --variant v3 --repeats 5 \\
          --out perf/noise.json
      paprof check --baseline perf/h200.json --calibration perf/noise.json
    """
    from paprof.api import Scan, input_files, refuse_inside

    scan = Scan()
    inputs = input_files(list(runs), scan) if runs else []
    for folder in runs:
        refuse_inside(None if on_stdout(out) else out, folder, "the calibration")
    calibration.check_target(out, force, inputs)  # before any GPU work
    if runs:
        from paprof.api import gate

        table = gate.load_table(list(runs), scan=scan)
        repeats_found = calibration.repeats_from_table(table, metrics or None)
        source = "runs " + ", ".join(map(str, runs))
    else:
        from paprof.api import query_gpus

        if not query_gpus():
            raise UserError("no GPU here (nvidia-smi lists none) and no --runs: give --runs "
                            "folders holding several runs of the same variant")
        if not family:
            raise UserError("on the GPU, name the family to measure (--family)")
        from paprof.api import recheck
        from paprof import registry

        chosen = list(variants) or [v.id for v in registry.family(family).variants]
        repeats_found = recheck.aa_repeats(family, chosen, shape, repeats, metrics or None,
                                           timed)
        source = f"gpu: {repeats} A/A runs of {family} {', '.join(chosen)}"
    noise = calibration.from_repeats(repeats_found, metrics or None)
    written = calibration.save(calibration.make(noise, source, k), out, force, inputs)
    err = on_stdout(out)
    for n in noise:
        from paprof.safetext import shown  # the GPU and family names come from stored runs

        echo(shown(f"{n.gpu}  {n.family}  {n.metric}: noise {n.relative * 100:.3g} % "
                   f"({n.repeats}+ runs of {len(n.variants)} variant/shape), limit "
                   f"{k:g} x = {k * n.relative * 100:.3g} %"), err=err)
    if not err:
        click.echo(f"wrote {written}")


COMMANDS = [calibrate]
