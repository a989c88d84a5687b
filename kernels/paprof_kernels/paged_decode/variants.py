"""GPU launch code for the paged-decode variants (imports CuPy through ``kernels.gpu``).

``build(variant, shape, device)`` compiles what the variant needs for this shape and
returns a ``Launcher``: calling it enqueues every kernel of one decode step.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

import numpy as np

from paprof.errors import ShapeError
from paprof_kernels.paged_decode import catalog, words
from paprof_kernels.paged_decode.problem import Shape
from paprof.family import KernelLaunch, Launcher
from paprof.measure.kernels import gpu

HERE = Path(__file__).resolve().parent

FAST_TUNING = MappingProxyType({
    # K/V dtype -> (source, compile-time knobs) of v5/v6, measured on the H200 (kernels/NOTES.md):
    # fp32 keeps 8 steps of loads in flight in registers; 16-bit caches go to the tensor cores,
    # fed straight from 16-byte register loads with an L2::128B hint (FEED 1).
    "fp32": ("v5_fast.cu", {"WARPS": 4, "UNROLL": 8}),
    "fp16": ("v5_mma.cu", {"WARPS": 3, "FEED": 1, "FEED_HINT": 1}),
    "bf16": ("v5_mma.cu", {"WARPS": 3, "FEED": 1, "FEED_HINT": 1}),
    # e4m3 bytes converted to f16 pairs in registers (cvt.rn.f16x2.e4m3x2): a 16-token tile is
    # half the bytes of fp16's, so a warp takes two tiles a step (TSUB 2) to keep as many
    # bytes in flight; scales folded into the query (K) and the output (V). Not yet measured.
    "fp8": ("v5_mma.cu", {"WARPS": 3, "FEED": 1, "FEED_HINT": 1, "TSUB": 2}),
})
"""The shipped -D values of v5/v6/v7 by K/V dtype (read only: a sweep passes its own as a
``tuning`` to ``build``, ``compile_units`` and ``fast_defines``)."""
RING_TUNING = MappingProxyType({"FEED": 0, "NSTAGES": 2})
"""v5_mma.cu's cp.async ring, for head_dim values the register feed does not handle."""
FEED_DIMS = (64, 128)
"""head_dim values v5_mma.cu's register feed (FEED 1) handles."""
MIN_PAGES_PER_SPLIT = 8
"""v6 never gives a split fewer pages than this (the merge would cost more than it hides)."""

GROUP1_D64_TUNING = MappingProxyType({
    # K/V dtype -> knobs that replace FAST_TUNING's for group 1 at head_dim 64 (32/32 heads):
    # half the warps a CTA and twice the CTAs a SM. fp16 on the H200 (decode7 call, commit
    # 6d7bf95, kernels/scripts/tune_v5.py --v7, v6 at batch 64 ctx 4096 32/32 d64): {WARPS 2,
    # MIN_BLOCKS 8} 97.5 % of the read ceiling (476.7 us) against 87.4 % for the shipped
    # {WARPS 3} (4 warps x 3 CTAs 97.1 %, TSUB 2 96.2 %, v5_fast UNROLL 8 96.4 %). The next
    # call (commit 6a52051, a process whose read ceiling measured 4.42 TB/s): bf16 {WARPS 2,
    # MIN_BLOCKS 8} 99.3 % against 89.1 % for {WARPS 3}; fp8 (TSUB 2 kept) {WARPS 2,
    # MIN_BLOCKS 8} 87.9 % against 73.8 % for {WARPS 3} (the call before), {WARPS 4,
    # MIN_BLOCKS 3} 81.3 %, {WARPS 2, MIN_BLOCKS 8, TSUB 4} 76.5 % (128 registers, spills).
    "fp16": {"WARPS": 2, "MIN_BLOCKS": 8},
    "bf16": {"WARPS": 2, "MIN_BLOCKS": 8},
    "fp8": {"WARPS": 2, "MIN_BLOCKS": 8},
})
"""Per-shape tuning on top of FAST_TUNING (fast_defines, shipped builds only: a ``tuning`` that
names -D values replaces both tables)."""

HOST_KNOBS = ("SOURCE", "ORDER", "PATH", "MERGE", "SNAP", "COST")
"""Keys of a ``tuning`` that are not -D values: SOURCE the .cu (``v5_fast.cu`` or
``v5_mma.cu``; default the dtype's FAST_TUNING source) and v7's planning: ORDER (plan_work's
order, default V7_ORDER), PATH (v7_path forced: "direct", "tokens" or "packed"; default the
rule), MERGE (v7_merge forced: "fused" or "kernel"; default the rule), SNAP (V7_PACK_SNAP) and
COST (V7_PACK_ITEM_COST).

A ``tuning`` (the value kernels/scripts/tune_v5.py, the sanitizer script and the tests pass to
``build``, ``compile_units`` and ``fast_defines``; None: what ships) maps these and -D names to
values. One that names any -D value or SOURCE is the whole compile-time tuning of the build:
it replaces the dtype's FAST_TUNING entry and GROUP1_D64_TUNING (RING_TUNING still takes over
at head dims the register feed does not handle); one that names host knobs only keeps the
shipped -D values."""

_DTYPE_CODE = {"fp32": 0, "fp16": 1, "bf16": 2, "fp8": 3}


def _launch(kernel, name, grid, block, smem=0) -> KernelLaunch:
    return gpu.kernel_launch(kernel, name, grid, block, smem)


def _common_args(inputs: dict, shape: Shape):
    return (
        inputs["query"],
        inputs["key_cache"],
        inputs["value_cache"],
        inputs["block_tables"],
        inputs["context_lens"],
        np.float32(shape.scale),
        np.int32(shape.q_heads),
        np.int32(shape.kv_heads),
    )


