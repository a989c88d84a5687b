"""The flash_fwd variants: four kernels written here and PyTorch's SDPA backends as peers.

mma128 is one source built with -D values (``MMA128_KNOBS``): the shipped ones per head_dim
are ``MMA128_4X32``; ``kernels/scripts/tune_flash.py --knobs "STAGES=3,..."`` benches others in one
process without editing code, through ``tuned`` (the variant with its own -D values; wgmma2's
alike).

Nothing here needs a GPU. The CUDA variants are declared in the family interface's plain
form (a kernel, its grid, block, shared memory, -D values and arguments); the PyTorch
peers (``sdpa.py``) are listed only where PyTorch is installed, found without importing
it.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
from collections.abc import Mapping
from types import MappingProxyType

from paprof.errors import ShapeError
from paprof_kernels.flash_fwd.problem import TILE_ROWS, Shape
from paprof.family import CallableVariant, CudaVariant

FAMILY = "flash_fwd"

HANDBOOK_KEYS = 32
"""Keys a step of the handbook kernel (BC in handbook.cu)."""
MMA_KEYS = 64
"""Keys a step of the mma kernel (BC in mma.cu)."""
MMA_THREADS = 128
MMA128_ROWS = 128
"""Queries a CTA of the mma128 kernel (BR in mma128.cu, whatever the warp layout)."""
MMA128_WARPS = 4
"""Warps a CTA of mma128 (WARP_M 2: 32 query rows each). The first round's 8 x 16 layout
(8 warps of 16 rows, PIPELINE 1: the next tile's Q K^T beside the softmax) lost (kernels/NOTES.md
items 50-54) and left the code after e6f8bcd."""
MMA128_4X32 = MappingProxyType({
    # 4 warps of two m16 tiles (32 rows): each K/V fragment feeds two mma; 2 CTAs a SM.
    # d128: Q re-read from sQ (its 64 registers would not fit beside O's 128), S taken 32
    # keys at a time (64 spills), 2 buffers (102 KiB: two CTAs fit); d64: Q in registers,
    # 64 keys, 3 buffers (72 KiB)
    128: MappingProxyType({"STAGES": 2, "BC": 64, "KSUB": 32, "QREG": 0, "QK_UNROLL": 2, "MIN_BLOCKS": 2}),
    64: MappingProxyType({"STAGES": 3, "BC": 64, "KSUB": 64, "QREG": 1, "MIN_BLOCKS": 2}),
})
"""mma128's second layout, the shipped one (kernels/NOTES.md, items 50-54); mma128.cu compiled
with no -D values is the head_dim 128 build in bf16."""
MMA128_KNOBS = ("STAGES", "BC", "KSUB", "QREG", "QK_UNROLL", "MIN_BLOCKS")


def parse_knobs(text: str, vid: str = "mma128") -> dict:
    """``"STAGES=3,BC=32"`` as -D values for mma128 (``vid="wgmma2"``: ``"OVERLAP=0,PINGPONG=0"``
    over WGMMA2_SHIPPED); anything else raises ValueError with one line."""
    names = WGMMA2_KNOBS if vid == "wgmma2" else MMA128_KNOBS
    knobs = {}
    for item in filter(None, text.split(",")):
        name, eq, value = item.partition("=")
        if not eq or name.strip() not in names or not value.strip().isdigit():
            raise ValueError(f"{vid} knobs: expected NAME=INT with NAME in {', '.join(names)}; got {item!r}")
        knobs[name.strip()] = int(value)
    return knobs
WGMMA2_SHIPPED = MappingProxyType({"BC": 128, "QSMEM": 0, "OVERLAP": 1, "PINGPONG": 1, "STAGES": 3,
                                   "SETMAXNREG": 1, "REG_CONSUMER": 232, "REG_PRODUCER": 40, "TMA": 1,
                                   "FAST_MAX": 1, "DESC_ADD": 1})
"""wgmma2's -D values (wgmma2.cu's header; kernels/NOTES.md items 59-64, 77-79, 85): 128 keys a step,
Q's A fragments in registers, S(j+1) beside the softmax, the two consumer warpgroups
ping-ponged, a 3-stage K/V ring filled by a producer warpgroup with TMA (cp.async.bulk.tensor,
tensor maps built per call, ``wgmma2_args``) through mbarriers, setmaxnreg 232 / 40, and the
consumers' instruction diet (the softmax's maxima unscaled, descriptors by adds, O rescaled
between the issues of S(j + 1) and P(j) V(j)); wgmma2.cu compiled with no -D values is this
build in bf16. Measured on the H200 in one process (bf16 b4 h32
s8192 d128): 635.2 TFLOP/s against 590.0 for the build before the diet (Q from shared memory)
and cuDNN's 623.8; earlier, 584.7 against 576.6 with TMA at 2 stages and 536.0 with the
cp.async producer (TMA 0, STAGES 2, the first build)."""
# The experiments that lost (the persistent grid, WAIT_HINT, PRODUCER_FENCE, the build before
# the diet with RESCALE_EARLY 0) left the code after e6f8bcd (git show e6f8bcd:kernels/paprof_kernels/flash_fwd/wgmma2.cu); kernels/NOTES.md
# items 79, 82-85 give what was measured against them.
WGMMA2_KNOBS = tuple(WGMMA2_SHIPPED)
WGMMA2_THREADS = 384
WGMMA_ROWS = MMA128_ROWS
"""Queries a CTA of the wgmma kernel (2 warpgroups of 64 rows: BR in wgmma.cu)."""
WGMMA_KEYS = 64
"""Keys a step of the wgmma kernel (BC in wgmma.cu)."""
WGMMA_THREADS = 256
WGMMA_ARCH = "sm_90a"
"""wgmma.mma_async exists only for the ``a`` target of compute capability 9.0."""
MAX_GRID_Y = 65535
_DTYPE_CODE = {"fp16": 1, "bf16": 2}


def tiles(p: Shape) -> int:
    return -(-p.seq_q // TILE_ROWS)


def grid(p: Shape) -> tuple[int, int]:
    """(query tiles, batch x q_heads): the same for both kernels."""
    return tiles(p), p.batch * p.q_heads


def mma128_grid(p: Shape) -> tuple[int, int]:
    """(ceil(seq_q / 128) query tiles, batch x q_heads)."""
    return -(-p.seq_q // MMA128_ROWS), p.batch * p.q_heads


def kernel_args(p: Shape, inputs: dict, out) -> tuple:
    """(q, k, v, o, seq_q, seq_k, q_heads, kv_heads, scale * log2(e), causal)."""
    import numpy as np  # here, not at import: 'paprof list' needs no numpy

    return (inputs["q"], inputs["k"], inputs["v"], out, np.int32(p.seq_q), np.int32(p.keys),
            np.int32(p.q_heads), np.int32(p.kv), np.float32(p.scale * np.log2(np.e)),
            np.int32(p.causal))


def handbook_smem(p: Shape) -> int:
    """sQ (64 rows padded by 4 floats), sK and sV (32 rows), sP (32 x 64), in fp32."""
    d = p.head_dim
    return 4 * (TILE_ROWS * (d + 4) + 2 * HANDBOOK_KEYS * d + HANDBOOK_KEYS * TILE_ROWS)


def mma_smem(p: Shape) -> int:
    """sQ (64 rows), sK and sV (two 64-row buffers each), 16-bit elements."""
    return 2 * p.head_dim * (TILE_ROWS + 4 * MMA_KEYS)


def mma_defines(p: Shape) -> dict:
    # 2 CTAs a SM at head_dim 128 (80 KiB of shared memory, 252 registers); 3 at 64
    # (40 KiB, 164 registers; the cap is 168)
    return {"HEAD_DIM": p.head_dim, "DTYPE": _DTYPE_CODE.get(p.dtype, 2),
            "MIN_BLOCKS": 3 if p.head_dim == 64 else 2}


def mma128_knobs(p: Shape, tuning: Mapping | None = None) -> dict:
    """The -D values mma128 is built with for ``p``: the shipped ones (per head_dim), those
    ``tuning`` names replaced (``tuned``)."""
    return {**MMA128_4X32[p.head_dim], **(tuning or {})}


def mma128_block(p: Shape) -> tuple[int]:
    return (32 * MMA128_WARPS,)


def mma128_smem(p: Shape, tuning: Mapping | None = None) -> int:
    """sQ (128 rows), sK and sV (STAGES buffers of BC rows each), rows padded by 8 16-bit elements."""
    k = mma128_knobs(p, tuning)
    return 2 * (p.head_dim + 8) * (MMA128_ROWS + 2 * k["STAGES"] * k["BC"])


def mma128_defines(p: Shape, tuning: Mapping | None = None) -> dict:
    # ptxas (nvcc 13.0, sm_90a), no spills: 4 x 32 at d128 254 registers, 102 KiB (2 CTAs
    # a SM); at d64 246, 72 KiB
    return {"HEAD_DIM": p.head_dim, "DTYPE": _DTYPE_CODE.get(p.dtype, 2), **mma128_knobs(p, tuning)}


wgmma_grid = mma128_grid
"""(ceil(seq_q / 128) query tiles, batch x q_heads): wgmma's 128 query rows (WGMMA_ROWS)."""


