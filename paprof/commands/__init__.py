"""The CLI's commands, one module each; options several of them share."""


def step_range_option(fn):
    """``--step-range NAME``: the NVTX range pushed once per step, for reports whose run
    record names none (``paprof.model.steps``); one definition for every command."""
    import click

    return click.option("--step-range", default=None, metavar="NAME",
                        help="The NVTX range pushed once per step, for reports whose run record "
                        "names none (a foreign report is otherwise one step).")(fn)


DEPRECATED = "paprof: warning: {old} is deprecated, use {new} (the old spelling goes in the next version)"
"""The one line an old option spelling prints on stderr (``renamed``)."""


def renamed(old: str, new: str, param: str, *, is_flag: bool = False, **kwargs):
    """The option ``new`` (parameter ``param``) once spelt ``old``: a hidden option that
    still works for one version, says so on stderr and hands its value to ``param``.
    Put it above the option it stands for (``kwargs``: its ``type``, ``multiple``...)."""
    import functools

    import click

    dest = "renamed_" + old.lstrip("-").replace("-", "_")

    def decorate(fn):
        @functools.wraps(fn)
        def command(*args, **params):
            value = params.pop(dest)
            if value not in (None, False, ()):
                source = click.get_current_context().get_parameter_source(param)
                if source == click.core.ParameterSource.COMMANDLINE:
                    raise click.UsageError(f"{old} is the old spelling of {new}: give {new} only")
                click.echo(DEPRECATED.format(old=old, new=new), err=True)
                params[param] = value
            return fn(*args, **params)

        option = click.option(old, dest, hidden=True, is_flag=is_flag,
                              default=False if is_flag else None, **kwargs)
        return option(command)

    return decorate


STDOUT = "-"
"""The one rule for every option that names an output file (``--out``, ``--json``,
``--markdown``, ``--junit``, ``--report``): ``-`` prints it on stdout (the command's own
lines then go to stderr); a file named "-" is ``./-``. ``--json`` alone is ``--json -``."""


def output_file():
    """The click type of an option naming an output file: FILE, or ``-`` for stdout
    (``STDOUT``). A string, so that ``./-`` stays a file."""
    import click

    return click.Path(dir_okay=False, allow_dash=True)


def on_stdout(*values) -> bool:
    """Whether any of ``values`` (output options) is ``-``, stdout."""
    from paprof.outputs import is_stdout

    return any(is_stdout(v) for v in values)


def one_on_stdout(*options: tuple[str, object]) -> None:
    """``UsageError`` (one line, exit 2) when more than one of ``options`` ((name, value)
    pairs) is ``-``: stdout holds one output (``paprof.outputs.one_on_stdout``)."""
    from paprof.outputs import one_on_stdout as check

    check(*options)


def json_option(what: str, then: str = ""):
    """``--json [FILE|-]``, the one way every command gives JSON: ``--json`` alone or
    ``--json -`` prints it on stdout, ``--json FILE`` writes FILE (parameter ``json_out``);
    ``then``: a sentence after the help's."""
    import click

    return click.option(
        "--json", "json_out", is_flag=False, flag_value=STDOUT, default=None,
        metavar="[FILE|-]", type=output_file(),
        help=f"{what} as JSON: on stdout (--json alone, or --json -) or into FILE."
        + (f" {then}" if then else ""))


def force_option(what: str):
    """``--force``, the one word for "overwrite what exists" (``what``: what it replaces)."""
    import click

    return click.option("--force", is_flag=True, help=f"Replace {what}.")


def check_json_target(target, force: bool = False, inputs=()) -> None:
    """``UserError`` now (before the work) when ``emit_json`` would refuse ``target``."""
    if target not in (None, STDOUT):
        from paprof import outputs

        outputs.check_target(target, force=force, inputs=inputs)


def emit_json(text: str, target, force: bool = False, inputs=()) -> None:
    """``text`` on stdout (``target`` '-') or into the file ``target``, written
    atomically and never over an existing file without ``force`` (``paprof.outputs``)."""
    import click

    if target == STDOUT:
        click.echo(text, nl=not text.endswith("\n"))
        return
    from paprof import outputs

    check_json_target(target, force, inputs)
    outputs.write(target, text)
    click.echo(f"wrote {target}", err=True)


def wide_option(fits: str):
    """``--wide``, the one word for "whole tables and lines, whatever the terminal's width"
    (parameter ``wide``; ``fits``: how the command fits a terminal without it)."""
    import click

    return click.option("--wide", is_flag=True,
                        help="Whole tables and lines, whatever the terminal's width (on a "
                        f"terminal {fits}).")


def terminal_width(err: bool = False) -> int | None:
    """The width of the terminal a command prints on (stdout; stderr with ``err``), or
    None when it prints to a pipe, a file or a CI log (``COLUMNS`` alone is no terminal):
    those get whole lines. Every command asks here, once; ``--wide`` passes it by."""
    import sys

    return _tty_columns(sys.stderr if err else sys.stdout)


def _tty_columns(stream) -> int | None:
    """``stream``'s terminal width (``COLUMNS`` first, as ``shutil.get_terminal_size``
    reads it), None when it is no terminal (the tests put a terminal of 80 here)."""
    import shutil

    try:
        if not stream.isatty():
            return None
    except (AttributeError, ValueError):  # a closed or foreign stream
        return None
    return shutil.get_terminal_size().columns


def fitted(text: str, width: int | None) -> str:
    """``text`` with each line longer than ``width`` wrapped (``fmt.wrapped``: at spaces,
    the continuations indented); ``width`` None: ``text`` as it is."""
    if width is None:
        return text
    from paprof.api import wrapped

    return "\n".join(out for line in text.split("\n") for out in wrapped(line, width))


def echo(text: str, err: bool = False, wide: bool = False) -> None:
    """``click.echo`` of ``text`` fitted to the terminal it goes to (``terminal_width``;
    none, or ``wide``: whole lines)."""
    import click

    click.echo(fitted(text, None if wide else terminal_width(err)), err=err)
