"""The paged-attention decode variants: ids, ideas, kernel names and the shapes each takes.

Nothing here needs a GPU. The launch code is in ``variants.py``.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from types import MappingProxyType

from paprof.errors import ShapeError
from paprof_kernels.paged_decode import peers
from paprof_kernels.paged_decode.problem import Shape
from paprof.family import CallableVariant, CudaVariant

FAMILY = "paged_decode"


def _build(variant, shape, device, tuning: Mapping | None = None):
    """The GPU side, imported only when a variant is built."""
    from paprof_kernels.paged_decode import variants

    return variants.build(variant, shape, device, tuning)


def _units(vid: str, tuning: Mapping | None = None):
    """The static gate's compile units of variant ``vid`` (``CudaVariant.compile_units``)."""

    def units(shape):
        from paprof_kernels.paged_decode import variants

        return variants.compile_units(vid, shape, tuning)

    return units


TUNABLE = ("v5", "v6", "v7")
"""The variants ``tuned`` takes (``variants.FAST_VARIANTS``)."""


def tuned(variant: CudaVariant, tuning: Mapping) -> CudaVariant:
    """``variant`` (v5, v6 or v7, as the family holds it) built and compiled with ``tuning``
    (-D values and v7's planning knobs: ``variants.HOST_KNOBS`` says how) instead of the
    shipped choice: what kernels/scripts/tune_v5.py and the tests run; the family's own
    variants stay the shipped ones."""
    if variant.id not in TUNABLE:
        raise ValueError(f"paged_decode {variant.id} has no tuning; {', '.join(TUNABLE)} have")
    tuning = MappingProxyType(dict(tuning))
    return dataclasses.replace(variant, build=functools.partial(_build, tuning=tuning),
                               compile_units=_units(variant.id, tuning))

HANDBOOK_SMEM_BYTES = 48 * 1024
"""The handbook kernel keeps every score in (non-opt-in) shared memory."""
HANDBOOK_SCRATCH_FLOATS = 64
HANDBOOK_MAX_CONTEXT = HANDBOOK_SMEM_BYTES // 4 - HANDBOOK_SCRATCH_FLOATS

V4_DEFAULT_SPLITS = 4
"""v4 (the sources' split-KV) uses this many splits when the shape names none."""

LANE_VECTOR_DIMS = (32, 64, 128, 256)
"""head_dim values a one-warp-per-head kernel can split evenly into per-lane vectors."""


def _fp32_only(shape: Shape, vid: str) -> None:
    if shape.dtype != "fp32":
        raise ShapeError(
            f"{vid} reads fp32 K/V only (dtype={shape.dtype}); v5 and v6 read fp16/bf16/fp8"
        )


def _thread_per_dim(shape: Shape, vid: str, multiple_of_32: bool = False) -> None:
    if shape.head_dim > 1024:
        raise ShapeError(f"{vid} uses one thread per output dimension: head_dim must be <= 1024")
    if multiple_of_32 and shape.head_dim % 32:
        raise ShapeError(
            f"{vid} reduces over whole warps: head_dim must be a multiple of 32, got {shape.head_dim}"
        )


def _lane_vector(shape: Shape, vid: str) -> None:
    if shape.head_dim not in LANE_VECTOR_DIMS:
        raise ShapeError(
            f"{vid} gives each of 32 lanes head_dim/32 dims as one vector: head_dim must be one of "
            f"{', '.join(map(str, LANE_VECTOR_DIMS))}, got {shape.head_dim}"
        )


def check_baseline(shape: Shape) -> None:
    _fp32_only(shape, "baseline")
    _thread_per_dim(shape, "baseline")


def check_v1(shape: Shape) -> None:
    _fp32_only(shape, "v1")
    _thread_per_dim(shape, "v1", multiple_of_32=True)


def check_v2(shape: Shape) -> None:
    _fp32_only(shape, "v2")
    _lane_vector(shape, "v2")


def v3_smem_bytes(shape: Shape) -> int:
    return 2 * shape.page_size * shape.head_dim * 4


def check_v3(shape: Shape) -> None:
    _fp32_only(shape, "v3")
    _lane_vector(shape, "v3")
    if shape.group > 32:
        raise ShapeError(f"v3 runs one warp per query head of a group: at most 32, got {shape.group}")
    if v3_smem_bytes(shape) > 227 * 1024:
        raise ShapeError(
            f"v3 stages a page of K and V in shared memory: {v3_smem_bytes(shape)} bytes "
            f"for page {shape.page_size} x head_dim {shape.head_dim} exceeds the 227 KiB a block can have"
        )