def wgmma_smem(p: Shape) -> int:
    """sQ (128 rows), sK and sV (two 64-row buffers each), 16-bit elements, and 1 KiB of
    slack to start the tiles on the 128-byte swizzle's 1024-byte period."""
    return 2 * p.head_dim * (WGMMA_ROWS + 4 * WGMMA_KEYS) + 1024


def wgmma_defines(p: Shape) -> dict:
    # head_dim 128: one CTA (8 warps) a SM, up to 255 registers; 64: two (49 KiB of shared
    # memory each, registers capped at 128)
    return {"HEAD_DIM": p.head_dim, "DTYPE": _DTYPE_CODE.get(p.dtype, 2),
            "MIN_BLOCKS": 2 if p.head_dim == 64 else 1}


def wgmma2_knobs(p: Shape, tuning: Mapping | None = None) -> dict:
    """The -D values of wgmma2's knobs for ``p``: the shipped ones, those ``tuning`` names
    replaced (``tuned``)."""
    return {**WGMMA2_SHIPPED, **(tuning or {})}


WGMMA2_MAP_COLS = 64
"""Columns a K / V tensor-map copy takes (64 x 2 bytes: one 128-byte swizzle atom row)."""
_TENSOR_MAPS = None


def wgmma2_maps(p: Shape, tuning: Mapping | None = None) -> tuple:
    """The K and V tensor maps' parameters (TMA 1): [batch * kv_heads][seq_k][head_dim] as a
    3-D map, a copy BC rows x 64 columns of one head into one swizzle atom of a tile."""
    from paprof_kernels import tensormap  # noqa: PLC0415 (no GPU needed)

    m = tensormap.rows_map(p.dtype, p.batch * p.kv, p.keys, p.head_dim, wgmma2_knobs(p, tuning)["BC"], WGMMA2_MAP_COLS)
    return m, m


