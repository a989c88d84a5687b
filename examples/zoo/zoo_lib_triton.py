"""lib3's Triton matmul (``zoo_lib_family``): C = A B, fp16 in, fp32 accumulation, fp16 out;
128 x 128 output tiles, 64-wide steps of k, 8 warps. Both variants launch this same
kernel; only the launch's ``num_stages`` differs. n must be a multiple of 128."""

from __future__ import annotations

import triton
import triton.language as tl

BM, BN, BK = 128, 128, 64


@triton.jit
def zoo_lib_mm(a_ptr, b_ptr, c_ptr, n, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a = a_ptr + rm[:, None] * n + rk[None, :]
    b = b_ptr + rk[:, None] * n + rn[None, :]
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for _ in range(0, n, BK):
        acc += tl.dot(tl.load(a), tl.load(b))
        a += BK
        b += BK * n
    tl.store(c_ptr + rm[:, None] * n + rn[None, :], acc.to(tl.float16))


def matmul(a, b, out, num_stages: int) -> None:
    n = a.shape[0]
    zoo_lib_mm[(n // BM, n // BN)](a, b, out, n, BM=BM, BN=BN, BK=BK, num_warps=8, num_stages=num_stages)
