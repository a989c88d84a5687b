"""``paprof table``: any .ncu-rep as a tidy table with a bottleneck column."""

from __future__ import annotations

from pathlib import Path

import click

from paprof.commands import (force_option, json_option, on_stdout, one_on_stdout, output_file,
                             step_range_option, terminal_width, wide_option)
from paprof.errors import UsageError

from paprof.api import export
from paprof.api import load_reports, variant_rows
from paprof.api import Scan, input_files, refuse_inside
from paprof import safetext


@click.command("table")
@click.argument("reports", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(export.FORMATS), default="text",
              show_default=True, help="text: key columns; csv/json/parquet: every scalar column.")
@click.option("--out", type=output_file(), metavar="FILE|-",
              help="Write to FILE instead of stdout ('-': stdout; parquet needs --out). An "
              "existing FILE is kept unless --force; one of the reports read, always.")
@click.option("--columns", multiple=True, metavar="A,B,...",
              help="Only these columns, in this order (see --format csv for the names).")
@click.option("--traffic", is_flag=True,
              help="The traffic per memory level instead of the key columns: SM<->L1, "
              "shared memory, L1<->L2, L2<->DRAM, instructions (default preset's sections).")
@click.option("--per-variant", is_flag=True,
              help="One row per step: the kernel launches of one repetition summed "
              "(docs/explanations.md).")
@wide_option("the text table fits its width: kernel names shortened, the least telling "
             "columns left out, the evidence wrapped")
@step_range_option
@json_option("Every scalar column (the same as --format json [--out FILE])")
@force_option("an existing --out / --json FILE")
def table(reports, fmt, out, columns, traffic, per_variant, step_range, json_out, force, wide):
    """Tabulate REPORT_OR_DIR... (.ncu-rep files, folders searched recursively).

    One row per profiled kernel launch, with the bottleneck label and its evidence.

    \b
    Examples:
      paprof table examples/h200
      paprof table examples/h200 --per-variant --traffic
      paprof table runs/ --json rows.json
      paprof table runs/ --format parquet --out rows.parquet
    """
    one_on_stdout(("--out", out), ("--json", json_out))
    if json_out is not None:
        if out is not None or fmt not in ("text", "json"):
            raise UsageError("--json [FILE] is --format json [--out FILE]: give one of them")
        fmt, out = "json", json_out
    from paprof import progress

    scan = Scan()  # the folders named are read once: for the inputs and for the table
    with progress.shown("table"):
        for folder in reports:
            refuse_inside(None if on_stdout(out) else out, folder, "the table")
        export.check_output(fmt, out, force, inputs=input_files(reports, scan))
        df = load_reports(reports, scan=scan, step_range=step_range)
        if per_variant:
            df = variant_rows(df).drop(columns=["launch"])  # a row is a step of several launches
        chosen = export.parse_columns(columns, df)
        text = export.render(df, fmt, chosen, out, force, traffic=traffic,
                             width=None if wide or out is not None else terminal_width())
    for note in df.attrs.get("notes", ()):
        click.echo(f"paprof: note: {safetext.shown(note)}", err=True)
    if isinstance(text, bytes):  # parquet on stdout
        from paprof import outputs

        outputs.write(outputs.STDOUT, text)
    elif text is not None:
        click.echo(text, nl=False)
    keys = export.TRAFFIC_TEXT_COLUMNS if traffic else export.TEXT_COLUMNS
    shown = chosen if chosen is not None else (
        [c for c in keys if c in df] if (fmt == "text" or traffic) else list(df.columns))
    note = export.missing_note(df, shown)
    if note:
        click.echo(note, err=True)
    if out is not None and not on_stdout(out):
        click.echo(f"wrote {len(df)} rows to {safetext.shown(out)}", err=True)


COMMANDS = [table]
