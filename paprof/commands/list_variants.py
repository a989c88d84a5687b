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
    from paprof.errors import UserError

    fams = [registry.family(family)] if family else list(registry.discover().values())
    broken: list[str] = []
    if as_json:
        data = []
        for f in fams:
            try:
                f.work_of(f.params())
                data.append({**f.describe(), "variants": [v.to_dict() for v in f.variants]})
            except UserError as err:
                broken.append(str(err))
                data.append({"family": f.name, "origin": f.origin, "module": f.module,
                             "error": str(err)})
        click.echo(json.dumps(data, indent=1))
    else:
        for f in fams:
            head = f"{f.name}  ({f.origin})" + (f": {f.summary}" if f.summary else "")
            try:
                params = f.params()
                f.work_of(params)  # the work model answers at the default shape
                lines = [f"  --shape {params.spec()}"]
            except UserError as err:  # the family's own checks fail: flag it, list the rest
                broken.append(str(err))
                click.echo(f"{head}\n  BROKEN: {err}")
                continue
            click.echo(head)
            for line in lines:
                click.echo(line)
            for p in f.params.fields():
                click.echo(f"    {p.describe()}")
            for v in f.variants:
                click.echo(f"  {v.id:<9} [{v.kind}] {v.idea}")
                if v.launch:
                    click.echo(f"  {'':<9} launch: {v.launch}")
    if broken:
        raise UserError(f"{len(broken)} family(ies) broken: {broken[0]}")


COMMANDS = [list_variants]
