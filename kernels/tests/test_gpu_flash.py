"""flash_fwd's variants against the float64 reference on the GPU (skip themselves without one).

Fresh random inputs every run; the output is poisoned with NaN before the launch. Small
shapes: 1000 and 1024 queries (a partial last tile and whole tiles), GQA 8/2, seq_k
above and below seq_q, causal and not, head_dim 64 and 128, every dtype a variant takes
(the others skip, as do the PyTorch peers where PyTorch is absent or a backend has no
kernel for the shape).
"""

from __future__ import annotations

import pytest

from paprof.errors import ShapeError
from paprof_kernels.flash_fwd import FAMILY, problem
from paprof.measure.kernels import gpu, harness

pytestmark = pytest.mark.gpu

VARIANTS = [v.id for v in FAMILY.variants]
DTYPES = ["fp32", "fp16", "bf16"]
SHAPES = [
    "batch=1,q_heads=8,kv_heads=2,seq_q=1000,head_dim=64,causal=false",
    "batch=1,q_heads=8,kv_heads=2,seq_q=1000,head_dim=64,causal=true",
    "batch=2,q_heads=4,seq_q=1024,head_dim=128,causal=true",
    "batch=2,q_heads=4,seq_q=1024,head_dim=128,causal=false",
    "batch=1,q_heads=4,kv_heads=2,seq_q=1000,seq_k=1500,head_dim=128,causal=true",
    "batch=2,q_heads=2,seq_q=1024,seq_k=700,head_dim=64,causal=false",
    "batch=1,q_heads=2,seq_q=77,seq_k=333,head_dim=128,causal=true",
]


def check(vid: str, text: str):
    params = FAMILY.parse(text)
    variant = FAMILY.variant(vid)
    try:
        variant.check(params)
        prep = harness.prepare(FAMILY, variant, params)
        result = harness.verify(prep)
    except ShapeError as err:
        pytest.skip(f"{vid} does not take {params.slug()}: {err}")
    assert result.passed, f"{vid} {params.slug()}: rel {result.rel_error} max abs {result.max_abs_error}"
    return prep, result