def wgmma2_args(p: Shape, inputs: dict, out, tuning: Mapping | None = None) -> tuple:
    """kernel_args, and with TMA 1 the global addresses of K's and V's tensor maps (device
    buffers of 128 bytes, encoded once for given arrays: ``tensormap.DeviceMaps``)."""
    args = kernel_args(p, inputs, out)
    if not wgmma2_knobs(p, tuning).get("TMA"):
        return args
    global _TENSOR_MAPS
    from paprof_kernels import tensormap  # noqa: PLC0415

    if _TENSOR_MAPS is None:
        _TENSOR_MAPS = tensormap.DeviceMaps()
    km, vm = wgmma2_maps(p, tuning)
    return (*args, _TENSOR_MAPS.get(km, inputs["k"].data.ptr), _TENSOR_MAPS.get(vm, inputs["v"].data.ptr))


def wgmma2_smem(p: Shape, tuning: Mapping | None = None) -> int:
    """sQ (128 rows), sK and sV (STAGES buffers of BC rows each), 16-bit elements, 1 KiB of
    alignment slack and the 4 x STAGES mbarriers (8 bytes each)."""
    k = wgmma2_knobs(p, tuning)
    return 2 * p.head_dim * (WGMMA_ROWS + 2 * k["STAGES"] * k["BC"]) + 1024 + 32 * k["STAGES"]


