"""The FlashInfer peer's glue on PyTorch's CPU, against a stand-in for FlashInfer (needs
PyTorch, skips without it; the real library runs in the GPU tests of test_peers.py).

The stand-in keeps 0.7.2's signatures of ``plan()`` and ``run()`` (a misspelt keyword is an
error here) and computes the attention from the CSR it was planned with, so this checks
the block table's conversion, the fp16 query, the fp8 cache's view and its scales folded
into query and cast, and the prepare / launch split, end to end through the harness.
"""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from paprof import registry  # noqa: E402
from paprof_kernels.paged_decode import catalog  # noqa: E402
from paprof_kernels.paged_decode.problem import Shape  # noqa: E402
from paprof.measure.kernels import gpu, harness  # noqa: E402

FAKE_FLASHINFER = '"""A stand-in for FlashInfer\'s BatchDecodeWithPagedKVCacheWrapper, on PyTorch\'s CPU: the same\nsignature names as 0.7.2\'s plan() / run(), the attention computed from the CSR in float32."""\nimport math\nimport torch\n\n__version__ = "0.0-fake"\nCALLS = []\n\n\nclass BatchDecodeWithPagedKVCacheWrapper:\n    def __init__(self, float_workspace_buffer, kv_layout="NHD", use_cuda_graph=False, use_tensor_cores=False,\n                 paged_kv_indptr_buffer=None, paged_kv_indices_buffer=None, paged_kv_last_page_len_buffer=None,\n                 backend="auto", jit_args=None):\n        assert kv_layout == "NHD" and float_workspace_buffer.dtype == torch.uint8\n        self.tc = use_tensor_cores\n\n    def plan(self, indptr, indices, last_page_len, num_qo_heads, num_kv_heads, head_dim, page_size, *,\n             pos_encoding_mode="NONE", window_left=-1, window_right=0, logits_soft_cap=None,\n             q_data_type="float16", kv_data_type=None, o_data_type=None, data_type=None, sm_scale=None,\n             rope_scale=None, rope_theta=None, non_blocking=True, block_tables=None, seq_lens=None,\n             fixed_split_size=None, disable_split_kv=False, q_len_per_req=1, is_causal=None):\n        assert indptr.dtype == indices.dtype == last_page_len.dtype == torch.int32\n        self.indptr, self.indices, self.last = indptr.cpu(), indices.cpu(), last_page_len.cpu()\n        self.hq, self.hk, self.d, self.page = num_qo_heads, num_kv_heads, head_dim, page_size\n        self.q_type, self.kv_type = q_data_type, kv_data_type or q_data_type\n        self.sm_scale = sm_scale if sm_scale is not None else 1 / math.sqrt(head_dim)\n        CALLS.append("plan")\n\n    def run(self, q, paged_kv_cache, *args, q_scale=None, k_scale=None, v_scale=None, out=None, lse=None,\n            return_lse=False, enable_pdl=None, window_left=None, sinks=None, q_len_per_req=None,\n            skip_softmax_threshold_scale_factor=None, kv_cache_sf=None):\n        k_cache, v_cache = paged_kv_cache\n        assert q.dtype == self.q_type and k_cache.dtype == v_cache.dtype == self.kv_type\n        assert out is not None and out.dtype == q.dtype and out.shape == q.shape\n        g = self.hq // self.hk\n        for b in range(len(self.last)):\n            pages = self.indices[self.indptr[b]:self.indptr[b + 1]].long()\n            n = (len(pages) - 1) * self.page + int(self.last[b])\n            k = k_cache[pages].float().reshape(-1, self.hk, self.d)[:n]\n            v = v_cache[pages].float().reshape(-1, self.hk, self.d)[:n]\n            qb = q[b].float().reshape(self.hk, g, self.d)\n            s = torch.einsum("kgd,tkd->kgt", qb, k) * self.sm_scale\n            p = torch.softmax(s, dim=-1)\n            out[b] = torch.einsum("kgt,tkd->kgd", p, v).reshape(self.hq, self.d).to(out.dtype)\n        CALLS.append("run")\n        return out\n'


class HostCupy:
    """NumPy in CuPy's place (the harness's arrays live on the host; DLPack hands them to
    PyTorch's CPU tensors without a copy)."""

    cuda = types.SimpleNamespace(runtime=types.SimpleNamespace(deviceSynchronize=lambda: None))

    def __getattr__(self, name):
        return getattr(np, name)


@pytest.fixture
def fake_flashinfer(tmp_path, monkeypatch):
    (tmp_path / "flashinfer").mkdir()
    (tmp_path / "flashinfer" / "__init__.py").write_text(FAKE_FLASHINFER)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "flashinfer", raising=False)
    monkeypatch.setattr(gpu, "cupy", lambda: HostCupy())
    monkeypatch.setattr(gpu, "current_device", lambda: types.SimpleNamespace(name="cpu", l2_bytes=1 << 20))
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)
    import flashinfer

    flashinfer.CALLS.clear()
    return flashinfer


SHAPES = [
    Shape(batch=4, q_heads=8, kv_heads=2, head_dim=64, page_size=16, context=(1, 16, 17, 200), dtype="fp16"),
    Shape(batch=3, q_heads=16, kv_heads=2, head_dim=128, page_size=8, context=(5, 64, 100), dtype="fp8"),
]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.dtype)
@pytest.mark.parametrize("variant", catalog.PEER_VARIANTS, ids=lambda v: v.id)
def test_the_peer_through_the_harness(fake_flashinfer, variant, shape):
    prep = harness.prepare(registry.family("paged_decode"), variant, shape, seed=5, input_sets=2)
    assert fake_flashinfer.CALLS == ["plan", "run"] * 2  # each set planned and launched once, in advance
    check = harness.verify(prep)
    # fp16 query and output around float32 arithmetic: ~1e-3 at the most
    assert check.passed and check.rel_error < 1e-3, check
    prep.step(1)
    assert fake_flashinfer.CALLS[-2:] == ["run", "run"] and fake_flashinfer.CALLS.count("plan") == 2
