"""``paprof bench``: time variants with CUDA events (no ncu) against the read ceiling."""

from __future__ import annotations

import json

import click

from paprof.kernels import registry
from paprof.kernels.bench import run_bench
from paprof.kernels.problem import parse_shape


def _fmt(value, spec, missing="-"):
    return missing if value is None else format(value, spec)


@click.command("bench")
@click.option("--variant", "variants", multiple=True, default=("all",), show_default=True,
              help="Variant id (repeatable) or 'all'.")
@click.option("--family", default=None, help="Kernel family (default: any).")
@click.option("--shape", default="", help="e.g. batch=64,context=4096,q_heads=32,kv_heads=8,dtype=fp16")
@click.option("--launches", default=100, show_default=True, type=click.IntRange(5),
              help="Timed launches per round; the median is reported.")
@click.option("--rounds", default=2, show_default=True, type=click.IntRange(1),
              help="Rounds over all variants; their spread shows the noise.")
@click.option("--seed", type=int, default=None, help="Input seed (default: fresh inputs).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def bench(variants, family, shape, launches, rounds, seed, as_json):
    """Verify, then time each variant with CUDA events (no profiler).

    Prints the median time per decode step, the effective bandwidth (unique K/V bytes
    over time), its share of the read ceiling measured by a streaming-read kernel in the
    same run, and the relative error against the float64 reference. Needs a GPU.
    Exits 1 if a variant fails verification.
    """
    chosen = registry.resolve(variants, family)
    parsed = parse_shape(shape)
    from rich.console import Console

    console = Console(stderr=True)
    with console.status("bench") as status:
        result = run_bench(chosen, parsed, launches, rounds, seed,
                           progress=lambda text: status.update(f"bench: {text}"))
    data = result.to_dict()
    if as_json:
        click.echo(json.dumps(data, indent=1))
    else:
        click.echo(f"{data['gpu']}  {data['shape_slug']}  K/V {data['kv_bytes'] / 1e9:.3f} GB  "
                   f"read ceiling {data['read_ceiling_tbs']:.2f} TB/s (measured now)  "
                   f"{launches} launches x {rounds} rounds, {data['input_sets']} input set(s)")
        click.echo(f"{'variant':<9} {'median us':>10} {'TB/s':>6} {'% ceil':>7} {'spread %':>8} "
                   f"{'rel err':>9}  kernels")
        for row in data["rows"]:
            if row["skipped"]:
                click.echo(f"{row['variant']:<9} skipped: {row['skipped']}")
                continue
            click.echo(
                f"{row['variant']:<9} {_fmt(row['median_us'], '10.1f')} {_fmt(row['tbs'], '6.2f')} "
                f"{_fmt(row['pct_of_ceiling'], '7.1f')} {_fmt(row['round_spread_pct'], '8.2f')} "
                f"{_fmt(row['rel_error'], '9.1e')}  {'+'.join(row['kernels'])}"
                + ("" if row["passed"] else "  VERIFICATION FAILED")
            )
    if any(r["passed"] is False for r in data["rows"]):
        raise SystemExit(1)


COMMANDS = [bench]
