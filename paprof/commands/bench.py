"""``paprof bench``: time variants with CUDA events (no ncu) against the read ceiling."""

from __future__ import annotations

import json

import click

from paprof import registry
from paprof.commands import (STDOUT, check_json_target, echo, emit_json, force_option, json_option,
                             renamed, wide_option)
from paprof.safetext import shown


def _fmt(value, spec, missing="-"):
    return missing if value is None else format(value, spec)


def _details(row) -> str:
    """The launch choices after the kernels: the family's words where it gave them
    ("; split each sequence 8 ways (num_splits 8)"), else the raw details (", splits 8")."""
    said = (row.get("launch_words") or {}).get("said")
    if said:
        return "; " + "; ".join(map(shown, said))
    return "".join(f", {shown(k)} {shown(v)}" for k, v in (row.get("details") or {}).items())


@click.command("bench")
@click.option("--variant", "variants", multiple=True, default=("all",), show_default=True,
              help="Variant id (repeatable), family/id, or 'all'.")
@click.option("--family", default=None, help="Kernel family (needed for 'all' when several are visible).")
@click.option("--shape", default="", metavar="KEY=VALUE,...",
              help="The family's parameters (paprof list shows them), e.g. "
                   "batch=8,dtype=fp16.")
@click.option("--timed-launches", "launches", default=100, show_default=True, metavar="N",
              type=click.IntRange(5), help="Timed launches per round; the median is reported.")
@renamed("--launches", "--timed-launches", "launches", type=click.IntRange(5))
@click.option("--rounds", default=2, show_default=True, type=click.IntRange(1), metavar="N",
              help="Rounds over all variants; their spread shows the noise.")
@click.option("--seed", type=int, default=None, help="Input seed (default: fresh inputs).")
@json_option("The result")
@force_option("an existing --json FILE")
@wide_option("each row's kernels and launch choices wrap under it")
def bench(variants, family, shape, launches, rounds, seed, json_out, force, wide):
    """Verify, then time each variant with CUDA events (no profiler).

    Prints the median time per step, the throughput the family's work model gives (bytes
    over time, and FLOPs over time where the family counts them), the share of the read
    ceiling measured by a streaming-read kernel in the same run (for a family held to the
    GEMM ceiling, such as flash_fwd at fp16/bf16: the share of a cuBLAS bf16 GEMM's FLOP
    rate measured in the same run), and the relative error against the float64 reference.
    Needs a GPU. Exits 1 if a variant fails verification. With nvidia-ml-py (the nvml
    extra) the GPU's clocks, throttle reasons and other processes are read while timing
    (--json: "environment"); a throttled or shared GPU is warned about on stderr.

    \b
    Examples:
      paprof bench --variant v2 --variant v3 --shape batch=8
      paprof bench --family flash_fwd --timed-launches 200 --json bench.json
    """
    chosen = registry.resolve(variants, family)
    fam = registry.family_of(chosen[0])
    params = fam.parse(shape)
    registry.check_params(chosen, params)
    check_json_target(json_out, force)  # before any GPU work
    from rich.console import Console
    from rich.markup import escape

    from paprof.api import run_bench
    from paprof.api import KEY, Watch

    console = Console(stderr=True)
    with console.status("bench") as status, Watch(in_process=True) as watch:
        result = run_bench(fam, chosen, params, launches, rounds, seed,
                           progress=lambda text: status.update(escape(f"bench: {shown(text)}")))
    data = {**result.to_dict(), KEY: watch.record}
    if watch.record.get("disturbed"):
        console.print(f"warning: measured while the GPU was {shown(watch.record['disturbed'])}: "
                      "these times are not the code's alone", highlight=False, markup=False)
    if json_out is not None:
        emit_json(json.dumps(data, indent=1) + "\n", json_out, force)
    if json_out != STDOUT:
        def say(line):
            echo(line, wide=wide)

        work = data["work"]
        flops = f", {work['flops'] / 1e9:.3g} GFLOP" if work["flops"] else ""
        gemm = data.get("gemm_ceiling")
        gemm_text = (f"  GEMM ceiling {gemm['tflops']:.0f} TFLOP/s ({gemm['dtype']} "
                     f"{gemm['n']}^3, {gemm['method']}, measured now)" if gemm else "")
        say(f"{shown(data['gpu'])}  {shown(data['family'])}  {shown(data['shape_slug'])}  moves "
            f"{work['bytes'] / 1e9:.3f} GB{flops}  read ceiling "
            f"{data['read_ceiling_tbs']:.2f} TB/s (measured now){gemm_text}  "
            f"{launches} launches x {rounds} rounds, {data['input_sets']} input set(s)")
        with_flops = bool(work["flops"])
        names = [shown(r["variant"]) for r in data["rows"]]
        width = max([9] + [len(n) for n in names])
        say(f"{'variant':<{width}} {'median us':>10} {'TB/s':>6} {'% ceil':>7}"
            + (f" {'TFLOP/s':>8}" if with_flops else "")
            + (f" {'% GEMM':>7}" if gemm else "")
            + f" {'spread %':>8} {'rel err':>9}  kernels")
        for name, row in zip(names, data["rows"]):
            if row["skipped"]:
                say(f"{name:<{width}} skipped: {shown(row['skipped'])}")
                continue
            say(
                f"{name:<{width}} {_fmt(row['median_us'], '10.1f')} {_fmt(row['tbs'], '6.2f')} "
                f"{_fmt(row['pct_of_ceiling'], '7.1f')}"
                + (f" {_fmt(row['tflops'], '8.2f')}" if with_flops else "")
                + (f" {_fmt(row['pct_of_gemm_ceiling'], '7.1f')}" if gemm else "")
                + f" {_fmt(row['round_spread_pct'], '8.2f')} "
                f"{_fmt(row['rel_error'], '9.1e')}  {shown('+'.join(row['kernels']) or row['kind'])}"
                + _details(row)
                + ("" if row["passed"] else "  VERIFICATION FAILED")
            )
    if any(r["passed"] is False for r in data["rows"]):
        raise SystemExit(1)


COMMANDS = [bench]