_PLAIN_UNITS = {
    # variant -> (source, -D values of the shape): what each builder below compiles
    "baseline": ("baseline.cu", lambda shape: {}),
    "v1": ("v1_fused.cu", lambda shape: {}),
    "handbook": ("handbook.cu", lambda shape: {}),
    "v2": ("v2_vectorized.cu", lambda shape: {"HEAD_DIM": shape.head_dim}),
    "v3": ("v3_gqa.cu", lambda shape: {"HEAD_DIM": shape.head_dim}),
    "v4": ("v4_split.cu", lambda shape: {"HEAD_DIM": shape.head_dim}),
}
_FAST_NAMES = {"v5": (("paged_decode_v5", False),),
               "v6": (("paged_decode_v6_split", True), ("paged_decode_v6_nosplit", False)),
               "v7": (("paged_decode_v7_tokens", True), ("paged_decode_v7_packed", True),
                      ("paged_decode_v6_nosplit", False))}
_WORKLIST_OF = {"paged_decode_v7_tokens": 1, "paged_decode_v7_packed": 2}
"""WORKLIST of v7's kernels (fast_common.cuh): 1 an item a CTA, 2 a range of items a CTA."""


def compile_units(vid: str, shape: Shape, tuning: Mapping | None = None) -> list[tuple[list[Path], dict]]:
    """The sources and -D values a variant's builder compiles at ``shape`` (v6, v7: both of
    their kernels; which one runs depends on the GPU), with ``tuning`` for v5/v6/v7 (None:
    the shipped builds). Pure Python: the static gate's."""
    if vid in _PLAIN_UNITS:
        source, defines = _PLAIN_UNITS[vid]
        return [([HERE / source], defines(shape))]
    return [([fast_source(shape, tuning)],
             fast_defines(shape, split, name, worklist=_WORKLIST_OF.get(name, 0), tuning=tuning))
            for name, split in _FAST_NAMES[vid]]


def _module(vid: str, shape: Shape):
    ((sources, defines),) = compile_units(vid, shape)
    return gpu.compile_module(sources, defines)


def _thread_per_dim(variant, shape: Shape, name: str) -> Launcher:
    module = _module(variant.id, shape)
    kernel = module.get_function(name)
    grid, block = (shape.q_heads, shape.batch), (shape.head_dim,)
    info = _launch(kernel, name, grid, block)

    def run(inputs, out):
        kernel(
            grid,
            block,
            (out, *_common_args(inputs, shape), np.int32(shape.head_dim), np.int32(shape.page_size),
             np.int32(shape.pages_per_seq)),
        )

    return Launcher(variant.id, [info], run)


def _build_baseline(variant, shape, device):
    return _thread_per_dim(variant, shape, "paged_decode_baseline")


def _build_v1(variant, shape, device):
    return _thread_per_dim(variant, shape, "paged_decode_v1")


def _build_handbook(variant, shape, device):
    module = _module(variant.id, shape)
    name = "paged_decode_handbook"
    kernel = module.get_function(name)
    grid, block = (shape.q_heads, shape.batch), (128,)
    smem = (catalog.HANDBOOK_SCRATCH_FLOATS + shape.max_context) * 4
    info = _launch(kernel, name, grid, block, smem)

    def run(inputs, out):
        kernel(
            grid,
            block,
            (out, *_common_args(inputs, shape), np.int32(shape.head_dim), np.int32(shape.page_size),
             np.int32(shape.pages_per_seq)),
            shared_mem=smem,
        )

    return Launcher(variant.id, [info], run)


def _build_v2(variant, shape, device):
    module = _module(variant.id, shape)
    name = "paged_decode_v2"
    kernel = module.get_function(name)
    grid, block = (shape.q_heads, shape.batch), (32,)
    info = _launch(kernel, name, grid, block)

    def run(inputs, out):
        kernel(grid, block, (out, *_common_args(inputs, shape), np.int32(shape.page_size),
                             np.int32(shape.pages_per_seq)))

    return Launcher(variant.id, [info], run)


def _build_v3(variant, shape, device):
    module = _module(variant.id, shape)
    name = "paged_decode_v3"
    kernel = module.get_function(name)
    grid, block = (shape.kv_heads, shape.batch), (shape.group * 32,)
    smem = catalog.v3_smem_bytes(shape)
    if smem > device.smem_per_block_optin:
        raise ShapeError(
            f"v3 needs {smem} bytes of shared memory a block; this GPU allows {device.smem_per_block_optin}"
        )
    info = _launch(kernel, name, grid, block, smem)

    def run(inputs, out):
        kernel(grid, block, (out, *_common_args(inputs, shape), np.int32(shape.page_size),
                             np.int32(shape.pages_per_seq)), shared_mem=smem)

    return Launcher(variant.id, [info], run)


def _fast_args(inputs: dict, shape: Shape) -> tuple:
    """v5/v6's arguments after the outputs (FAST_KERNEL_PARAMS); fp8 adds its scales."""
    scales = (inputs["k_scale"], inputs["v_scale"]) if shape.dtype == "fp8" else ()
    return (*_common_args(inputs, shape), np.int32(shape.pages_per_seq), *scales)


def _split_buffers(shape: Shape, splits: int):
    cp = gpu.cupy()
    rows = shape.batch * shape.q_heads * splits
    return (
        cp.empty(rows, dtype=cp.float32),
        cp.empty(rows, dtype=cp.float32),
        cp.empty(rows * shape.head_dim, dtype=cp.float32),
    )


