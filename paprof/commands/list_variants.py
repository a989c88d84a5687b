"""``paprof list``: the kernel families, their parameters and their variants."""

from __future__ import annotations

import json

import click

from paprof import registry


@click.command("list")
@click.option("--family", default=None, help="Only this kernel family.")
@click.option("--json", "as_json", is_flag=True,
              help="JSON: each family with where it comes from, its parameters and variants.")
def list_variants(family, as_json):
    """List the kernel families (built-in, installed, and this repository's
    [tool.paprof] ones), their parameters and their variants with their one-line ideas."""
    fams = [registry.family(family)] if family else list(registry.discover().values())
    if as_json:
        data = [{**f.describe(), "variants": [v.to_dict() for v in f.variants]} for f in fams]
        click.echo(json.dumps(data, indent=1))
        return
    for f in fams:
        click.echo(f"{f.name}  ({f.origin})" + (f": {f.summary}" if f.summary else ""))
        click.echo(f"  --shape {f.params().spec()}")
        for p in f.params.fields():
            click.echo(f"    {p.describe()}")
        for v in f.variants:
            click.echo(f"  {v.id:<9} [{v.kind}] {v.idea}")
            if v.launch:
                click.echo(f"  {'':<9} launch: {v.launch}")


COMMANDS = [list_variants]
