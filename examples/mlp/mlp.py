"""A whole PyTorch program for paprof's --cmd mode: a bf16 MLP block, eager or compiled.

    y = x + down( silu(gate(h)) * up(h) ),   h = RMSNorm(x) * w_norm

bf16 weights and activations (tokens 8192, d 4096, hidden 14336 by default: the MLP of a
Llama-3-8B-sized layer; about 2.9 TFLOP a step). ``eager`` runs the block as written
(RMSNorm as separate element-wise and reduction kernels, SiLU and the multiply apart);
``compiled`` runs ``torch.compile`` of the same function (Inductor fuses the RMSNorm and
the SiLU-multiply into Triton kernels; the GEMMs stay cuBLAS).

Warm-up (including compilation) runs outside any NVTX range; then ``--steps`` steps, each
inside ``torch.cuda.nvtx.range_push("step")`` / ``range_pop()`` with a synchronize inside
the range, so ``paprof run --cmd 'python3 mlp.py eager' --nvtx-range step --name eager``
profiles exactly those kernels. Afterwards (outside any range) ``--timing-iters`` steps
are timed with CUDA events and the median printed. ``both`` times eager and compiled (no
ranges) and prints their ratio: the ground-truth speed ratio for paprof's comparison.

    python3 mlp.py eager                      # 3 ranged steps, then the timing
    python3 mlp.py compiled --steps 1
    python3 mlp.py both --timing-iters 20     # eager vs compiled, the ratio
    python3 mlp.py eager --tokens 1024 --d 1024 --hidden 3584   # small
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

try:  # module level, so that torch.compile traces plain globals; --help works without it
    import torch
    import torch.nn.functional as F
except ImportError:  # pragma: no cover (the CPU machine)
    torch = F = None


def rmsnorm(x, weight, eps: float = 1e-6):
    xf = x.float()
    xf = xf * torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps)
    return xf.to(x.dtype) * weight


def mlp_block(x, w_norm, w_gate, w_up, w_down):
    h = rmsnorm(x, w_norm)
    gate = h @ w_gate
    up = h @ w_up
    return x + (F.silu(gate) * up) @ w_down


def make_inputs(tokens: int, d: int, hidden: int, seed: int = 0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    dev, dt = "cuda", torch.bfloat16

    def randn(*shape, scale=1.0):
        return (torch.randn(*shape, generator=g, device=dev, dtype=torch.float32) * scale).to(dt)

    x = randn(tokens, d)
    w_norm = (1.0 + 0.1 * torch.randn(d, generator=g, device=dev)).to(dt)
    w_gate = randn(d, hidden, scale=d ** -0.5)
    w_up = randn(d, hidden, scale=d ** -0.5)
    w_down = randn(hidden, d, scale=hidden ** -0.5)
    return x, w_norm, w_gate, w_up, w_down


def build(mode: str):
    if mode == "compiled":
        return torch.compile(mlp_block)
    return mlp_block


def warm_up(fn, args, n: int = 3) -> None:
    for _ in range(n):
        fn(*args)
    torch.cuda.synchronize()


def ranged_steps(fn, args, steps: int) -> None:
    for _ in range(steps):
        torch.cuda.nvtx.range_push("step")
        fn(*args)
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()


def time_steps(fn, args, iters: int) -> float:
    """Median milliseconds of one step over ``iters`` CUDA-event-timed steps."""
    times = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(*args)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("mode", choices=("eager", "compiled", "both"))
    ap.add_argument("--tokens", type=int, default=8192)
    ap.add_argument("--d", type=int, default=4096)
    ap.add_argument("--hidden", type=int, default=14336)
    ap.add_argument("--steps", type=int, default=3, help="NVTX-ranged steps (not with 'both')")
    ap.add_argument("--timing-iters", type=int, default=20, help="CUDA-event-timed steps (0: none)")
    ap.add_argument("--json", default=None, metavar="FILE", help="also write the timings as JSON")
    args = ap.parse_args(argv)

    if torch is None or not torch.cuda.is_available():
        print("mlp.py: no CUDA GPU", file=sys.stderr)
        return 2
    tensors = make_inputs(args.tokens, args.d, args.hidden)
    flops = 3 * 2 * args.tokens * args.d * args.hidden
    shape = dict(tokens=args.tokens, d=args.d, hidden=args.hidden)
    result = {"shape": shape, "gemm_flops_per_step": flops, "torch": torch.__version__,
              "gpu": torch.cuda.get_device_name()}
    modes = ("eager", "compiled") if args.mode == "both" else (args.mode,)
    fns = {}
    for mode in modes:
        fns[mode] = build(mode)
        warm_up(fns[mode], tensors)  # compiles (compiled) outside any range
    if args.mode == "both":  # the two must agree
        a, b = (fns[m](*tensors).float() for m in modes)
        result["max_abs_diff"] = float((a - b).abs().max())
    else:
        ranged_steps(fns[args.mode], tensors, args.steps)
        result["ranged_steps"] = args.steps
    if args.timing_iters > 0:
        for mode in modes:
            ms = time_steps(fns[mode], tensors, args.timing_iters)
            result[f"{mode}_ms"] = ms
            print(f"{mode}: median {ms:.3f} ms a step over {args.timing_iters} CUDA-event-timed "
                  f"steps ({flops / ms / 1e9:.0f} TFLOP/s on the GEMMs)")
        if args.mode == "both":
            result["eager_over_compiled"] = result["eager_ms"] / result["compiled_ms"]
            print(f"eager / compiled = {result['eager_over_compiled']:.3f} "
                  f"(max |eager - compiled| = {result['max_abs_diff']:.3g})")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