def _build_v4(variant, shape, device):
    module = _module(variant.id, shape)
    partial = module.get_function("paged_decode_v4_partial")
    merge = module.get_function("paged_decode_v4_merge")
    splits = shape.num_splits or catalog.V4_DEFAULT_SPLITS
    part_m, part_l, part_o = _split_buffers(shape, splits)
    grid_p, grid_m, block = (shape.q_heads, shape.batch, splits), (shape.q_heads, shape.batch), (32,)
    infos = [
        _launch(partial, "paged_decode_v4_partial", grid_p, block),
        _launch(merge, "paged_decode_v4_merge", grid_m, block),
    ]

    def run(inputs, out):
        partial(grid_p, block, (part_m, part_l, part_o, *_common_args(inputs, shape),
                                np.int32(shape.page_size), np.int32(shape.pages_per_seq)))
        merge(grid_m, block, (out, part_m, part_l, part_o, np.int32(shape.q_heads), np.int32(splits)))

    return Launcher(variant.id, infos, run, details={"num_splits": splits})


def _compile_knobs(tuning: Mapping | None) -> dict:
    """The -D values a ``tuning`` names (HOST_KNOBS left out)."""
    return {k: v for k, v in (tuning or {}).items() if k not in HOST_KNOBS}


def _host(tuning: Mapping | None, knob: str):
    """A host knob of ``tuning`` (HOST_KNOBS), or the shipped value."""
    shipped = {"ORDER": V7_ORDER, "PATH": "", "MERGE": "", "SNAP": V7_PACK_SNAP, "COST": V7_PACK_ITEM_COST}
    return (tuning or {}).get(knob, shipped[knob])


def fast_source(shape: Shape, tuning: Mapping | None = None) -> Path:
    """The .cu of v5/v6/v7 at ``shape``: the dtype's FAST_TUNING source, or ``tuning``'s SOURCE."""
    return HERE / (tuning or {}).get("SOURCE", FAST_TUNING[shape.dtype][0])


def fast_defines(shape: Shape, split: bool, name: str, worklist: int = 0, defer: bool = False,
                 tuning: Mapping | None = None) -> dict:
    """Compile-time constants of v5/v6's kernel for this shape (v7's work list: worklist 1
    an item a CTA, 2 packed ranges; ``defer``: the merges left to paged_decode_v7_merge);
    ``tuning`` (HOST_KNOBS says how): a sweep's -D values instead of the shipped ones."""
    knobs = _compile_knobs(tuning)
    if knobs or (tuning or {}).get("SOURCE"):
        tuning = knobs
    else:
        tuning = dict(FAST_TUNING[shape.dtype][1])
        if shape.group == 1 and shape.head_dim == 64 and tuning.get("FEED"):
            tuning.update(GROUP1_D64_TUNING.get(shape.dtype, {}))
    if tuning.get("FEED") and shape.head_dim not in FEED_DIMS:
        tuning.update(RING_TUNING)
    # Resident CTAs a SM the registers must allow. Groups of 8 heads on the H200 (kernels/NOTES.md,
    # item 19): the fp32 kernel at 4 spills 928 bytes (1,479 us) and at 2 does not (903 us);
    # the register feed fits 4 with any group (252 us against 269 at 2); the ring keeps 2.
    big_group_at_2 = shape.group > 4 and not tuning.get("FEED")
    return {
        "HEAD_DIM": shape.head_dim,
        "GROUP": shape.group,
        "KV_DTYPE": _DTYPE_CODE[shape.dtype],
        "PAGE_SIZE": shape.page_size,
        "MIN_BLOCKS": 2 if big_group_at_2 else 4,
        **tuning,
        "SPLIT": int(split),
        **({"WORKLIST": int(worklist)} if worklist else {}),
        **({"DEFER_MERGE": 1} if defer else {}),
        "KERNEL_NAME": name,
    }


def fast_smem(defines: dict) -> int:
    """Dynamic shared memory of v5/v6's kernel: the cp.async rings (tensor-core path, FEED 0),
    reused for the merge of the warps at the end."""
    warps, group, head_dim = defines["WARPS"], defines["GROUP"], defines["HEAD_DIM"]
    merge = (2 * warps * group + warps * group * head_dim) * 4
    ring = 0 if defines.get("FEED") or "NSTAGES" not in defines else warps * defines["NSTAGES"] * 2 * 16 * (head_dim * 2 + 16)
    return max(merge, ring)


