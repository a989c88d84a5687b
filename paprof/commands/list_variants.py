"""``paprof list``: the kernel families, their parameters and their variants."""

from __future__ import annotations

import json

import click

from paprof import registry, safetext
from paprof.commands import emit_json, fitted, force_option, json_option, terminal_width

WIDTH = 100
"""The longest line of the short listing off a terminal (on one: its width; ``--verbose``
prints everything in full, wrapped to a terminal's width)."""


def _fit(head: str, text: str = "", width: int = WIDTH) -> str:
    """``head`` then ``text`` (its whitespace runs as single spaces) on one line of at
    most ``width`` characters ("..." where it was cut)."""
    line = safetext.shown(head + " ".join(text.split()), limit=None)
    return line if len(line) <= width else line[:width - 3].rstrip() + "..."


def _ordered(fams: list) -> list:
    """Your repository's families (``[tool.paprof]``) before installed ones, each group in
    discovery order."""
    mine = [f for f in fams if f.origin.startswith("[tool.paprof]")]
    return mine + [f for f in fams if f not in mine]


def _check(f) -> str | None:
    """Why family ``f`` is broken (its parameters or work model fail at the default
    shape), None when it answers."""
    from paprof.errors import UserError

    try:
        f.work_of(f.params())  # the work model answers at the default shape
    except UserError as err:
        return str(err)
    return None


def _short(fams: list, broken: dict) -> None:
    """One line a family, one a variant; a broken family says why instead."""
    most = terminal_width() or WIDTH
    for f in fams:
        click.echo(_fit(f"{f.name}  ({f.origin})" + (": " if f.summary else ""), f.summary or "",
                        most))
        if f.name in broken:
            click.echo(_fit("  BROKEN: ", broken[f.name], most))
            continue
        width = max((len(v.id) for v in f.variants), default=0)
        for v in f.variants:
            click.echo(_fit(f"  {v.id:<{width}}  [{v.kind}] ", v.idea, most))
    click.echo(fitted("(paprof list --family F or --verbose: parameters, default shape, "
                      "launches and ideas in full)", terminal_width()))


def _echo(line: str) -> None:
    """One line of the listing, its names and words shown safely (``paprof.safetext``)."""
    click.echo(fitted(safetext.shown(line, limit=None, newlines=True), terminal_width()))


def _details(fams: list, broken: dict) -> None:
    for f in fams:
        _echo(f"{f.name}  ({f.origin})" + (f": {f.summary}" if f.summary else ""))
        if f.name in broken:
            _echo(f"  BROKEN: {broken[f.name]}")
            continue
        _echo(f"  --shape {f.params().spec()}")
        for p in f.params.fields():
            _echo(f"    {p.describe()}")
        for v in f.variants:
            _echo(f"  {v.id:<9} [{v.kind}] {v.idea}")
            if v.launch:
                _echo(f"  {'':<9} launch: {v.launch}")


@click.command("list")
@click.option("--family", default=None, help="Only this kernel family, in full.")
@click.option("--verbose", "-v", is_flag=True,
              help="Every family in full: parameters, default shape, launches.")
@json_option("Each family with where it comes from, its parameters and variants,")
@force_option("an existing --json FILE")
def list_variants(family, verbose, json_out, force):
    """List the kernel families (your repository's [tool.paprof] ones first, then the
    installed ones, such as the kernel lab's) and their variants, one line each; --family F or
    --verbose adds the parameters, the default shape and the launches. A family whose
    parameters or work model fail is listed as BROKEN with the reason (exit 2).

    \b
    Examples:
      paprof list
      paprof list --family paged_decode
      paprof list --json families.json
    """
    from paprof.errors import UserError

    fams = [registry.family(family)] if family else list(registry.discover().values())
    if not fams:
        raise UserError(registry.NO_FAMILY)
    broken = {f.name: why for f in fams if (why := _check(f)) is not None}
    if json_out is not None:
        data = [{"family": f.name, "origin": f.origin, "module": f.module, "error": broken[f.name]}
                if f.name in broken else {**f.describe(), "variants": [v.to_dict() for v in f.variants]}
                for f in fams]
        emit_json(json.dumps(data, indent=1) + "\n", json_out, force)
    elif family or verbose:
        _details(_ordered(fams), broken)
    else:
        _short(_ordered(fams), broken)
    if broken:
        raise UserError(f"{len(broken)} family(ies) broken: {next(iter(broken.values()))}")


COMMANDS = [list_variants]