def check_v4(shape: Shape) -> None:
    _fp32_only(shape, "v4")
    _lane_vector(shape, "v4")


def check_handbook(shape: Shape) -> None:
    _fp32_only(shape, "handbook")
    if shape.max_context > HANDBOOK_MAX_CONTEXT:
        raise ShapeError(
            f"handbook keeps every score in shared memory (48 KiB a block): context "
            f"{shape.max_context} exceeds its cap of {HANDBOOK_MAX_CONTEXT} tokens; use v5"
        )


def fast_vector_lanes(shape: Shape) -> int:
    """Lanes that hold one token row of K (16 bytes each) in v5/v6."""
    return shape.head_dim * shape.elem_bytes // 16


FP8_DIMS = (64, 128)
"""head_dim values the fp8 cache takes: it has only the tensor cores' register feed."""


def check_fast(shape: Shape, vid: str = "v5") -> None:
    if shape.dtype == "fp8" and shape.head_dim not in FP8_DIMS:
        raise ShapeError(
            f"{vid} reads fp8 K/V only through the tensor cores' register feed: head_dim must be "
            f"one of {', '.join(map(str, FP8_DIMS))}, got {shape.head_dim}"
        )
    lanes = fast_vector_lanes(shape)
    if shape.head_dim % 32 or lanes < 2 or lanes > 32 or lanes & (lanes - 1):
        ok = [d for d in (32, 64, 128, 256) if (d * shape.elem_bytes // 16) in (2, 4, 8, 16, 32)]
        raise ShapeError(
            f"{vid} reads a token's row as 16-byte vectors spread over a power-of-two number of "
            f"lanes (at most 32): for {shape.dtype} head_dim must be one of "
            f"{', '.join(map(str, ok))}, got {shape.head_dim}"
        )
    if shape.group > 8:
        raise ShapeError(
            f"{vid} keeps every query head of a group in registers: at most 8 per KV head, got {shape.group}"
        )


def check_v6(shape: Shape) -> None:
    check_fast(shape, "v6")


def check_v7(shape: Shape) -> None:
    check_fast(shape, "v7")
    if shape.num_splits:
        raise ShapeError("v7 splits the work by tokens: give chunk=PAGES (pages a CTA), not splits")


VARIANTS = [
    CudaVariant(
        id="baseline",
        idea="one CTA per (batch, q_head), one thread per output dim; every thread recomputes every full Q.K dot product",
        kernel_regex=r"paged_decode_baseline",
        sources=("baseline.cu",),
        launch="grid (q_heads, batch) x head_dim threads",
        build=_build,
        compile_units=_units("baseline"),
        accepts=check_baseline,
        order=0,
    ),
    CudaVariant(
        id="v1",
        idea="fused: each thread one dim of the dot product, warp-shuffle reduce, warp partials through shared memory (two barriers per token)",
        kernel_regex=r"paged_decode_v1",
        sources=("v1_fused.cu",),
        launch="grid (q_heads, batch) x head_dim threads",
        build=_build,
        compile_units=_units("v1"),
        accepts=check_v1,
        order=1,
    ),
    CudaVariant(
        id="v2",
        idea="vectorized: one warp per (batch, q_head), each lane owns head_dim/32 dims as one vector load, warp-only reductions",
        kernel_regex=r"paged_decode_v2",
        sources=("v2_vectorized.cu",),
        launch="grid (q_heads, batch) x 32 threads",
        build=_build,
        compile_units=_units("v2"),
        accepts=check_v2,
        order=2,
    ),
    CudaVariant(
        id="v3",
        idea="GQA reuse: one CTA per (batch, kv_head), a warp per query head; each K/V page staged once in shared memory for the group",
        kernel_regex=r"paged_decode_v3",
        sources=("v3_gqa.cu",),
        launch="grid (kv_heads, batch) x (q_per_kv x 32) threads, 2 x page x head_dim x 4 B shared",
        build=_build,
        compile_units=_units("v3"),
        accepts=check_v3,
        order=3,
    ),
    CudaVariant(
        id="v4",
        idea="split-KV: v2's warp over a slice of the pages (grid z = splits) writing (m, l, O), then a merge kernel",
        kernel_regex=r"paged_decode_v4_(partial|merge)",
        sources=("v4_split.cu",),
        launch="grid (q_heads, batch, splits) x 32, then (q_heads, batch) x 32",
        build=_build,
        compile_units=_units("v4"),
        accepts=check_v4,
        order=4,
    ),
    CudaVariant(
        id="handbook",
        idea="teaching kernel: 4 warps score tokens round-robin into shared memory, block softmax, then thread d sums p_t V_t[d]",
        kernel_regex=r"paged_decode_handbook",
        sources=("handbook.cu",),
        launch="grid (q_heads, batch) x 128 threads, context x 4 B shared",
        build=_build,
        compile_units=_units("handbook"),
        accepts=check_handbook,
        order=5,
    ),
    CudaVariant(
        id="v5",
        idea="GQA packed, 16-byte loads of fp32/fp16/bf16 K/V, several tokens in flight per warp in registers, tensor cores for fp16/bf16 fed straight from those registers, online softmax (no context cap)",
        kernel_regex=r"paged_decode_v5",
        sources=("v5_fast.cu", "v5_mma.cu"),
        launch="grid (kv_heads, batch) x 4 warps (fp32) or 3 warps with tensor cores (fp16/bf16)",
        build=_build,
        compile_units=_units("v5"),
        accepts=check_fast,
        order=6,
    ),
    CudaVariant(
        id="v6",
        idea="v5 with split-KV, the split count chosen from SM count and occupancy (none when batch x kv_heads fills the GPU); the last split to finish merges, so one kernel",
        kernel_regex=r"paged_decode_v6_(split|nosplit)",
        sources=("v5_fast.cu", "v5_mma.cu"),
        launch="grid (kv_heads, batch, splits) x v5's block; the last split of each (batch, kv_head) to finish merges",
        build=_build,
        compile_units=_units("v6"),
        accepts=check_v6,
        order=7,
    ),
    CudaVariant(
        id="v7",
        idea="the one to pick: v6's kernels with the work split by tokens; a host-built work list cuts every sequence into chunks of at most P pages (P the smallest whose CTAs fit the resident slots, longest chunks first), the last chunk of a sequence merges its parts, a one-chunk sequence writes directly; an even batch that fills the GPU takes v6's no-split kernel. A ragged batch of a 16-bit cache takes the packed path (the sequences' pages concatenated and cut into ranges of equal cost, one a CTA). A plan that cuts a sequence into 32 parts or more (a batch of one or two long contexts) merges them in a second kernel over many SMs, not in the last CTA to finish",
        kernel_regex=r"paged_decode_v7_(tokens|packed|merge)|paged_decode_v6_nosplit",
        sources=("v5_fast.cu", "v5_mma.cu"),
        launch="grid (kv_heads, work items) x v5's block, or v6's (kv_heads, batch) when the batch fills the GPU; then, for plans of 32 parts a sequence or more, paged_decode_v7_merge over (q_heads, sequences of several parts) x 512 threads",
        build=_build,
        compile_units=_units("v7"),
        accepts=check_v7,
        order=8,
    ),
]


PEER_VARIANTS = [
    CallableVariant(
        id="flashinfer",
        idea="peer, not ours: FlashInfer's paged decode on the tensor cores (its prefill kernel, the GQA group packed into the query tile), split-KV and a merge kernel by its own plan",
        kernel_regex=r"BatchPrefillWithPagedKVCacheKernel|VariableLengthMergeStatesKernel",
        prepare="paprof_kernels.paged_decode.peers:prepare_tensor_cores",
        arrays="torch",
        launch="FlashInfer's plan (BatchDecodeWithPagedKVCacheWrapper, use_tensor_cores=True); then one fp16 -> fp32 cast of the output",
        accepts=peers.check_tensor_cores,
        order=9,
    ),
    CallableVariant(
        id="flashinfer_cc",
        idea="peer, not ours: FlashInfer's paged decode on CUDA cores (BatchDecodeWithPagedKVCacheKernel), split-KV and a merge kernel by its own plan",
        kernel_regex=r"BatchDecodeWithPagedKVCacheKernel|VariableLengthMergeStatesKernel",
        prepare="paprof_kernels.paged_decode.peers:prepare_cuda_cores",
        arrays="torch",
        launch="FlashInfer's plan (BatchDecodeWithPagedKVCacheWrapper, use_tensor_cores=False); then one fp16 -> fp32 cast of the output",
        accepts=peers.check_cuda_cores,
        order=10,
    ),
]
"""FlashInfer as a peer (``peers.py``): in the family only where it can be imported."""

if peers.available():
    VARIANTS = VARIANTS + PEER_VARIANTS
