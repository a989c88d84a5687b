"""FlashInfer as an optional peer of paged_decode (``paged_decode/peers.py``).

Without a GPU: when the peer variants appear, the shapes they take, the block table as
FlashInfer's CSR, their kernel filters. On the GPU, with FlashInfer importable (the device
stage ``flashinfer`` installs it): every peer variant against the float64 reference, and
the kernels a step launches against the variant's kernel filter.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from paprof.errors import ShapeError
from paprof_kernels.paged_decode import catalog, peers, problem
from paprof_kernels.paged_decode.problem import Shape

ROOT = Path(__file__).resolve().parents[1]
PEERS = {v.id: v for v in catalog.PEER_VARIANTS}


def _variant_ids(folder, fake, **env_extra):
    """The paged_decode variant ids a fresh process sees with stand-in packages ``fake`` on
    its path (found by importlib, never imported: they raise if they are)."""
    folder.mkdir()
    for name in fake:
        (folder / name).mkdir()
        (folder / name / "__init__.py").write_text("raise ImportError('a stand-in: never imported')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(folder)]), **env_extra}
    code = "from paprof import registry; print(' '.join(v.id for v in registry.variants('paged_decode')))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=folder)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


OURS = ["baseline", "v1", "v2", "v3", "v4", "handbook", "v5", "v6", "v7"]


def test_peers_appear_only_where_flashinfer_and_torch_can_be_imported(tmp_path):
    assert _variant_ids(tmp_path / "both", ("flashinfer", "torch")) == OURS + ["flashinfer", "flashinfer_cc"]
    assert _variant_ids(tmp_path / "hidden", ("flashinfer", "torch"), PAPROF_PEERS="0") == OURS


@pytest.mark.skipif(importlib.util.find_spec("torch") is not None, reason="PyTorch is installed here")
def test_no_peers_without_torch(tmp_path):
    assert _variant_ids(tmp_path / "no_torch", ("flashinfer",)) == OURS


@pytest.mark.parametrize("tensor_cores", [True, False])
def test_the_shapes_the_peer_takes(tensor_cores):
    peers.check(Shape(dtype="fp16"), tensor_cores)
    peers.check(Shape(dtype="fp8", head_dim=128), tensor_cores)
    peers.check(Shape(dtype="fp16", head_dim=64, q_heads=32, kv_heads=32, context=(1, 17, 5000), batch=3),
                tensor_cores)
    with pytest.raises(ShapeError, match="fp16 or fp8 K/V caches, got fp32"):
        peers.check(Shape(dtype="fp32"), tensor_cores)
    with pytest.raises(ShapeError, match="beyond the bf16 tolerance"):
        peers.check(Shape(dtype="bf16"), tensor_cores)
    with pytest.raises(ShapeError, match="head_dim 64, 128, 256, got 96"):
        peers.check(Shape(dtype="fp16", head_dim=96), tensor_cores)
    fp8_64 = Shape(dtype="fp8", head_dim=64)
    if tensor_cores:
        with pytest.raises(ShapeError, match="does not take fp8 with head_dim 64"):
            peers.check(fp8_64, tensor_cores)
    else:
        peers.check(fp8_64, tensor_cores)


def test_csr_from_block_tables_drops_the_padding_and_keeps_page_order():
    shape = Shape(batch=4, context=(1, 16, 17, 40), page_size=16, max_pages=5)
    tables = problem.make_block_tables(shape, np.random.default_rng(2))
    indptr, indices, last = peers.csr_from_block_tables(tables, shape.context_lens, 16)
    assert indptr.tolist() == [0, 1, 2, 4, 7] and last.tolist() == [1, 16, 1, 8]
    assert indptr.dtype == indices.dtype == last.dtype == np.int32
    for b, ctx in enumerate(shape.context_lens):
        n = -(-ctx // 16)
        assert indices[indptr[b]:indptr[b + 1]].tolist() == tables[b, :n].tolist()
        assert (n - 1) * 16 + last[b] == ctx
    assert sorted(indices.tolist()) == list(range(shape.num_pages))


FLASHINFER_KERNELS = {
    # what each path launches (FlashInfer 0.7.2's kernel names), the merge only when it splits
    "flashinfer": ["flashinfer::BatchPrefillWithPagedKVCacheKernel",
                   "flashinfer::PersistentVariableLengthMergeStatesKernel"],
    "flashinfer_cc": ["flashinfer::BatchDecodeWithPagedKVCacheKernel",
                      "flashinfer::PersistentVariableLengthMergeStatesKernel"],
}


@pytest.mark.parametrize("vid", sorted(PEERS))
def test_kernel_filters_take_flashinfers_kernels_and_leave_the_cast_out(vid):
    regex = re.compile(PEERS[vid].kernel_regex)
    assert all(regex.search(name) for name in FLASHINFER_KERNELS[vid])
    other = "flashinfer" if vid == "flashinfer_cc" else "flashinfer_cc"
    assert not regex.search(FLASHINFER_KERNELS[other][0])
    assert not regex.search("at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>")
    assert PEERS[vid].kind == "callable" and PEERS[vid].arrays == "torch" and PEERS[vid].fn is None


# -- on the GPU, with FlashInfer ---------------------------------------------------------------

RAGGED = (1, 15, 16, 17, 1000, 4096)
GPU_SHAPES = [
    Shape(batch=len(RAGGED), context=RAGGED, dtype="fp16"),
    Shape(batch=3, q_heads=32, kv_heads=32, head_dim=64, context=(700, 1, 129), dtype="fp16"),
    Shape(batch=3, q_heads=64, kv_heads=8, context=(700, 1, 129), dtype="fp16"),
    Shape(batch=4, page_size=8, context=(1, 7, 9, 999), dtype="fp16"),
    Shape(batch=4, page_size=32, context=(1, 31, 33, 999), dtype="fp16"),
    Shape(batch=2, context=16384, dtype="fp16"),  # few sequences: FlashInfer splits and merges
    Shape(batch=len(RAGGED), context=RAGGED, dtype="fp8"),
    Shape(batch=2, context=16384, dtype="fp8"),
]


def _gpu_peers():
    if not peers.available():
        pytest.skip("FlashInfer or PyTorch is not importable (the device stage 'flashinfer' installs them)")
    from paprof import registry

    return registry


@pytest.mark.gpu
@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("shape", GPU_SHAPES, ids=lambda s: s.slug())
@pytest.mark.parametrize("vid", sorted(PEERS))
def test_peer_matches_the_reference(vid, shape):
    registry = _gpu_peers()
    from paprof.measure.kernels import harness

    variant = registry.get(vid, "paged_decode")
    try:
        variant.check(shape)
    except ShapeError as err:
        pytest.skip(str(err))
    prep = harness.prepare(registry.family("paged_decode"), variant, shape)
    check = harness.verify(prep)
    assert check.passed, f"{vid} {shape.slug()}: rel {check.rel_error} max abs {check.max_abs_error}"
    def output():
        produced = prep.step(0)
        return (prep.out if produced is None else harness.produced_array(produced, prep.out)).copy()

    first = output()
    assert float(abs(output() - first).max()) == 0.0  # reusable and deterministic


@pytest.mark.gpu
@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("vid", sorted(PEERS))
def test_a_step_launches_what_the_kernel_filter_names(vid):
    registry = _gpu_peers()
    import torch
    from torch.profiler import ProfilerActivity, profile

    from paprof.measure.kernels import harness

    variant = registry.get(vid, "paged_decode")
    prep = harness.prepare(registry.family("paged_decode"), variant, Shape(batch=2, context=16384, dtype="fp16"))
    prep.step(0)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        prep.step(0)
        torch.cuda.synchronize()
    names = {e.name for e in prof.events() if str(getattr(e, "device_type", "")).endswith("CUDA")}
    if not names:
        pytest.skip("PyTorch's profiler saw no kernels here (no CUPTI?)")
    regex = re.compile(variant.kernel_regex)
    ours = {n for n in names if "flashinfer" in n}
    print(vid, sorted(names))
    assert ours and all(regex.search(n) for n in ours), names
    # timed as FlashInfer runs: an fp16 step is FlashInfer's kernels and nothing of paprof's
    assert ours == names, f"kernels in the step that are not FlashInfer's: {sorted(names - ours)}"
    assert any(not regex.search(n) for n in names - ours), f"the cast kernel should be left out: {names}"
