"""``paprof list``: the kernel families, their parameters and their variants."""

from __future__ import annotations

import json

import click

from paprof import registry

WIDTH = 100
"""The longest line of the short listing (``--verbose`` prints everything in full)."""


def _fit(head: str, text: str = "", width: int = WIDTH) -> str:
    """``head`` then ``text`` (its whitespace runs as single spaces) on one line of at
    most ``width`` characters ("..." where it was cut)."""
    line = head + " ".join(text.split())
    return line if len(line) <= width else line[:width - 3].rstrip() + "..."


def _ordered(fams: list) -> list:
    """The user's families (their repository's, installed ones) before the built-in ones,
    each group in discovery order."""
    return ([f for f in fams if f.origin != "built-in"]
            + [f for f in fams if f.origin == "built-in"])


def _short(fams: list) -> None:
    """One line a family, one a variant."""
    for f in fams:
        click.echo(_fit(f"{f.name}  ({f.origin})" + (": " if f.summary else ""), f.summary or ""))
        width = max((len(v.id) for v in f.variants), default=0)
        for v in f.variants:
            click.echo(_fit(f"  {v.id:<{width}}  [{v.kind}] ", v.idea))
    click.echo("(paprof list --family F or --verbose: parameters, default shape, launches and "
               "ideas in full)")


def _details(fams: list) -> None:
    for f in fams:
        click.echo(f"{f.name}  ({f.origin})" + (f": {f.summary}" if f.summary else ""))
        click.echo(f"  --shape {f.params().spec()}")
        for p in f.params.fields():
            click.echo(f"    {p.describe()}")
        for v in f.variants:
            click.echo(f"  {v.id:<9} [{v.kind}] {v.idea}")
            if v.launch:
                click.echo(f"  {'':<9} launch: {v.launch}")


@click.command("list")
@click.option("--family", default=None, help="Only this kernel family, in full.")
@click.option("--verbose", "-v", is_flag=True,
              help="Every family in full: parameters, default shape, launches.")
@click.option("--json", "as_json", is_flag=True,
              help="JSON: each family with where it comes from, its parameters and variants.")
def list_variants(family, verbose, as_json):
    """List the kernel families (your repository's [tool.paprof] ones and installed ones
    first, then the built-in ones) and their variants, one line each; --family F or
    --verbose adds the parameters, the default shape and the launches."""
    fams = [registry.family(family)] if family else list(registry.discover().values())
    if as_json:
        data = [{**f.describe(), "variants": [v.to_dict() for v in f.variants]} for f in fams]
        click.echo(json.dumps(data, indent=1))
        return
    if family or verbose:
        _details(_ordered(fams))
    else:
        _short(_ordered(fams))


COMMANDS = [list_variants]