def wgmma2_defines(p: Shape, tuning: Mapping | None = None) -> dict:
    # ptxas (nvcc 13.0, sm_90a), shipped knobs: 168 registers reported (the 384-thread
    # budget), setmaxnreg moves the consumers to 232 and the producer to 40; no spills
    return {"HEAD_DIM": p.head_dim, "DTYPE": _DTYPE_CODE.get(p.dtype, 2), **wgmma2_knobs(p, tuning)}


def _grid_fits(p: Shape, vid: str) -> None:
    if p.batch * p.q_heads > MAX_GRID_Y:
        raise ShapeError(f"{vid} runs a grid row per (batch, head): batch x q_heads must be at "
                         f"most {MAX_GRID_Y}, got {p.batch * p.q_heads}")


def check_handbook(p: Shape) -> None:
    if p.dtype != "fp32":
        raise ShapeError(f"handbook is the fp32 teaching kernel (dtype={p.dtype}); mma and the "
                         "SDPA peers take fp16/bf16")
    _grid_fits(p, "handbook")


def _check_tensor_cores(vid: str):
    def check(p: Shape) -> None:
        if p.dtype not in _DTYPE_CODE:
            raise ShapeError(f"{vid} runs on the tensor cores: dtype must be fp16 or bf16, got "
                             f"{p.dtype} (handbook takes fp32)")
        _grid_fits(p, vid)

    return check


check_mma = _check_tensor_cores("mma")
check_mma128 = _check_tensor_cores("mma128")


WGMMA_DIMS = (64, 128)
"""head_dim values wgmma takes. At 64 the first build was wrong on the H200 past one key
tile: ptxas gave Q's A fragments, loaded once before the key loop, the registers of P's and
of the loop's address arithmetic (kernels/NOTES.md, items 64 and 76); wgmma.cu's QRELOAD (on at
64) reads them from shared memory again each step."""


def check_wgmma(p: Shape) -> None:
    _check_tensor_cores("wgmma")(p)
    if p.head_dim not in WGMMA_DIMS:
        raise ShapeError(f"wgmma takes head_dim {' or '.join(map(str, WGMMA_DIMS))}, got {p.head_dim}")


def check_wgmma2(p: Shape, tuning: Mapping | None = None) -> None:
    _check_tensor_cores("wgmma2")(p)
    if p.head_dim != 128:
        raise ShapeError(f"wgmma2 is written for head_dim 128, got {p.head_dim} (mma128 takes 64)")
    knobs = wgmma2_knobs(p, tuning)
    if not knobs["OVERLAP"] and not knobs["QSMEM"]:
        raise ShapeError("wgmma2 OVERLAP=0 needs QSMEM=1: in that loop ptxas gives Q's register "
                         "fragments to other values (wrong on the H200; kernels/NOTES.md item 86)")


_TUNED_HOOKS = {
    # variant id -> the fields of its CudaVariant its -D knobs decide (``tuned``)
    "mma128": {"defines": mma128_defines, "shared_mem": mma128_smem},
    "wgmma2": {"defines": wgmma2_defines, "shared_mem": wgmma2_smem, "args": wgmma2_args, "accepts": check_wgmma2},
}


