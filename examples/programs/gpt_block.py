"""A whole PyTorch program for paprof's --cmd mode: GPT blocks' forward and backward in bf16,
eager or compiled.

Each block is pre-norm: ``x + attn(LayerNorm(x))`` with causal attention through
``F.scaled_dot_product_attention``, then ``x + fc2(GELU(fc1(LayerNorm(x))))``; bf16
weights and activations (batch 8, sequence 1024, width 1024, 16 heads, MLP 4096, 2 blocks
by default: a step of a few ms on an H100, ~100 kernel launches a step in eager). A step is
the forward pass and the backward pass from a fixed output gradient; the gradients are
dropped before each step (``grad = None``), so every step launches the same kernels.

``eager`` runs the module as written; ``compiled`` runs ``torch.compile`` of it
(Inductor fuses the LayerNorms, GELU and residual adds of the forward and the backward
into Triton kernels; the GEMMs stay cuBLAS, the attention the flash kernel).

Warm-up (compilation included) runs outside any NVTX range; then ``--steps`` steps, each
inside ``torch.cuda.nvtx.range_push("step")`` / ``range_pop()`` with a synchronize inside
the range, so that

    paprof run --cmd 'python3 gpt_block.py eager --timing-iters 0' --nvtx-range step --name eager

profiles exactly those kernels. Afterwards (outside any range) ``--timing-iters`` steps are
timed with CUDA events. ``both`` times eager and compiled (no ranges) and prints their
ratio: the ground truth for ``paprof compare eager compiled``.

    python3 gpt_block.py both --json times.json      # eager vs compiled, the ratio
    python3 gpt_block.py eager --steps 1 --layers 1  # smaller
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

try:  # module level, so that torch.compile traces plain globals; --help works without it
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError:  # pragma: no cover (the CPU machine)
    torch = nn = F = None


def _module():
    class Block(nn.Module):
        def __init__(self, d: int, heads: int, hidden: int):
            super().__init__()
            self.heads = heads
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.fc1, self.fc2 = nn.Linear(d, hidden), nn.Linear(hidden, d)

        def forward(self, x):
            b, s, d = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
            q, k, v = (t.view(b, s, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(a.transpose(1, 2).reshape(b, s, d))
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))

    class Model(nn.Module):
        def __init__(self, layers: int, d: int, heads: int, hidden: int):
            super().__init__()
            self.blocks = nn.ModuleList(Block(d, heads, hidden) for _ in range(layers))

        def forward(self, x):
            for block in self.blocks:
                x = block(x)
            return x

    return Model


def make(args):
    torch.manual_seed(args.seed)
    model = _module()(args.layers, args.d, args.heads, args.hidden).to("cuda", torch.bfloat16)
    g = torch.Generator(device="cuda").manual_seed(args.seed)
    x = torch.randn(args.batch, args.seq, args.d, generator=g, device="cuda").to(torch.bfloat16)
    gy = (torch.randn(args.batch, args.seq, args.d, generator=g, device="cuda") * 1e-2).to(torch.bfloat16)
    return model, x, gy


def build(model, mode: str):
    return torch.compile(model) if mode == "compiled" else model


def step(fn, model, x, gy):
    """One training step's GPU work: forward, then backward from ``gy``."""
    for p in model.parameters():
        p.grad = None
    fn(x).backward(gy)


def warm_up(fn, model, x, gy, n: int = 3) -> None:
    for _ in range(n):
        step(fn, model, x, gy)
    torch.cuda.synchronize()


def ranged_steps(fn, model, x, gy, steps: int, autograd_threads: bool = False) -> None:
    # An NVTX push belongs to the thread that made it, and PyTorch runs the backward pass
    # on its autograd device threads: without this, ncu's --nvtx-include sees the
    # forward's kernels only. With autograd's multithreading off, backward runs here.
    with torch.autograd.set_multithreading_enabled(autograd_threads):
        for _ in range(steps):
            torch.cuda.nvtx.range_push("step")
            step(fn, model, x, gy)
            torch.cuda.synchronize()
            torch.cuda.nvtx.range_pop()


def time_steps(fn, model, x, gy, iters: int) -> float:
    """Median milliseconds of one step over ``iters`` CUDA-event-timed steps."""
    times = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        step(fn, model, x, gy)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def flops_per_step(args) -> float:
    """GEMM and attention FLOPs of forward + backward (backward ~2x forward)."""
    tokens, d, hidden = args.batch * args.seq, args.d, args.hidden
    gemm = 2 * tokens * (3 * d * d + d * d + 2 * d * hidden)
    attention = 2 * 2 * args.batch * args.seq * args.seq * d / 2  # QK^T and PV, causal half
    return 3 * args.layers * (gemm + attention)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("mode", choices=("eager", "compiled", "both"))
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--d", type=int, default=1024)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--hidden", type=int, default=4096)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--steps", type=int, default=2, help="NVTX-ranged steps (not with 'both')")
    ap.add_argument("--timing-iters", type=int, default=20, help="CUDA-event-timed steps (0: none)")
    ap.add_argument("--json", default=None, metavar="FILE", help="also write the timings as JSON")
    ap.add_argument("--autograd-threads", action="store_true",
                    help="run backward on autograd's own threads (then outside the 'step' range)")
    args = ap.parse_args(argv)

    if torch is None or not torch.cuda.is_available():
        print("gpt_block.py: no CUDA GPU", file=sys.stderr)
        return 2
    model, x, gy = make(args)
    flops = flops_per_step(args)
    result = {"shape": {k: getattr(args, k) for k in ("batch", "seq", "d", "heads", "hidden", "layers")},
              "flops_per_step": flops, "torch": torch.__version__, "gpu": torch.cuda.get_device_name()}
    modes = ("eager", "compiled") if args.mode == "both" else (args.mode,)
    fns = {}
    for mode in modes:
        fns[mode] = build(model, mode)
        warm_up(fns[mode], model, x, gy)  # compiles (compiled) outside any range
    if args.mode == "both":  # the two must agree
        a, b = (fns[m](x).detach().float() for m in modes)
        result["max_abs_diff"] = float((a - b).abs().max())
    else:
        ranged_steps(fns[args.mode], model, x, gy, args.steps, args.autograd_threads)
        result["ranged_steps"] = args.steps
    if args.timing_iters > 0:
        for mode in modes:
            ms = time_steps(fns[mode], model, x, gy, args.timing_iters)
            result[f"{mode}_ms"] = ms
            print(f"{mode}: median {ms:.3f} ms a step over {args.timing_iters} CUDA-event-timed "
                  f"steps ({flops / ms / 1e9:.0f} TFLOP/s)")
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