@pytest.mark.parametrize("vid", VARIANTS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_variant_matches_the_reference(vid, dtype, shape):
    check(vid, f"{shape},dtype={dtype}")


WGMMA_SHAPES = [  # the wgmma kernel's tile classes: partial tiles, causal diagonal, GQA, seq_k != seq_q
    "batch=1,q_heads=2,seq_q=200,head_dim=128,causal=false",
    "batch=1,q_heads=2,seq_q=200,head_dim=64,causal=false",
    "batch=2,q_heads=4,seq_q=1024,head_dim=128,causal=true",
    "batch=1,q_heads=8,kv_heads=2,seq_q=1000,head_dim=64,causal=true",
    "batch=1,q_heads=4,kv_heads=2,seq_q=1000,seq_k=1500,head_dim=128,causal=true",
    "batch=2,q_heads=2,seq_q=1024,seq_k=700,head_dim=64,causal=false",
    "batch=1,q_heads=2,seq_q=77,seq_k=333,head_dim=128,causal=true",
]


def tile_errors(prep, rows: int = 64) -> str:
    """The largest error (over every head, query and dim, against float64 attention of
    every row) of each 64-query block, a warpgroup's rows (two a CTA), named first /
    middle / last: a wrong tile class (a partial last tile, one warpgroup, the causal
    diagonal's blocks) shows in the message."""
    cp = gpu.cupy()
    p = prep.params
    prep.out.fill(cp.nan if prep.out.dtype.kind == "f" else -1)  # poison (-1: NaN's bits in bf16)
    prep.step(0)
    cp.cuda.runtime.deviceSynchronize()
    got = problem.from_storage(cp, prep.out, p.dtype)
    err = cp.empty((p.batch * p.q_heads, p.seq_q), dtype=cp.float64)
    every = list(range(p.seq_q))
    for bh in range(p.batch * p.q_heads):
        b, h = divmod(bh, p.q_heads)
        kvh = b * p.kv + h // p.group
        q, k, v = (problem.from_storage(cp, prep.inputs[0][name][i], p.dtype)
                   for name, i in (("q", bh), ("k", kvh), ("v", kvh)))
        want = problem.attention_rows(q, k, v, every, p, cp)
        err[bh] = cp.abs(got[bh] - want).max(axis=-1)
    err = cp.where(cp.isnan(err), cp.inf, err)
    blocks = -(-p.seq_q // rows)
    out = []
    for i in range(blocks):
        e = float(err[:, i * rows:(i + 1) * rows].max())
        kind = "first" if i == 0 else "last" if i == blocks - 1 else "middle"
        out.append(f"q{i * rows}-{min(p.seq_q, (i + 1) * rows) - 1} ({kind}, warpgroup {i % 2}): {e:.3g}")
    return "; ".join(out)


def by_tile(vid: str, shape: str, dtype: str, knobs: str = ""):
    """``vid`` at ``shape`` verified, the error by query block if wrong (``knobs``: wgmma2's
    -D values over the shipped ones, the variant ``catalog.tuned`` makes)."""
    from paprof_kernels.flash_fwd import catalog

    params = FAMILY.parse(f"{shape},dtype={dtype}")
    variant = FAMILY.variant(vid)
    if knobs:
        variant = catalog.tuned(variant, catalog.parse_knobs(knobs, vid))
    try:
        variant.check(params)
        prep = harness.prepare(FAMILY, variant, params)
    except ShapeError as err:
        pytest.skip(f"{vid} does not take {params.slug()}: {err}")
    result = harness.verify(prep)
    if not result.passed:
        pytest.fail(f"{vid} {params.slug()}: rel {result.rel_error:.3g}, max abs {result.max_abs_error:.3g}; "
                    f"by query block: {tile_errors(prep)}")


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
@pytest.mark.parametrize("shape", WGMMA_SHAPES)
@pytest.mark.parametrize("vid", ["wgmma", "wgmma2"])
def test_wgmma_by_tile(vid, shape, dtype):
    """wgmma and wgmma2 against the reference, with the error of every 64-query block in the message."""
    by_tile(vid, shape, dtype)


WGMMA2_BUILDS = ["", "STAGES=2", "BC=64", "OVERLAP=0,QSMEM=1", "PINGPONG=0", "QSMEM=1",
                 "OVERLAP=0,PINGPONG=0,QSMEM=1", "TMA=0,STAGES=2", "TMA=0", "TMA=0,STAGES=2,BC=64",
                 "TMA=0,STAGES=2,OVERLAP=0,PINGPONG=0,QSMEM=1",
                 "FAST_MAX=0", "DESC_ADD=0", "REG_CONSUMER=240,REG_PRODUCER=24"]
"""wgmma2's knob settings kernels/scripts/tune_flash.py --variant wgmma2 benches (over the shipped ones:
the TMA producer, 3 stages), then the cp.async producer's (TMA=0)."""


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
@pytest.mark.parametrize("shape", [s for s in WGMMA_SHAPES if "head_dim=128" in s])
def test_wgmma2_cpasync_by_tile(shape, dtype):
    """wgmma2 with the cp.async producer (TMA=0, 2 stages) on wgmma's tile classes at head_dim
    128 (the shipped TMA build is in test_wgmma_by_tile)."""
    by_tile("wgmma2", shape, dtype, "TMA=0,STAGES=2")


@pytest.mark.parametrize("shape", ["batch=1,q_heads=4,kv_heads=2,seq_q=1000,seq_k=1500,head_dim=128,causal=true",
                                   "batch=2,q_heads=2,seq_q=1024,seq_k=700,head_dim=128,causal=false"])
@pytest.mark.parametrize("knobs", WGMMA2_BUILDS)
def test_wgmma2_builds_by_tile(knobs, shape):
    """Each of wgmma2's knob settings (FA3's steps switched off one at a time) is right too."""
    by_tile("wgmma2", shape, "bf16", knobs)


@pytest.mark.parametrize("vid, tiles", [("handbook", 4), ("mma", 4), ("mma128", 2), ("wgmma", 2), ("wgmma2", 2)])
def test_kernels_report_their_launch(vid, tiles):
    dtype = "fp32" if vid == "handbook" else "bf16"
    prep, _ = check(vid, f"batch=1,q_heads=2,seq_q=200,head_dim=128,dtype={dtype}")
    (k,) = prep.launcher.kernels
    assert k.name == f"flash_fwd_{vid}" and k.grid == (tiles, 2, 1)
    assert k.dynamic_smem == FAMILY.variant(vid).shared_mem(prep.params) > 48 * 1024
    assert k.registers and k.registers <= 255


def test_mma_times_and_beats_the_handbook():
    """A sanity check of the timing path and of the tensor cores doing the work."""
    fast, _ = check("mma", "batch=1,q_heads=8,seq_q=2048,head_dim=128,dtype=bf16")
    slow, _ = check("handbook", "batch=1,q_heads=8,seq_q=2048,head_dim=128,dtype=fp32")
    t_fast = min(harness.time_steps(fast, 10))
    t_slow = min(harness.time_steps(slow, 10))
    assert 0 < t_fast < t_slow


def test_mma128_times_and_beats_mma():
    """mma128's point: the 128-query tile is faster than mma's 64 at a long sequence."""
    new, _ = check("mma128", "batch=2,q_heads=16,seq_q=4096,head_dim=128,dtype=bf16")
    old, _ = check("mma", "batch=2,q_heads=16,seq_q=4096,head_dim=128,dtype=bf16")
    assert min(harness.time_steps(new, 10)) < min(harness.time_steps(old, 10))


@pytest.mark.parametrize("shape", [
    "batch=1,q_heads=2,seq_q=300,seq_k=777,head_dim=64,causal=true",  # rows of every 128-row tile
    "batch=1,q_heads=3,kv_heads=1,seq_q=130,seq_k=130,head_dim=128,causal=true",
])
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_mma128_every_row_matches_the_reference(shape, dtype):
    """The family's sample picks rows by 64-row tiles; here every row and head of small
    shapes is checked against the float64 attention, so each position of mma128's
    128-row tile (and the second half of its last, partial tile) is seen, in the shipped
    4 x 32 layout."""
    import cupy as cp
    import numpy as np

    from paprof_kernels.flash_fwd import problem

    params = FAMILY.parse(f"{shape},dtype={dtype}")
    prep, _ = check("mma128", f"{shape},dtype={dtype}")  # verify ran it on input set 0 into prep.out
    out = problem.from_storage(np, cp.asnumpy(prep.out), dtype)
    inputs = {k: cp.asnumpy(a) for k, a in prep.inputs[0].items()}
    worst = 0.0
    for bh in range(params.batch * params.q_heads):
        b, h = divmod(bh, params.q_heads)
        kvh = b * params.kv + h // params.group
        ref = problem.attention_rows(problem.from_storage(np, inputs["q"][bh], dtype),
                                     problem.from_storage(np, inputs["k"][kvh], dtype),
                                     problem.from_storage(np, inputs["v"][kvh], dtype),
                                     list(range(params.seq_q)), params, np)
        err = np.linalg.norm(out[bh] - ref, axis=1) / np.linalg.norm(ref, axis=1)
        worst = max(worst, float(err.max()))
    assert worst < FAMILY.tolerance_for(params), worst


def test_the_gemm_ceiling_is_measured():
    gemm = harness.measure_gemm_ceiling(n=4096, launches=5)
    assert gemm["dtype"] in ("bf16", "fp16") and gemm["method"] in ("cupy.matmul", "cublas.gemmEx")
    assert 50 < gemm["tflops"] < 2000, gemm
