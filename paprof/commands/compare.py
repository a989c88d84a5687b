"""``paprof compare``: the comparative report (HTML, optionally Markdown) of 2+ variants."""

from __future__ import annotations

import webbrowser
from pathlib import Path

import click

from paprof.commands import (echo, force_option, json_option, on_stdout, one_on_stdout,
                             output_file, step_range_option)

from paprof.api import DEFAULT_OUT, DEFAULT_RUNS, write_report
from paprof.safetext import shown


@click.command("compare")
@click.argument("variants", nargs=-1, required=True, metavar="VARIANT VARIANT [VARIANT...] | REPORT")
@click.option("--baseline", default=None, metavar="VARIANT",
              help="Compare every VARIANT with this one (a run-store id or .ncu-rep path, "
              "shown first): each variant's cause is told against it. Without it the "
              "variants are told as a chain, each against the one before.")
@click.option("--runs", type=click.Path(path_type=Path), default=DEFAULT_RUNS, show_default=True,
              help="Run store holding the runs of variant ids (the shipped H200 runs: examples/h200).")
@click.option("--shape", default=None, metavar="SLUG|SPEC",
              help="Compare runs at this shape (a slug like b64_ctx4096_h32x8_d128_p16_fp32 or "
              "a --shape spec). Default: the first variant's latest run sets the shape.")
@click.option("--out", type=output_file(), default=None, metavar="FILE.html|-",
              help=f"HTML report ('-' prints it). Default: {DEFAULT_OUT}, unless only --markdown "
              "or --json is asked for (then no HTML). An earlier paprof report there is "
              "replaced (and said so); any other file is kept unless --force.")
@click.option("--markdown", type=output_file(), default=None, metavar="FILE.md|-",
              help="Also write the report as Markdown (a PR comment); '-' prints it.")
@json_option("Also the explanation (schema paprof.explanation/1: runs, each step's time "
             "decomposition, causes and counters, kernel view, comparability)")
@click.option("--cross", is_flag=True,
              help="Compare runs at different parameters or on different GPUs (refused without "
              "it); every headline then says what differs.")
@step_range_option
@click.option("--open", "open_browser", is_flag=True, help="Open the HTML report in the web browser.")
@force_option("--out / --markdown / --json files that are not paprof reports")
def compare(variants, runs, shape, out, markdown, json_out, cross, step_range, open_browser, force,
            baseline):
    """Compare VARIANTs in the order given: run-store ids (the latest run of that variant
    and shape, e.g. v2 or paged_decode/v2) or .ncu-rep paths. One .ncu-rep that paprof
    did not write and that holds several kernels (a tutorial's versions in one ncu
    run): its kernels, in launch order.

    The report opens with a verdict table: each variant's time, speedup against the
    baseline (--baseline, else the first variant), bottleneck and the one-line cause of
    its difference from it; variants within 2 % of each other are a tie. Every section
    behind it opens on a click.

    Each step (v2 -> v3; with --baseline: v2 -> v3, v2 -> v4 ...) gets its own story: first its cause, the largest term of the
    time difference split by the warp-time identity (instructions, stall reasons, warps in
    flight, idle schedulers, clock, kernels new or gone: the terms add up to the
    difference) with the counters that moved it; what limits the faster variant now and
    what ncu's rules estimate would move it next; then the details. A variant is compared
    as one step: all its kernel launches of one repetition, summed. Runs at different
    parameters or on different GPUs are refused unless --shape picks one or --cross.

    \b
    Example, on any machine (the shipped H200 runs):
      paprof compare v2 v3 --runs examples/h200 --out r.html --markdown r.md
      paprof compare --baseline v2 v3 v4 v5 --runs examples/h200
      paprof compare v2 v3 --runs examples/h200 --json explanation.json
    """
    from paprof import progress

    one_on_stdout(("--out", out), ("--markdown", markdown), ("--json", json_out))
    if out is None and markdown is None and json_out is None:
        out = DEFAULT_OUT
    with progress.shown("compare"):
        result = write_report(list(variants), runs=runs, out=out, markdown=markdown,
                              shape=shape, force=force, cross=cross, step_range=step_range,
                              json_out=json_out, baseline=baseline)
    ctx = result.context
    for warning in ctx.warnings:
        echo(f"paprof: warning: {shown(warning)}", err=True)
    for option, text in ((out, result.html_text), (markdown, result.markdown_text),
                         (json_out, result.json_text)):
        if on_stdout(option):
            click.echo(text, nl=False)
    # With a report on stdout, the summary goes to stderr so stdout stays clean.
    err = on_stdout(out, markdown, json_out)
    for step in ctx.steps:  # fitted to a terminal's width (the report has them whole)
        echo(shown(f"{step.title}: {step.headline}; {step.bottleneck_before_text} -> "
                   f"{step.bottleneck_after_text}", limit=None), err=err)
        if step.cause:
            echo(f"  {shown(step.cause, limit=None)}", err=err)
    for path in (result.html, result.markdown, result.json):
        if path is None:
            continue
        again = " (replaced the earlier paprof report there)" if path in result.overwrote else ""
        click.echo(f"wrote {shown(path)}{again}", err=err)
    if open_browser and result.html is not None:
        _open(result.html)


def _open(path: Path) -> None:
    """Open ``path`` in the web browser, or say in one line that none could."""
    try:
        opened = webbrowser.open(path.resolve().as_uri())
    except webbrowser.Error:
        opened = False
    if not opened:
        click.echo(f"paprof: warning: --open: no web browser found on this machine; "
                   f"open {path} yourself", err=True)


COMMANDS = [compare]
