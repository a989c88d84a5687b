"""The ``paprof`` command: a thin click layer over the library.

Each verb lives in ``paprof/commands/<verb>.py`` and only converts options, calls one
library function and prints. User-facing errors (``paprof.errors.PaprofError``) are
caught here, once: one line on stderr and the error's exit code, no traceback.
"""

from __future__ import annotations

import sys

import click

from paprof import __version__
from paprof.errors import PaprofError


class _Group(click.Group):
    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except PaprofError as err:
            click.echo(f"paprof: error: {err}", err=True)
            sys.exit(err.exit_code)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="paprof")
def main():
    """Profile GPU kernel variants under Nsight Compute and explain why one is faster.

    \b
    Typical session:
      paprof list                         the kernel variants and their ideas
      paprof bench --variant all          CUDA-event timings and bandwidth (GPU)
      paprof run --variant v2 --variant v3  verify, then profile under ncu (GPU)
      paprof table runs/                  any .ncu-rep as a table with its bottleneck
      paprof compare v2 v3 --out r.html   the comparative report
      paprof check --baseline b.json      the DRAM-throughput regression gate

    Exit codes: 0 ok, 1 a finding (regression, failed verification),
    2 bad input or environment.
    """


def _register():
    from paprof.commands import bench, check, compare, list_variants, run, sweep, table

    for module in (list_variants, bench, run, table, compare, check, sweep):
        for command in module.COMMANDS:
            main.add_command(command)


_register()

if __name__ == "__main__":  # pragma: no cover
    main()
