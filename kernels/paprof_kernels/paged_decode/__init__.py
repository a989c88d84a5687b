"""The built-in family ``paged_decode``: paged-attention decode with grouped-query attention.

One query token per sequence attends over that sequence's keys and values, which live in
fixed-size pages of a shared cache reached through a block table. The variants follow the
sources' story (baseline to v4, the handbook's teaching kernel) and go beyond it (v5, v6).
``problem.py`` holds the parameters, inputs and float64 reference, ``catalog.py`` the
variants, ``variants.py`` their GPU launch code (imported only when one is built).
"""

from __future__ import annotations

from paprof_kernels.paged_decode import catalog, problem
from paprof.family import Family, Work

TOLERANCE = {"fp32": 1e-5, "fp16": 2e-3, "bf16": 2e-3, "fp8": 2e-3}
"""Largest accepted ||out - ref|| / ||ref|| per K/V dtype. fp8 is held to the dequantised
cache (e4m3 value x its head's scale, what the reference reads), not to the values before
quantisation: a kernel is judged on its arithmetic, the quantisation is the input's."""


def work(shape: problem.Shape) -> Work:
    """Bytes: the K and V of every sequence read once, ``elem_bytes`` an element (1 for
    fp8; its two scales a KV head, 8 bytes, are left out like the query, output and block
    table, which add under 0.3 % at the default shape: as in every figure so far).
    FLOPs: Q.K and P.V, a multiply-add per head dimension each, for every query head and
    token."""
    tokens = sum(shape.context_lens)
    return Work(bytes=shape.kv_bytes, flops=4 * tokens * shape.q_heads * shape.head_dim)


FAMILY = Family(
    name=catalog.FAMILY,
    summary="paged-attention decode: one query token per sequence over a paged K/V cache, GQA",
    params=problem.Shape,
    variants=catalog.VARIANTS,
    inputs=lambda shape, seed, xp: problem.make_inputs(shape, seed, xp=xp),
    output=lambda shape, xp: problem.make_output(shape, xp),
    reference=lambda shape, inputs, xp: problem.reference(shape, inputs, xp),
    work=work,
    tolerance=lambda shape: TOLERANCE[shape.dtype],
    arch="sm_90",  # the static gate's target: the H200 these kernels are tuned for
    gate_metrics=("dram_throughput_pct", "duration_us", "dram_bytes"),
)