def tuned(variant: CudaVariant, tuning: Mapping) -> CudaVariant:
    """``variant`` (mma128 or wgmma2, as the family holds it) built with the -D values
    ``tuning`` names (``parse_knobs``) in place of the shipped ones, its shared memory, tensor
    maps and checks following them: what kernels/scripts/tune_flash.py benches and the tests
    build; the family's own variants stay the shipped ones."""
    if variant.id not in _TUNED_HOOKS:
        raise ValueError(f"flash_fwd {variant.id} has no tuning; {', '.join(_TUNED_HOOKS)} have")
    tuning = MappingProxyType(dict(tuning))
    return dataclasses.replace(variant, **{name: functools.partial(fn, tuning=tuning)
                                           for name, fn in _TUNED_HOOKS[variant.id].items()})


SDPA = {
    # variant id -> (backend, dtypes it takes, takes GQA)
    "sdpa_flash": ("flash", ("fp16", "bf16"), True),
    "sdpa_cudnn": ("cudnn", ("fp16", "bf16"), False),
    "sdpa_efficient": ("efficient", ("fp32", "fp16", "bf16"), False),
}
"""The PyTorch peers. GQA goes through ``enable_gqa``, which only the flash backend takes
(the others would need K/V repeated, a copy the kernels here do not make)."""


def _sdpa_check(vid: str):
    backend, dtypes, gqa = SDPA[vid]

    def check(p: Shape) -> None:
        if p.dtype not in dtypes:
            raise ShapeError(f"{vid}: PyTorch's {backend} backend takes {'/'.join(dtypes)}, not {p.dtype}")
        if p.kv != p.q_heads and not gqa:
            raise ShapeError(f"{vid}: only the flash backend takes GQA (enable_gqa); "
                             f"q_heads {p.q_heads} != kv_heads {p.kv}")
        if p.causal and p.keys != p.seq_q:
            raise ShapeError(f"{vid}: PyTorch's is_causal is top-left aligned, this family's mask "
                             f"bottom-right; they agree only for seq_k == seq_q (got {p.seq_q}, {p.keys})")

    return check


def torch_present() -> bool:
    """PyTorch installed (looked up, not imported)."""
    try:
        return importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):
        return False


