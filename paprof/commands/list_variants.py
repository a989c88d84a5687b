"""``paprof list``: the kernel families and their variants."""

from __future__ import annotations

import json

import click

from paprof.kernels import registry


@click.command("list")
@click.option("--family", default=None, help="Only this kernel family.")
@click.option("--json", "as_json", is_flag=True, help="A JSON list of {family, variant, idea, ...}.")
def list_variants(family, as_json):
    """List the kernel variants with their one-line ideas."""
    variants = registry.variants(family)
    if as_json:
        click.echo(json.dumps([v.to_dict() for v in variants], indent=1))
        return
    for fam in dict.fromkeys(v.family for v in variants):
        click.echo(fam)
        for v in (v for v in variants if v.family == fam):
            click.echo(f"  {v.id:<9} {v.idea}")
            click.echo(f"  {'':<9} launch: {v.launch}")


COMMANDS = [list_variants]
