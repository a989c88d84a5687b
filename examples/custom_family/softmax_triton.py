"""The ``triton`` variant of the softmax family: one Triton program per row.

Imported only when the variant is built (on the GPU machine): Triton at the top is fine.
Rows whose next power of two is at most ``ONE_PASS_MAX`` are held whole in registers
(read once, written once); longer rows take an online-softmax loop over ``LOOP_BLOCK``
chunks (running max and sum per lane) and a second pass that re-reads and writes.
Triton launches on PyTorch's current stream, the one paprof times.
"""

from __future__ import annotations

import triton
import triton.language as tl

ONE_PASS_MAX = 16384
LOOP_BLOCK = 4096


@triton.jit
def softmax_triton_kernel(x_ptr, y_ptr, cols, BLOCK: tl.constexpr, ONE_PASS: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)  # 64-bit offsets: rows x cols may pass 2**31
    x_row = x_ptr + row * cols
    y_row = y_ptr + row * cols
    offs = tl.arange(0, BLOCK)
    if ONE_PASS:
        mask = offs < cols
        v = tl.load(x_row + offs, mask=mask, other=float("-inf"))
        e = tl.exp(v - tl.max(v, axis=0))  # masked lanes: exp(-inf) = 0
        tl.store(y_row + offs, e * (1.0 / tl.sum(e, axis=0)), mask=mask)
    else:
        # pass 1: per-lane running max and sum of exp; cols > BLOCK, so after the first
        # (full) chunk every lane's max is finite
        m = tl.full([BLOCK], float("-inf"), tl.float32)
        s = tl.zeros([BLOCK], tl.float32)
        for start in range(0, cols, BLOCK):
            idx = start + offs
            v = tl.load(x_row + idx, mask=idx < cols, other=float("-inf"))
            m_new = tl.maximum(m, v)
            s = s * tl.exp(m - m_new) + tl.exp(v - m_new)
            m = m_new
        row_max = tl.max(m, axis=0)
        inv = 1.0 / tl.sum(s * tl.exp(m - row_max), axis=0)
        # pass 2: re-read, normalise, write
        for start in range(0, cols, BLOCK):
            idx = start + offs
            mask = idx < cols
            v = tl.load(x_row + idx, mask=mask, other=float("-inf"))
            tl.store(y_row + idx, tl.exp(v - row_max) * inv, mask=mask)


def config(cols: int) -> dict:
    """BLOCK, ONE_PASS and num_warps for rows of ``cols`` (about 32 floats a thread)."""
    block = triton.next_power_of_2(cols)
    if block <= ONE_PASS_MAX:
        return {"BLOCK": block, "ONE_PASS": True, "num_warps": min(16, max(4, block // 1024))}
    return {"BLOCK": LOOP_BLOCK, "ONE_PASS": False, "num_warps": 8}


def softmax(inputs, out, params) -> None:
    x = inputs["x"]
    softmax_triton_kernel[(params.rows,)](x, out, params.cols, **config(params.cols))