def merge_smem(warps: int, rows: int, head_dim: int, parts: int) -> int:
    """Shared memory of v6's merge in the last CTA (merge_parts in fast_common.cuh): two
    floats a row and part, padded to 16 bytes, then a float4 a warp and output vector."""
    return 4 * (-(-2 * rows * parts // 4) * 4) + 4 * warps * rows * head_dim


MERGE_THREADS = 512
"""Threads of a CTA of paged_decode_v7_merge (MERGE_THREADS in fast_common.cuh)."""
MERGE_INTS = 4
"""Ints a sequence takes in the merge kernel's list (MERGE_INTS in fast_common.cuh)."""


def deferred_merge_smem(parts: int) -> int:
    """Dynamic shared memory of paged_decode_v7_merge: a float4 a thread (the groups'
    sums), then m and l of every part of the sequence."""
    return 16 * MERGE_THREADS + 8 * parts


def merge_list(items) -> "np.ndarray":
    """The sequences of several parts in a v7 plan (token or packed items: sequence, first
    page, end page, part, parts, part base), MERGE_INTS int32 each, in batch order: the
    batch index, the first part slot, the part count, 0."""
    seqs = sorted({(it[0], it[5], it[4]) for it in items if it[4] > 1})
    arr = np.zeros((len(seqs), MERGE_INTS), dtype=np.int32)
    if seqs:
        arr[:, :3] = np.asarray(seqs, dtype=np.int64)
    return arr


def _fast_kernel(shape: Shape, split: bool, name: str, worklist: int = 0, defer: bool = False,
                 tuning: Mapping | None = None):
    defines = fast_defines(shape, split, name, worklist, defer, tuning)
    kernel = gpu.compile_module([fast_source(shape, tuning)], defines).get_function(name)
    return kernel, (defines["WARPS"] * 32,), fast_smem(defines)


def _merge_kernel(shape: Shape, name: str, worklist: int, items, max_parts: int, tuning: Mapping | None):
    """paged_decode_v7_merge, from the module of the streaming kernel compiled with
    DEFER_MERGE (a CTA a query head and sequence of several parts), with its list; None
    when no sequence has several parts."""
    merges = merge_list(items)
    if not len(merges):
        return None
    defines = fast_defines(shape, True, name, worklist, defer=True, tuning=tuning)
    kernel = gpu.compile_module([fast_source(shape, tuning)], defines).get_function("paged_decode_v7_merge")
    grid = (shape.q_heads, len(merges))
    return kernel, grid, (MERGE_THREADS,), deferred_merge_smem(max_parts), gpu.cupy().asarray(merges)


def choose_splits(shape: Shape, device, resident_blocks_per_sm: int) -> int:
    """Splits for v6: enough CTAs for one full wave, none when the batch fills the GPU.

    capacity = SMs x resident CTAs per SM; with batch x kv_heads CTAs already filling at
    least half of it, splitting only adds a merge. Otherwise split each sequence so the
    grid fills the capacity, keeping at least MIN_PAGES_PER_SPLIT pages per split.
    """
    if shape.num_splits:
        return shape.num_splits
    base = shape.batch * shape.kv_heads
    capacity = device.sm_count * max(1, resident_blocks_per_sm)
    if 2 * base > capacity:
        return 1
    longest_pages = -(-shape.max_context // shape.page_size)
    return max(1, min(capacity // base, longest_pages // MIN_PAGES_PER_SPLIT))


def _no_split_launcher(variant, shape: Shape, details: dict, name: str = "paged_decode_v6_nosplit",
                       tuning: Mapping | None = None) -> Launcher:
    """The fast kernel without splits (grid kv_heads x batch, the output written directly):
    v5's, and v6's and v7's no-split path."""
    kernel, block, smem = _fast_kernel(shape, False, name, tuning=tuning)
    grid = (shape.kv_heads, shape.batch)
    info = _launch(kernel, name, grid, block, smem)

    def run_direct(inputs, out):
        kernel(grid, block, (out, *_fast_args(inputs, shape)), shared_mem=smem)

    return Launcher(variant.id, [info], run_direct, details=details)


def _build_v5(variant, shape, device, tuning=None):
    return _no_split_launcher(variant, shape, {}, "paged_decode_v5", tuning)


def _build_v6(variant, shape, device, tuning=None):
    partial, block, smem = _fast_kernel(shape, True, "paged_decode_v6_split", tuning=tuning)
    splits = choose_splits(shape, device, gpu.blocks_per_sm(partial, block[0], smem, device))
    if splits == 1:
        return _no_split_launcher(variant, shape, {"num_splits": 1}, tuning=tuning)

    cp = gpu.cupy()
    smem = max(smem, merge_smem(block[0] // 32, shape.group, shape.head_dim, splits))  # the merging CTA's
    part_m, part_l, part_o = _split_buffers(shape, splits)
    counters = cp.zeros(shape.batch * shape.kv_heads, dtype=cp.int32)  # the kernel leaves them at 0
    grid = (shape.kv_heads, shape.batch, splits)
    infos = [_launch(partial, "paged_decode_v6_split", grid, block, smem)]

    def run_split(inputs, out):
        partial(grid, block, (part_m, part_l, part_o, counters, out, *_fast_args(inputs, shape)),
                shared_mem=smem)

    return Launcher(variant.id, infos, run_split, details={"num_splits": splits})


# -- v7: the work split by tokens, and the one a user picks ---------------------------------

V7_KERNEL = "paged_decode_v7_tokens"
V7_PACKED_KERNEL = "paged_decode_v7_packed"
WORK_ITEM_INTS = 8
"""Ints a work item takes (WORK_ITEM_INTS in fast_common.cuh): sequence, first page, end
page, part, parts, first part slot, two unused."""
MAX_GRID_Y = 65535
"""CUDA's largest grid y (v7's work items)."""
V7_EVEN_RATIO = 1.25
"""A batch whose longest sequence is at most this many times its mean is even."""

V7_CHOICES = {
    # path -> (when, why): v7's whole decision, in the order it is taken (v7_path)
    "direct": (
        "the token plan gives every sequence one part and the batch is even (longest <= "
        "V7_EVEN_RATIO x mean), no chunk given",
        "v6's own no-split kernel, unchanged: batch x kv_heads already fills the resident "
        "slots, a work list would only reorder equal CTAs (v6: 95.3 % at b64 ctx4096, 92.6 % "
        "at b32 64/8, 87.0 % at 32/32 d64 on the H200)"),
    "tokens": (
        "every other shape: small even batches, ragged fp8 / fp32 batches, or a chunk given",
        "every sequence cut into parts of at most chunk_pages pages, chunk the smallest "
        "(>= MIN_PAGES_PER_SPLIT) whose (part, KV head) CTAs fit the resident slots in "
        "the fewest whole waves; the longest parts first. An even batch gets v6's split "
        "(b4: 16 parts of 128 pages; b1: 66 of ~124); a ragged one equal work a CTA instead "
        "of v6's equal count a sequence (v6: 60.1 % on the issue's 16 lengths)"),
    "packed": (
        "a ragged batch (longest > V7_EVEN_RATIO x mean) of a 16-bit cache, no chunk given",
        "tokens on the issue's 16 lengths runs one wave of 66 parts a KV head whose largest is "
        "108 pages against a mean of 93 (the wave ends with its largest CTA); packed "
        "concatenates the sequences' pages and gives each of the slots a range of equal cost "
        "(its pages plus V7_PACK_ITEM_COST a sequence that starts in it, +-V7_PACK_SNAP "
        "pages), a CTA taking every segment of its range in turn (plan_packed), so the largest "
        "CTA is the mean. Its third round (the item loop compiled to the token kernel's code, "
        "merges after the loop) measured on the H200 in one process, fp16: 103.8 us against "
        "tokens' 105.4 (85.9 against 84.6 % of the ceiling); fp8: 62.6 against 61.1 us, so fp8 "
        "keeps tokens (its items cost twice the pages); at b1, where both plans are the same, "
        "88.0 against 88.6 %"),
}
"""v7's choices, with the reason for each. The tuning inside each path (warps, loads in
flight, TSUB) is FAST_TUNING's, the same as v5/v6's (group 1 at head_dim 64 takes 2 warps x
8 CTAs there: 99.3 % on the H200 against 87-89 % before); nothing here is chosen unmeasured."""


def _pages(ctx: int, page_size: int) -> int:
    return -(-ctx // page_size)


def _parts_of(pages: list[int], chunk: int) -> int:
    return sum(-(-p // chunk) for p in pages)


V7_ORDER = "longest"
"""The work list's order that ships: "longest" (the longest parts first); "serpentine" (the
same, every other round of sm_count / kv_heads items reversed, so that the SMs the first
wave's rounds land on breadth-first get even sums) only through a ``tuning``'s ORDER
(kernels/scripts/tune_v5.py's ORDER knob measures it before anything ships it)."""


def plan_work(context_lens, page_size: int, kv_heads: int, capacity: int, chunk_pages: int = 0,
              sm_count: int = 0, order: str | None = None) -> dict:
    """v7's work list: every sequence cut into ``-(-pages // chunk)`` parts of nearly equal
    page counts (floor(i pages / parts) boundaries: never empty, at most ``chunk`` pages).

    ``chunk`` (unless given) is the smallest of at least MIN_PAGES_PER_SPLIT pages whose
    parts x kv_heads CTAs fit ``waves`` x ``capacity`` resident slots, ``waves`` the fewest
    that hold one CTA a (sequence, KV head). Items go longest first (ties: sequence, part),
    so the last CTAs the scheduler hands out are the short ones. A sequence of several
    parts gets ``parts`` slots of the partial buffers from ``part_base`` on (a sequence of
    one part none: it writes its output directly). Pure Python.
    """
    pages = [_pages(c, page_size) for c in context_lens]
    capacity = max(1, capacity)
    waves = max(1, -(-len(pages) * kv_heads // capacity))
    slots = max(1, waves * capacity // kv_heads)  # items a KV head may have
    if chunk_pages:
        chunk = chunk_pages
    else:
        lo, hi = max(MIN_PAGES_PER_SPLIT, -(-sum(pages) // slots)), max(pages)
        if lo >= hi:
            chunk = hi
        else:  # the smallest chunk in [lo, hi] whose parts fit (the count falls as chunk grows)
            while lo < hi:
                mid = (lo + hi) // 2
                lo, hi = (lo, mid) if _parts_of(pages, mid) <= slots else (mid + 1, hi)
            chunk = lo
    items, part_base = [], 0
    for b, p in enumerate(pages):
        n = -(-p // chunk)
        base = part_base if n > 1 else 0
        for i in range(n):
            items.append((b, i * p // n, (i + 1) * p // n, i, n, base))
        if n > 1:
            part_base += n
    items.sort(key=lambda it: (-(it[2] - it[1]), it[0], it[3]))
    if (order or V7_ORDER) == "serpentine" and sm_count:
        per = max(1, round(sm_count / kv_heads))
        rounds = [items[i:i + per] for i in range(0, len(items), per)]
        items = [it for r, chunk_items in enumerate(rounds) for it in (chunk_items[::-1] if r % 2 else chunk_items)]
    waves = -(-len(items) * kv_heads // capacity)  # the waves of the plan made (a chunk given: any count)
    return {"chunk_pages": chunk, "items": items, "part_slots": part_base, "waves": waves,
            "max_parts": max(it[4] for it in items), "multi_part": sum(1 for p in pages if p > chunk)}


def work_array(items) -> "np.ndarray":
    """The work list as the kernel reads it: WORK_ITEM_INTS int32 an item."""
    arr = np.zeros((len(items), WORK_ITEM_INTS), dtype=np.int32)
    if items:
        arr[:, :6] = np.asarray(items, dtype=np.int64)
    return arr


V7_PACK_SNAP = 2
"""plan_packed: a range end within this many pages of a sequence boundary moves onto it, so
that no segment is cut off with 1-2 pages (an item costs a restart of the warps' loads, the
query and block-table staging, the warps' merge, a partial and a share of a merge: about a
page or two of streaming, as much as the ranges grow by snapping; 0: exact equal ranges)."""

V7_PACK_ITEM_COST = 3
"""plan_packed: what an item costs its CTA beyond its pages, in pages of a 16-bit cache (its
prologue: the item, the query and the block-table entries, then the first K/V loads, three
dependent round trips; its end: the warps' merge, the partial or output, the fence and the
counter; ~3-4 us against ~1 us a CTA streams a 16-bit page in): the ranges are equal in
pages plus this much a sequence that starts in them, so a CTA of several items gets fewer
pages (0: equal pages, the second round's plan). The time is latency, not bytes: an fp8
page streams in half the time, so fp8 counts twice the pages, fp32 half (packed_item_cost)."""


def packed_item_cost(shape: Shape, cost: int = V7_PACK_ITEM_COST) -> int:
    """``cost`` (V7_PACK_ITEM_COST, pages of a 16-bit cache) in pages of the shape's cache
    (2 bytes an element: as it is)."""
    return cost * 2 // shape.elem_bytes

V7_MERGE_KERNEL_PARTS = 32
"""v7_merge: a plan whose most-cut sequence has at least this many parts merges in
paged_decode_v7_merge."""


def v7_merge(plan: dict, tuning: Mapping | None = None) -> str:
    """Where v7 merges the parts of the plan ``plan`` (token or packed): in its own kernel
    ("kernel": the CTAs only write partials; paged_decode_v7_merge, a CTA a query head and
    sequence, runs after them in the same stream) when a sequence is cut into
    V7_MERGE_KERNEL_PARTS parts or more, fused otherwise ("fused": the last CTA of its parts
    to finish, after a fence and a counter: one kernel). ``tuning``'s MERGE forces either
    (kernels/scripts/tune_v5.py's MERGE knob; kernels/NOTES.md, item 95).

    The fused merge puts the last CTA's fence, count, second fence and a merge of every
    part by one CTA at the end of the launch, a cost that grows with the parts (b1: the
    merging CTAs end 6-7 us after their streaming); the merge kernel costs a second launch
    and ~2-3 us whatever the parts, and every merge then waits for the end of the wave
    (fused merges of sequences that finish early run inside it). On the H200 (two calls,
    commits ce9ffe6 and ff67c30, one process each, fused against kernel, % of the read
    ceiling): b1 ctx131072 (66 parts) fp16 88.1-88.7 against 89.1-90.4 %, fp8 75.3-75.9
    against 78.1-78.3; b4 ctx32768 (16 parts) fp16 89.6-89.7 against 89.3-90.0, fp8
    77.4-77.5 against 77.6-78.4 (no gain); the issue's ragged batch (12 parts at most) fp16
    85.8-86.1 against 84.0-86.0, fp8 73.9-74.0 against 70.0-71.7; b32 ctx8192 with groups
    of 8 (2 parts) 92.6-93.3 against 87.3-91.0."""
    if _host(tuning, "MERGE"):
        return _host(tuning, "MERGE")
    return "kernel" if plan["max_parts"] >= V7_MERGE_KERNEL_PARTS else "fused"

def v7_path(shape: Shape, plan: dict, tuning: Mapping | None = None) -> str:
    """Which of V7_CHOICES v7 takes at ``shape`` with the token plan ``plan``; ``tuning``'s
    PATH forces one (kernels/scripts/tune_v5.py's PATH knob, for the A/B of packed against
    tokens on the same shape)."""
    lens = shape.context_lens
    even = max(lens) <= V7_EVEN_RATIO * (sum(lens) / len(lens))
    if _host(tuning, "PATH"):
        return _host(tuning, "PATH")
    if not shape.chunk_pages and plan["multi_part"] == 0 and even:
        return "direct"
    if not shape.chunk_pages and not even and shape.elem_bytes == 2:
        return "packed"
    return "tokens"


def plan_packed(context_lens, page_size: int, kv_heads: int, capacity: int, snap: int | None = None,
                item_cost: int | None = None) -> dict:
    """v7's packed work list: the sequences' pages one after another (every KV head alike),
    cut into ``slots`` ranges of equal cost (floor(k total / slots) cuts: +-1 page), the
    cost of a range its pages plus ``item_cost`` (V7_PACK_ITEM_COST) for every sequence
    but the first that starts in it (one sequence, b1: the token plan's parts), ``slots`` = one wave of ``capacity`` resident CTAs over the KV heads,
    no more than MIN_PAGES_PER_SPLIT pages a range allow. A cut within ``snap``
    (V7_PACK_SNAP) pages of a sequence boundary moves onto it (never past the neighbouring
    cuts). A range's segments
    are items as plan_work's (sequence, first page, end page, part, parts, part_base): a
    sequence wholly inside a range is one part (written directly, no partial), one cut by
    range ends has a part per range it touches, merged by the last CTA to finish one.
    A CTA takes its last segment first, then the others in order: the head of a sequence
    that goes on into the next CTA is done early, so a sequence of two parts is merged
    mid-run rather than at the end. Pure Python."""
    pages = [_pages(c, page_size) for c in context_lens]
    total = sum(pages)
    snap = V7_PACK_SNAP if snap is None else snap
    cost = V7_PACK_ITEM_COST if item_cost is None else item_cost
    slots = max(1, min(max(1, capacity) // kv_heads, total // MIN_PAGES_PER_SPLIT))
    starts = [0]
    for p in pages:
        starts.append(starts[-1] + p)
    # equal cuts of the cost axis, where every sequence but the first (which starts the
    # first range, as a continuation starts the others) has `cost` before its pages; a cut
    # within that cost falls on the sequence's start; never two cuts on one page
    first = [starts[i] + cost * i for i in range(len(pages))]  # a sequence's first page there
    ideal, s = [0], 0
    for k in range(1, slots):
        v = k * (total + cost * (len(pages) - 1)) // slots
        while s + 1 < len(pages) and first[s + 1] - cost <= v:
            s += 1
        page = starts[s] + max(0, v - first[s])
        ideal.append(min(max(page, ideal[-1] + 1), total - (slots - k)))
    ideal.append(total)
    cuts = [0]
    for k in range(1, slots):
        c = ideal[k]
        near = min(starts, key=lambda x: abs(x - c))
        if 0 < abs(near - c) <= snap and cuts[-1] < near < ideal[k + 1]:
            c = near
        cuts.append(c)
    cuts.append(total)
    segments = []  # per CTA: (sequence, first page, end page) in stream order
    b = 0
    for k in range(slots):
        lo, hi, seg = cuts[k], cuts[k + 1], []
        while b < len(pages) and starts[b + 1] <= lo:
            b += 1
        s = b
        while s < len(pages) and starts[s] < hi:
            p0, p1 = max(lo, starts[s]) - starts[s], min(hi, starts[s + 1]) - starts[s]
            if p1 > p0:
                seg.append((s, p0, p1))
            s += 1
        segments.append(seg)
    parts_of: dict = {}
    for seg in segments:
        for s, p0, _ in seg:
            parts_of.setdefault(s, []).append(p0)
    base_of, part_base = {}, 0
    for s in sorted(parts_of):
        if len(parts_of[s]) > 1:
            base_of[s], part_base = part_base, part_base + len(parts_of[s])
    items, ranges = [], [0]
    for seg in segments:
        for s, p0, p1 in seg[-1:] + seg[:-1]:
            n = len(parts_of[s])
            items.append((s, p0, p1, sorted(parts_of[s]).index(p0), n, base_of.get(s, 0)))
        ranges.append(len(items))
    sizes = [hi - lo for lo, hi in zip(cuts, cuts[1:])]
    return {"items": items, "ranges": ranges, "ctas": slots, "part_slots": part_base,
            "waves": -(-slots * kv_heads // max(1, capacity)), "max_parts": max(it[4] for it in items),
            "multi_part": len(base_of), "pages_per_cta": max(sizes), "min_pages_per_cta": min(sizes)}


def packed_array(plan: dict) -> "np.ndarray":
    """The packed work list as the kernel reads it (WORKLIST 2), WORK_ITEM_INTS int32 an
    item: item y is CTA y's first (the CTA finds it at once, as the token kernel does), the
    CTAs' further items follow in CTA order, and int 6 of each is the index of its CTA's
    next item (-1 after the last)."""
    ranges, ctas = plan["ranges"], plan["ctas"]
    order = [ranges[y] for y in range(ctas)] + [i for y in range(ctas) for i in range(ranges[y] + 1, ranges[y + 1])]
    at = {i: k for k, i in enumerate(order)}
    arr = work_array([plan["items"][i] for i in order])
    for y in range(ctas):
        for i in range(ranges[y], ranges[y + 1]):
            arr[at[i], 6] = at[i + 1] if i + 1 < ranges[y + 1] else -1
    return arr.reshape(-1)


def _build_v7(variant, shape, device, tuning=None):
    kernel, block, smem = _fast_kernel(shape, True, V7_KERNEL, worklist=True, tuning=tuning)
    resident = gpu.blocks_per_sm(kernel, block[0], smem, device)
    order = _host(tuning, "ORDER")
    plan = plan_work(shape.context_lens, shape.page_size, shape.kv_heads, device.sm_count * max(1, resident),
                     shape.chunk_pages, device.sm_count, order=order)
    path = v7_path(shape, plan, tuning)
    details = {"path": path, "waves": plan["waves"], "resident_ctas_per_sm": resident}  # why: V7_CHOICES
    if order != V7_ORDER:
        details["order"] = order
    if path == "direct":
        return _no_split_launcher(variant, shape, {**details, "num_splits": 1, "work_items": 0}, tuning=tuning)
    if path == "packed":
        return _packed_launcher(variant, shape, device, details, tuning)

    cp = gpu.cupy()
    defer, kernel, block, smem, need = _v7_merge_choice(shape, plan, V7_KERNEL, 1, (kernel, block, smem), tuning)
    if need > device.smem_per_block_optin:
        raise ShapeError(f"v7 with chunks of {plan['chunk_pages']} pages merges {plan['max_parts']} parts of a "
                         f"sequence: {need} bytes of shared memory a CTA, beyond this GPU's "
                         f"{device.smem_per_block_optin}; give a larger chunk")
    items = plan["items"]
    if len(items) > MAX_GRID_Y:
        raise ShapeError(f"v7 with chunks of {plan['chunk_pages']} pages makes {len(items)} work items, beyond "
                         f"the grid's {MAX_GRID_Y} in y; give a larger chunk")
    work = cp.asarray(work_array(items))
    rows = max(1, plan["part_slots"] * shape.q_heads)
    part_m, part_l = cp.empty(rows, dtype=cp.float32), cp.empty(rows, dtype=cp.float32)
    part_o = cp.empty(rows * shape.head_dim, dtype=cp.float32)
    counters = cp.zeros(shape.batch * shape.kv_heads, dtype=cp.int32)  # the kernel leaves them at 0
    grid = (shape.kv_heads, len(items))
    infos = [_launch(kernel, V7_KERNEL, grid, block, smem)]
    merge = _merge_kernel(shape, V7_KERNEL, 1, items, plan["max_parts"], tuning) if defer else None
    run_merge = _merge_step(merge, infos, part_m, part_l, part_o, shape)

    def run_tokens(inputs, out):
        kernel(grid, block, (part_m, part_l, part_o, counters, work, out, *_fast_args(inputs, shape)),
               shared_mem=smem)
        run_merge(out)

    return Launcher(variant.id, infos, run_tokens, details={
        **details, "num_splits": plan["max_parts"], "chunk_pages": plan["chunk_pages"], "work_items": len(items),
        "multi_part_sequences": plan["multi_part"], "merge": "kernel" if defer else "fused"})


def _v7_merge_choice(shape: Shape, plan: dict, name: str, worklist: int, fused, tuning: Mapping | None):
    """v7_merge's choice for ``plan`` and the streaming kernel it takes: (defer, kernel,
    block, smem, need). ``fused`` is the kernel with its merge, (kernel, block, smem), which
    planned the work (its occupancy); deferred, the same kernel without its merge (fewer
    registers: the same resident CTAs or more). ``need``: the larger CTA's shared memory
    (the merging CTA's, or the merge kernel's)."""
    kernel, block, smem = fused
    if v7_merge(plan, tuning) == "kernel":
        kernel, block, smem = _fast_kernel(shape, True, name, worklist=worklist, defer=True, tuning=tuning)
        return True, kernel, block, smem, max(smem, deferred_merge_smem(plan["max_parts"]))
    smem = max(smem, merge_smem(block[0] // 32, shape.group, shape.head_dim, plan["max_parts"]))
    return False, kernel, block, smem, smem


def _merge_step(merge, infos: list, part_m, part_l, part_o, shape: Shape):
    """What run() calls after v7's streaming kernel: paged_decode_v7_merge over the
    sequences of several parts (v7_merge's "kernel"; its launch appended to ``infos``), or
    nothing (fused merges, or no sequence of several parts)."""
    if merge is None:
        return lambda out: None
    kernel, grid, block, smem, merges = merge
    infos.append(_launch(kernel, "paged_decode_v7_merge", grid, block, smem))

    def run_merge(out):
        kernel(grid, block, (out, part_m, part_l, part_o, merges, np.int32(shape.q_heads)), shared_mem=smem)

    return run_merge


def _packed_launcher(variant, shape: Shape, device, details: dict, tuning: Mapping | None) -> Launcher:
    """v7's packed path: grid (kv_heads, ctas), CTA y the items of its range in turn."""
    kernel, block, smem = _fast_kernel(shape, True, V7_PACKED_KERNEL, worklist=2, tuning=tuning)
    resident = gpu.blocks_per_sm(kernel, block[0], smem, device)
    snap, cost = _host(tuning, "SNAP"), _host(tuning, "COST")
    plan = plan_packed(shape.context_lens, shape.page_size, shape.kv_heads, device.sm_count * max(1, resident),
                       snap=snap, item_cost=packed_item_cost(shape, cost))
    defer, kernel, block, smem, need = _v7_merge_choice(shape, plan, V7_PACKED_KERNEL, 2, (kernel, block, smem),
                                                        tuning)
    if need > device.smem_per_block_optin:
        raise ShapeError(f"v7 packed merges {plan['max_parts']} parts of a sequence: {need} bytes of shared "
                         f"memory a CTA, beyond this GPU's {device.smem_per_block_optin}")
    if plan["ctas"] > MAX_GRID_Y:
        raise ShapeError(f"v7 packed makes {plan['ctas']} CTAs a KV head, beyond the grid's {MAX_GRID_Y} in y")
    cp = gpu.cupy()
    work = cp.asarray(packed_array(plan))
    rows = max(1, plan["part_slots"] * shape.q_heads)
    part_m, part_l = cp.empty(rows, dtype=cp.float32), cp.empty(rows, dtype=cp.float32)
    part_o = cp.empty(rows * shape.head_dim, dtype=cp.float32)
    counters = cp.zeros(shape.batch * shape.kv_heads, dtype=cp.int32)  # the kernel leaves them at 0
    grid = (shape.kv_heads, plan["ctas"])
    infos = [_launch(kernel, V7_PACKED_KERNEL, grid, block, smem)]
    merge = _merge_kernel(shape, V7_PACKED_KERNEL, 2, plan["items"], plan["max_parts"], tuning) if defer else None
    run_merge = _merge_step(merge, infos, part_m, part_l, part_o, shape)

    def run_packed(inputs, out):
        kernel(grid, block, (part_m, part_l, part_o, counters, work, out, *_fast_args(inputs, shape)),
               shared_mem=smem)
        run_merge(out)

    return Launcher(variant.id, infos, run_packed, details={
        "merge": "kernel" if defer else "fused",
        **details, "waves": plan["waves"], "resident_ctas_per_sm": resident, "num_splits": plan["max_parts"],
        "ctas": plan["ctas"], "work_items": len(plan["items"]), "pages_per_cta": plan["pages_per_cta"],
        "multi_part_sequences": plan["multi_part"], **({"snap": snap} if snap != V7_PACK_SNAP else {}),
        **({"item_cost": cost} if cost != V7_PACK_ITEM_COST else {})})


_BUILDERS = {
    "baseline": _build_baseline,
    "v1": _build_v1,
    "v2": _build_v2,
    "v3": _build_v3,
    "v4": _build_v4,
    "handbook": _build_handbook,
    "v5": _build_v5,
    "v6": _build_v6,
    "v7": _build_v7,
}


FAST_VARIANTS = ("v5", "v6", "v7")
"""The variants a ``tuning`` applies to (v5_fast.cu / v5_mma.cu)."""


def build(variant, shape: Shape, device, tuning: Mapping | None = None) -> Launcher:
    """The launcher of ``variant`` at ``shape``: the shipped build, or for v5/v6/v7 the one
    ``tuning`` makes (HOST_KNOBS says how), with its launch choices in words
    (``words.for_launcher``: what the run records and the reports say)."""
    if variant.id in FAST_VARIANTS:
        launcher = _BUILDERS[variant.id](variant, shape, device, tuning)
    elif tuning:
        raise ValueError(f"paged_decode {variant.id} has no tuning; {', '.join(FAST_VARIANTS)} have")
    else:
        launcher = _BUILDERS[variant.id](variant, shape, device)
    return words.for_launcher(launcher, device.sm_count)
