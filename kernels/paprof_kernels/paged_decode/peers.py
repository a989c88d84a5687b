"""FlashInfer as a peer of the paged-decode variants: optional, never a dependency.

The catalog lists two callable variants (``arrays="torch"``) when both ``flashinfer`` and
``torch`` are importable (``PAPROF_PEERS=0`` hides them anyway):

``flashinfer``
    ``BatchDecodeWithPagedKVCacheWrapper(use_tensor_cores=True)``: decode through
    FlashInfer's prefill kernel (``BatchPrefillWithPagedKVCacheKernel``, the GQA group
    packed into the rows of the tensor-core tile), plus
    ``PersistentVariableLengthMergeStatesKernel`` when its plan splits the KV.
``flashinfer_cc``
    ``use_tensor_cores=False``: its CUDA-core decode kernel
    (``BatchDecodeWithPagedKVCacheKernel``), plus the same merge kernel when it splits.

Two variants rather than one with a parameter: the family's parameters describe the
problem, not a library's switch; as two ids they get their own run-store folders, kernel
filters and rows in ``bench`` and ``compare``.

Everything that must stay outside the timing happens once per input set in ``prepare``:
the block table as FlashInfer's CSR (``indptr``, ``indices``, ``last_page_len``),
``plan()`` (the first plan of a module JIT-compiles it with nvcc: tens of seconds, cached
under ``$FLASHINFER_WORKSPACE_BASE``), the fp32 query converted to fp16 (FlashInfer takes
query and output in the cache's 16-bit type), the buffers, and one launch. A step is then
FlashInfer as it runs: ``run()`` into its own fp16 output, which paprof checks as it is
(no cast into paprof's fp32 output inside the timed step: that small elementwise kernel,
~2 us at the main shape, is not FlashInfer's). With an fp8 cache the step also multiplies
by the V scale per KV head, which FlashInfer's one-float ``v_scale`` cannot hold.

fp8: the cache's e4m3 bytes are viewed as ``torch.float8_e4m3fn``; paprof keeps a scale per
KV head, which FlashInfer's ``k_scale`` / ``v_scale`` (one float each) cannot hold, so they
are folded where paprof's own kernels fold them: K's into the fp16 query (relative to the
largest, which goes into ``sm_scale``, so the query keeps its range) and V's into the cast.
bf16 is not offered: FlashInfer would round the query, P and the output to bf16's 8 bits,
about 4e-3 relative in all, beyond the family's bf16 tolerance of 2e-3.
"""

from __future__ import annotations

import importlib.util
import os
import warnings

from paprof.errors import ShapeError, UserError

PEER_DTYPES = ("fp16", "fp8")
PEER_HEAD_DIMS = (64, 128, 256)
WORKSPACE_BYTES = 128 << 20
"""FlashInfer's float workspace (its split-KV partials): the size its docs recommend. One
buffer serves every plan: the steps run one after another on one stream."""

_WORKSPACES: dict = {}


def available() -> bool:
    """True when FlashInfer and PyTorch can be imported (nothing is imported here) and
    ``PAPROF_PEERS`` is not ``0``."""
    if os.environ.get("PAPROF_PEERS", "1") == "0":
        return False
    return all(importlib.util.find_spec(m) is not None for m in ("flashinfer", "torch"))


def check(shape, tensor_cores: bool) -> None:
    """``ShapeError`` for the shapes the peer does not take (no GPU needed)."""
    vid = "flashinfer" if tensor_cores else "flashinfer_cc"
    if shape.dtype not in PEER_DTYPES:
        why = (" (bf16 would round query, P and output to 8 bits: beyond the bf16 tolerance)"
               if shape.dtype == "bf16" else "")
        raise ShapeError(f"{vid} takes fp16 or fp8 K/V caches, got {shape.dtype}{why}")
    if shape.head_dim not in PEER_HEAD_DIMS:
        raise ShapeError(f"{vid}: FlashInfer's decode takes head_dim "
                         f"{', '.join(map(str, PEER_HEAD_DIMS))}, got {shape.head_dim}")
    if tensor_cores and shape.dtype == "fp8" and shape.head_dim == 64:
        raise ShapeError("flashinfer: FlashInfer's tensor-core path does not take fp8 with head_dim 64")


def check_tensor_cores(shape) -> None:
    """``accepts`` of ``flashinfer``."""
    check(shape, tensor_cores=True)


def check_cuda_cores(shape) -> None:
    """``accepts`` of ``flashinfer_cc``."""
    check(shape, tensor_cores=False)


