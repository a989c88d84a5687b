"""The ``softmax`` family: a row softmax of a [rows, cols] float32 matrix.

y[r, :] = exp(x[r, :] - max(x[r, :])) / sum(exp(x[r, :] - max(x[r, :])))

Memory-bound: at the least the matrix is read once and written once. The variants tell
the usual story: one thread per row (naive), a CTA per row (block), one pass from DRAM
in 16-byte vectors (fused), then PyTorch's and a Triton kernel to compare against.
paprof finds this family through ``[tool.paprof]`` in this folder's pyproject.toml.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from paprof.family import CallableVariant, CudaVariant, Family, ParamError, Params, Work, param

MAX_ELEMENTS = 2**31
"""rows x cols at most: the input, output and the float64 reference fit an H200."""


@dataclass(frozen=True)
class Size(Params):
    rows: int = param(16384, aliases=("m",), min=1, max=2**20, help="rows: one softmax each")
    cols: int = param(4096, aliases=("n",), min=1, max=65536, help="elements per row")

    def validate(self) -> None:
        if self.rows * self.cols > MAX_ELEMENTS:
            raise ParamError(f"rows x cols = {self.rows * self.cols} elements: at most 2**31 "
                             "(8 GiB a matrix) so that input, output and reference fit the GPU")


def inputs(p: Size, seed, xp) -> dict:
    return {"x": xp.random.default_rng(seed).standard_normal((p.rows, p.cols), dtype=xp.float32)}


def output(p: Size, xp):
    return xp.empty((p.rows, p.cols), xp.float32)


def reference(p: Size, inputs: dict, xp):
    x = inputs["x"].astype(xp.float64)
    e = xp.exp(x - x.max(axis=1, keepdims=True))  # stable: subtract the row max
    return e / e.sum(axis=1, keepdims=True)


def work(p: Size) -> Work:
    # Bytes: x read once, y written once. FLOPs, 5 per element: the max (a compare), the
    # subtraction, the exp (one op), the sum (an add) and the scaling by 1/sum.
    return Work(bytes=2 * 4 * p.rows * p.cols, flops=5 * p.rows * p.cols)


def fused_config(p: Size) -> tuple[int, int]:
    """fused's (threads per CTA, float4s per thread in registers; 0: two passes)."""
    vecs = -(-p.cols // 4)
    if vecs > 1024 * 8:  # more than 1024 threads x 8 float4s: stream the row twice
        return 1024, 0
    threads = min(1024, max(128, 1 << (-(-vecs // 8) - 1).bit_length()))
    return threads, -(-vecs // threads)


def row_args(p: Size, inputs: dict, out) -> tuple:
    return inputs["x"], out, np.int32(p.cols)


VARIANTS = [
    CudaVariant(
        id="naive",
        idea="one thread per row, three passes (max, sum of exp, write) over global memory: "
             "a warp's loads hit 32 rows at once (uncoalesced) and only `rows` threads run",
        sources=("softmax_naive.cu",), kernel="softmax_naive",
        grid=lambda p: (-(-p.rows // 128), 1, 1), block=(128, 1, 1),
        args=lambda p, inputs, out: (inputs["x"], out, np.int32(p.rows), np.int32(p.cols)),
        launch="ceil(rows/128) CTAs x 128 threads, a thread per row",
    ),
    CudaVariant(
        id="block",
        idea="one CTA per row, threads stride across it: coalesced loads, shuffle + shared-memory "
             "reductions; still three passes, the re-reads served by L1/L2",
        sources=("softmax_block.cu",), kernel="softmax_block",
        grid=lambda p: (p.rows, 1, 1), block=(256, 1, 1), args=row_args,
        launch="rows CTAs x 256 threads",
    ),
    CudaVariant(
        id="fused",
        idea="one DRAM pass: the row read once with float4 loads into registers, block max and sum, "
             "written once with float4 stores (rows over 32K columns: an online max/sum pass, then a "
             "second pass that re-reads)",
        sources=("softmax_fused.cu",), kernel="softmax_fused",
        grid=lambda p: (p.rows, 1, 1), block=lambda p: (fused_config(p)[0], 1, 1),
        shared_mem=lambda p: 2 * (fused_config(p)[0] // 32) * 4,  # two reductions' scratch
        defines=lambda p: dict(zip(("THREADS", "VPT"), fused_config(p))),
        args=row_args,
        launch="rows CTAs x 128-1024 threads, up to 8 float4 of the row per thread in registers",
    ),
    CallableVariant(
        id="torch",
        idea="PyTorch's own softmax (ATen's softmax kernels), written straight into out: the bar to beat",
        fn="softmax_torch:softmax", arrays="torch",
        kernel_regex="softmax_warp_forward|cunn_SoftMaxForward",  # ATen's names in torch 2.11
        launch="ATen picks: a warp per row up to 1024 columns, else a CTA per row",
    ),
    CallableVariant(
        id="triton",
        idea="Triton, one program per row: the whole row in registers when it fits (next power of "
             "two up to 16K), else an online-softmax loop and a second pass",
        fn="softmax_triton:softmax", arrays="torch", kernel_regex="softmax_triton_kernel",
        launch="rows programs x 4-16 warps",
    ),
]

family = Family(
    name="softmax",
    summary="row softmax of a [rows, cols] float32 matrix (memory-bound: read once, write once)",
    params=Size, variants=VARIANTS, inputs=inputs, output=output, reference=reference,
    work=work, tolerance=1e-5,
    arch="sm_90",  # the static gate compiles for the H200 these runs were made on
    notes=("a softmax reads and writes its matrix, so % of the read ceiling undersells it: "
           "a read-and-write kernel's own ceiling is a few % lower",),
)
