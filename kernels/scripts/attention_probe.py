"""Probe on the GPU machine: a bf16 GEMM ceiling and PyTorch SDPA's backends at the
flash-attention family's target shapes (TFLOP/s, medians of CUDA-event timings).

    python3 kernels/scripts/attention_probe.py            (needs torch with CUDA)

Planning figures for the flash_fwd family; the family's own bench measures the same
things through paprof.
"""

from __future__ import annotations

import statistics

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


def timed(fn, launches=20, rounds=2):
    fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(rounds):
        times = []
        for _ in range(launches):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b) * 1e3)
        out.append(statistics.median(times))
    return out


def main():
    print(torch.__version__, torch.cuda.get_device_name())
    for n in (4096, 8192, 16384):
        a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
        us = timed(lambda: a @ b)
        print(f"gemm bf16 {n}^3: {us} us -> {[round(2 * n**3 / u / 1e6, 1) for u in us]} TFLOP/s")
    backends = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
                "efficient": SDPBackend.EFFICIENT_ATTENTION}
    for batch, heads, seq, dim in ((4, 32, 8192, 128), (4, 32, 8192, 64), (4, 32, 1024, 128)):
        q, k, v = (torch.randn(batch, heads, seq, dim, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        for causal in (False, True):
            flops = 4 * batch * heads * seq * seq * dim * (0.5 if causal else 1.0)
            for name, backend in backends.items():
                try:
                    with sdpa_kernel(backend):
                        us = timed(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal))
                except Exception as err:  # a backend that does not run here
                    print(f"b{batch} h{heads} s{seq} d{dim} causal={causal} {name}: {type(err).__name__}: {str(err)[:80]}")
                    continue
                print(f"b{batch} h{heads} s{seq} d{dim} causal={causal} {name}: {[round(u, 1) for u in us]} us "
                      f"-> {[round(flops / u / 1e6, 1) for u in us]} TFLOP/s")


if __name__ == "__main__":
    main()