def csr_from_block_tables(block_tables, context_lens, page_size: int):
    """paprof's block table as FlashInfer's CSR: ``indptr`` ``[batch + 1]`` (where each
    sequence's pages start in ``indices``), ``indices`` (every sequence's pages in order,
    the -1 padding dropped) and ``last_page_len`` ``[batch]`` (1 to page_size tokens), all
    int32 NumPy arrays."""
    import numpy as np

    tables = np.asarray(block_tables)
    lens = np.asarray(context_lens, dtype=np.int64)
    pages = (lens + page_size - 1) // page_size
    indptr = np.zeros(len(lens) + 1, dtype=np.int32)
    indptr[1:] = np.cumsum(pages)
    used = np.arange(tables.shape[1])[None, :] < pages[:, None]
    indices = tables[used].astype(np.int32)  # row-major: sequence by sequence, in page order
    last = (lens - (pages - 1) * page_size).astype(np.int32)
    return indptr, indices, last


def _flashinfer():
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import flashinfer  # noqa: PLC0415 (optional, lazy by design)
    except Exception as err:  # an optional package's own import failure
        detail = f"{type(err).__name__}: {err}".splitlines()[0]
        raise UserError(f"the flashinfer peer: importing flashinfer failed ({detail})") from None
    return flashinfer


def _workspace(torch, device):
    key = str(device)
    if key not in _WORKSPACES:  # zeroed: FlashInfer asks for that before the first use
        _WORKSPACES[key] = torch.zeros(WORKSPACE_BYTES, dtype=torch.uint8, device=device)
    return _WORKSPACES[key]


def _prepare(inputs, out, shape, tensor_cores: bool):
    import torch  # noqa: PLC0415 (optional, lazy by design)

    check(shape, tensor_cores)
    flashinfer = _flashinfer()
    device = inputs["query"].device
    fp8 = shape.dtype == "fp8"
    kv_type = torch.float8_e4m3fn if fp8 else torch.float16
    k_cache = inputs["key_cache"].view(kv_type)
    v_cache = inputs["value_cache"].view(kv_type)
    indptr, indices, last = csr_from_block_tables(
        inputs["block_tables"].cpu().numpy(), inputs["context_lens"].cpu().numpy(), shape.page_size)
    query, sm_scale, v_scale = inputs["query"], shape.scale, None
    if fp8:  # scales per KV head, folded into the query (K) and the cast (V); see the module doc
        per_head = shape.group
        k_scale = inputs["k_scale"].to(torch.float32)
        k_ref = float(k_scale.max())
        query = query * (k_scale / k_ref).repeat_interleave(per_head).view(1, -1, 1)
        sm_scale *= k_ref
        v_scale = inputs["v_scale"].to(torch.float32).repeat_interleave(per_head).view(1, -1, 1)
    q16 = query.to(torch.float16).contiguous()
    o16 = torch.empty_like(q16)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            wrapper = flashinfer.BatchDecodeWithPagedKVCacheWrapper(
                _workspace(torch, device), "NHD", use_tensor_cores=tensor_cores)
            wrapper.plan(torch.from_numpy(indptr).to(device), torch.from_numpy(indices).to(device),
                         torch.from_numpy(last).to(device), shape.q_heads, shape.kv_heads,
                         shape.head_dim, shape.page_size, q_data_type=torch.float16,
                         kv_data_type=kv_type, sm_scale=sm_scale)
            wrapper.run(q16, (k_cache, v_cache), out=o16)  # the first launch: lazy set-up
            torch.cuda.synchronize(device)
    except Exception as err:  # FlashInfer's plan or first run refused or failed
        detail = f"{type(err).__name__}: {err}".strip().splitlines()[0][:300]
        raise ShapeError(f"{'flashinfer' if tensor_cores else 'flashinfer_cc'}: FlashInfer failed "
                         f"on this shape ({detail})") from None

    def launch():
        wrapper.run(q16, (k_cache, v_cache), out=o16)
        if v_scale is None:
            return o16  # FlashInfer's own output, checked as it is: no cast in the step
        torch.mul(o16, v_scale, out=out)  # fp8: the per-head V scale it cannot take
        return None

    return launch


def prepare_tensor_cores(inputs, out, shape):
    """``CallableVariant.prepare`` of ``flashinfer``."""
    return _prepare(inputs, out, shape, tensor_cores=True)


def prepare_cuda_cores(inputs, out, shape):
    """``CallableVariant.prepare`` of ``flashinfer_cc``."""
    return _prepare(inputs, out, shape, tensor_cores=False)