def _cuda_variants() -> list:
    return [
        CudaVariant(
            id="handbook",
            idea="the sources' teaching kernel: a CTA of 64 threads owns 64 queries (a thread a row), "
                 "32 keys a step through shared memory, online softmax in fp32 on CUDA cores, causal "
                 "steps above the diagonal skipped",
            sources=("handbook.cu",), kernel="flash_fwd_handbook",
            grid=grid, block=(TILE_ROWS,), shared_mem=handbook_smem,
            defines=lambda p: {"HEAD_DIM": p.head_dim}, args=kernel_args,
            accepts=check_handbook,
            launch="grid (ceil(seq_q/64), batch x q_heads) x 64 threads, 74 KiB shared (head_dim 128)",
        ),
        CudaVariant(
            id="mma",
            idea="tensor cores (mma.sync m16n8k16, fp32 accumulate): 4 warps of 16 query rows, Q, S, "
                 "P and O in registers, online softmax on the fragments, 64-key K/V tiles "
                 "double-buffered by cp.async, ldmatrix from XOR-swizzled rows; causal tiles "
                 "skipped, the diagonal masked",
            sources=("mma.cu",), kernel="flash_fwd_mma",
            grid=grid, block=(MMA_THREADS,), shared_mem=mma_smem, defines=mma_defines,
            args=kernel_args, accepts=check_mma,
            launch="grid (ceil(seq_q/64), batch x q_heads) x 128 threads, 80 KiB shared (head_dim 128)",
        ),
        CudaVariant(
            id="mma128",
            idea="mma with a 128-query tile shared by 4 warps of 32 rows (two m16 tiles: each K and "
                 "V fragment read by ldmatrix feeds two mma), 2 CTAs a SM; Q re-read from shared "
                 "memory at d128, S 32 keys at a time; a cp.async K/V ring with one barrier a "
                 "step, padded rows (ldmatrix addresses fixed offsets), the mask only on diagonal "
                 "and partial tiles, exp2 of one FFMA a score",
            sources=("mma128.cu",), kernel="flash_fwd_mma128",
            grid=mma128_grid, block=mma128_block, shared_mem=mma128_smem,
            defines=mma128_defines, args=kernel_args, accepts=check_mma128,
            launch="grid (ceil(seq_q/128), batch x q_heads) x 128 threads, 102 KiB shared (head_dim 128)",
        ),
        CudaVariant(
            id="wgmma",
            idea="Hopper's warpgroup MMA (sm_90a): 2 warpgroups x 64 query rows, S = Q K^T and "
                 "O += P V by wgmma.mma_async with Q and P as register fragments and K, V read from "
                 "shared memory through matrix descriptors (128-byte swizzle; V through the "
                 "descriptor's transpose); online softmax on the accumulator fragments; 64-key K/V "
                 "tiles double-buffered by cp.async, fenced into the async proxy. Not yet: TMA, "
                 "warp specialisation (producer warps, ping-pong), a GEMM overlapped with its own "
                 "warpgroup's softmax",
            sources=("wgmma.cu",), kernel="flash_fwd_wgmma",
            grid=wgmma_grid, block=(WGMMA_THREADS,), shared_mem=wgmma_smem, defines=wgmma_defines,
            args=kernel_args, accepts=check_wgmma, arch=WGMMA_ARCH,
            launch="grid (ceil(seq_q/128), batch x q_heads) x 256 threads, 97 KiB shared (head_dim 128); "
                   "sm_90 (Hopper) only",
        ),
        CudaVariant(
            id="wgmma2",
            idea="wgmma with FlashAttention-3's scheduling: 128 keys a step (m64n128k16 for S and P V), "
                 "Q's A fragments in registers, the next tile's S = Q K^T issued with this tile's "
                 "P V and softmaxed under it (wait_group 1), O rescaled between the two issues, the "
                 "two consumer warpgroups ping-ponged by named barriers, K/V loaded by a producer "
                 "warpgroup with TMA (tensor maps built per call) into a 3-stage ring of full/empty "
                 "mbarriers (no __syncthreads), setmaxnreg 232 / 40, a lean softmax (maxima unscaled, "
                 "descriptors by adds); each a -D knob (TMA=0: the cp.async producer; QSMEM=1: Q read by "
                 "wgmma from shared memory)",
            sources=("wgmma2.cu",), kernel="flash_fwd_wgmma2",
            grid=wgmma_grid, block=(WGMMA2_THREADS,), shared_mem=wgmma2_smem, defines=wgmma2_defines,
            args=wgmma2_args, accepts=check_wgmma2, arch=WGMMA_ARCH,
            launch="grid (ceil(seq_q/128), batch x q_heads) x 384 threads (2 consumer warpgroups, 1 "
                   "producer), 225 KiB shared; sm_90 (Hopper) only",
        ),
    ]


def _sdpa_variants() -> list:
    ideas = {
        "sdpa_flash": "PyTorch's scaled_dot_product_attention, flash backend (FlashAttention-2): the peer to beat first",
        "sdpa_cudnn": "PyTorch's scaled_dot_product_attention, cuDNN backend (Hopper: wgmma, TMA, warp specialisation)",
        "sdpa_efficient": "PyTorch's scaled_dot_product_attention, memory-efficient backend (xFormers' CUTLASS kernels)",
    }
    return [CallableVariant(id=vid, idea=ideas[vid], fn=f"paprof_kernels.flash_fwd.sdpa:{SDPA[vid][0]}",
                            arrays="torch", accepts=_sdpa_check(vid),
                            launch="PyTorch picks; O is SDPA's own output (no copy)")
            for vid in SDPA]


VARIANTS = _cuda_variants() + (_sdpa_variants() if torch_present() else [])
