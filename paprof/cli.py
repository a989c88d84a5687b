"""The ``paprof`` command: a thin click layer over the library.

Each verb lives in ``paprof/commands/<verb>.py`` and only converts options, calls one
library function and prints. User-facing errors (``paprof.errors.PaprofError``) are
caught here, once: one line on stderr and the error's exit code, no traceback. So is
an interrupt: one line and exit 130 (``paprof.entry`` covers the imports before this).
"""

from __future__ import annotations

import sys
from contextlib import contextmanager

import click

from paprof import __version__
from paprof.interrupts import Terminated, interrupted, terminated
from paprof.errors import PaprofError


@contextmanager
def _interrupts():
    """Ctrl-C as one line and exit 130 (click would print "Aborted!" and exit 1); SIGTERM
    (``paprof.entry``) as one line and exit 143."""
    try:
        yield
    except KeyboardInterrupt as err:
        detail = str(err.args[0]) if err.args and isinstance(err.args[0], str) else ""
        say = terminated if isinstance(err, Terminated) else interrupted
        raise SystemExit(say(detail.splitlines()[0] if detail else "")) from None


_NoArgsIsHelp = getattr(click.exceptions, "NoArgsIsHelpError", ())
"""click >= 8.2 raises it for a group called without a command."""


def _usage_line(err: click.ClickException) -> str:
    """A click error as paprof's one line (click prints usage, a hint and the error)."""
    message = " ".join(err.format_message().split())
    if isinstance(err, click.UsageError):
        words = err.ctx.command_path.split()[1:] if err.ctx is not None else []
        message += f" (see {' '.join(['paprof', *words, '--help'])})"
    return f"paprof: error: {message}"


class _Group(click.Group):
    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True,
             **extra):
        try:
            code = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except _NoArgsIsHelp as err:  # bare 'paprof' or 'paprof baseline': the help
            click.echo(err.ctx.get_help())
            code = err.exit_code
        except click.ClickException as err:
            click.echo(_usage_line(err), err=True)
            code = err.exit_code
        except click.Abort:  # end of input at a prompt
            code = 1
        if not standalone_mode:
            return code
        sys.exit(code if isinstance(code, int) else 0)

    def make_context(self, *args, **kwargs):
        with _interrupts():
            return super().make_context(*args, **kwargs)

    def resolve_command(self, ctx, args):
        """An unknown command names the nearest ones ("paprof tabel": did you mean table?)."""
        try:
            return super().resolve_command(ctx, args)
        except click.UsageError as err:
            import difflib

            name = args[0] if args else ""
            near = difflib.get_close_matches(name, self.list_commands(ctx), n=2, cutoff=0.6)
            if not near or name.startswith("-"):
                raise
            raise click.UsageError(f"No such command {name!r}; did you mean "
                                   f"{' or '.join(repr(n) for n in near)}?", ctx) from err

    def invoke(self, ctx):
        with _interrupts():
            try:
                return super().invoke(ctx)
            except OSError as err:
                from paprof.errors import environment_error
                from paprof.safetext import shown

                said = environment_error(err)
                if said is None:
                    raise  # a bug: its traceback
                click.echo(f"paprof: error: {shown(said)}", err=True)
                sys.exit(said.exit_code)
            except PaprofError as err:
                from paprof.safetext import shown

                click.echo(f"paprof: error: {shown(err, newlines=True)}", err=True)
                sys.exit(err.exit_code)


@click.group("paprof", cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="paprof")
def main():
    """Profile GPU kernel variants under Nsight Compute and explain why one is faster.

    \b
    Typical session:
      paprof list                         the families (installed plugins, this
                                          repository's [tool.paprof]) and variants
      paprof bench --variant all          CUDA-event timings and bandwidth (GPU)
      paprof run --variant v2 --variant v3  verify, then profile under ncu (GPU)
      paprof table runs/                  any .ncu-rep as a table with its
                                          bottleneck
      paprof compare v2 v3 --runs examples/h200
                                          the comparative report (of the H200
                                          runs shipped in examples/h200)
      paprof check --baseline b.json      the regression gate
      paprof sweep --variant v5 --variant v6 --grid batch=1,4,16,64 --bench
                                          a grid of shapes, the regime map (GPU)

    Your own kernels: a family in your repository (docs/your-kernels.md);
    a whole program: paprof run --cmd '...' --nvtx-range R --name ID.

    Exit codes: 0 ok, 1 a finding (regression, failed verification),
    2 bad input or environment, 130 interrupted, 143 terminated (SIGTERM).
    """


COMMANDS = {
    "list": ("list_variants", "The families (installed plugins, this repository's) and their variants."),
    "bench": ("bench", "Verify, then time variants with CUDA events: TB/s, TFLOP/s, % of the ceiling (GPU)."),
    "run": ("run", "Verify, then profile variants (or a program: --cmd) under ncu into the run store (GPU)."),
    "table": ("table", "Any .ncu-rep as a table, one row a kernel launch, with its bottleneck."),
    "compare": ("compare", "The comparative report: why one variant is faster than the other."),
    "check": ("check", "The CI regression gate against a baseline (stored runs, --profile, --static)."),
    "baseline": ("check", "Write the baseline that 'paprof check' compares against."),
    "calibrate": ("calibrate", "Measure the noise (A/A repeats) that 'paprof check --calibration' gates above."),
    "sweep": ("sweep", "Measure variants over a grid of shapes, resumable, sharded (GPU)."),
    "sweep-report": ("sweep", "The sweep report: scaling charts, the regime map, the crossovers."),
    "merge": ("sweep", "Merge run stores (sweep shards, other machines) into one."),
    "mcp": ("mcp", "Serve paprof's tools to an agent or IDE over MCP (stdio)."),
}
"""Command name -> (module in ``paprof.commands``, the line ``paprof --help`` shows). The
modules are imported only when their command runs, so ``paprof --help`` and
``paprof list`` do not pay for pandas, numpy and matplotlib."""


def _get_command(self, ctx, name):
    if name not in COMMANDS:
        return None
    import importlib

    module = importlib.import_module(f"paprof.commands.{COMMANDS[name][0]}")
    return next(c for c in module.COMMANDS if c.name == name)


def _format_commands(self, ctx, formatter):
    rows = [(name, COMMANDS[name][1]) for name in sorted(COMMANDS)]
    with formatter.section("Commands"):
        formatter.write_dl(rows)


# the group's command lookup and help listing read the table above (defined after it)
_Group.list_commands = lambda self, ctx: sorted(COMMANDS)
_Group.get_command = _get_command
_Group.format_commands = _format_commands

if __name__ == "__main__":  # pragma: no cover
    main()
