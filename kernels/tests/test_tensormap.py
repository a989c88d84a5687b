"""paprof_kernels.tensormap without a GPU: the encode parameters wgmma2's TMA producer uses
(the same values the CPU emulation of cp.async.bulk.tensor decodes), the driver's documented
requirements, and the ctypes call's arguments (the driver function replaced by a recorder)."""

from __future__ import annotations

import ctypes

import pytest

from paprof_kernels.flash_fwd import catalog
from paprof_kernels.flash_fwd.problem import Shape
from paprof_kernels import tensormap


def test_kv_map_of_the_issue_shape():
    p = Shape(batch=4, q_heads=32, seq_q=8192, head_dim=128, dtype="bf16")
    km, vm = catalog.wgmma2_maps(p)
    assert km == vm
    assert km.data_type == tensormap.DATA_TYPE_BFLOAT16 == 9  # cuda.h's enum order
    assert km.dims == (128, 8192, 4 * 32) and km.strides == (256, 8192 * 256)
    assert km.box == (64, 128, 1) and km.element_strides == (1, 1, 1)
    assert km.swizzle == tensormap.SWIZZLE_128B == 3 and km.interleave == 0 and km.oob_fill == 0
    assert km.box_bytes == 128 * 128  # half a K tile: two copies a tile at d128
    assert len(km.fields()) == 25  # kernels/tests/flash_emu's TENSOR_MAP_FIELDS
    gqa = Shape(batch=1, q_heads=4, kv_heads=2, seq_q=100, seq_k=333, head_dim=128, dtype="fp16")
    fp16 = catalog.wgmma2_maps(gqa)[0]
    assert fp16.data_type == tensormap.DATA_TYPE_FLOAT16 == 6 and fp16.dims == (128, 333, 2)


@pytest.mark.parametrize("change, match", [
    (dict(strides=(250, 250 * 100)), "multiples of 16"),
    (dict(strides=(128, 256 * 100)), "below the 256 bytes"),
    (dict(box=(128, 64, 1)), "exceeds the 128-byte swizzle"),
    (dict(box=(64, 300, 1)), "1..256"),
    (dict(dims=(128, 0, 1)), "1..2\\^32"),
    (dict(element_strides=(1, 9, 1)), "1..8"),
])
def test_bad_maps_are_refused(change, match):
    good = tensormap.rows_map("bf16", 2, 100, 128, 128)
    bad = tensormap.TiledMap(**{**good.__dict__, **change})
    with pytest.raises(ValueError, match=match):
        bad.check()


def test_encode_passes_the_parameters(monkeypatch):
    seen = {}

    def fake(at, dtype, rank, address, dims, strides, box, estr, interleave, swizzle, l2, oob):
        assert at % 128 == 0
        seen.update(dtype=dtype, rank=rank, address=address, dims=list(dims[:rank]), strides=list(strides[:rank - 1]),
                    box=list(box[:rank]), estr=list(estr[:rank]), rest=(interleave, swizzle, l2, oob))
        ctypes.memmove(at, bytes(range(128)), 128)
        return 0

    monkeypatch.setattr(tensormap, "_encode_fn", lambda: fake)
    m = tensormap.rows_map("fp16", 8, 1000, 128, 64)
    raw = tensormap.encode_tiled(m, 0x7F0000001000)
    assert raw == bytes(range(128))
    assert seen == dict(dtype=6, rank=3, address=0x7F0000001000, dims=[128, 1000, 8], strides=[256, 256000],
                        box=[64, 64, 1], estr=[1, 1, 1], rest=(0, 3, 3, 0))
    with pytest.raises(ValueError, match="16-byte aligned"):
        tensormap.encode_tiled(m, 0x1008)
    monkeypatch.setattr(tensormap, "_encode_fn", lambda: (lambda *a: 1))
    with pytest.raises(RuntimeError, match="CUresult 1"):
        tensormap.encode_tiled(m, 0x1000)


def test_wgmma2_args_without_tma_are_the_plain_ones():
    tuning = catalog.parse_knobs("TMA=0,STAGES=2", "wgmma2")
    p = Shape(batch=1, q_heads=2, seq_q=100, head_dim=128, dtype="bf16")
    args = catalog.wgmma2_args(p, {"q": 1, "k": 2, "v": 3}, 4, tuning)
    assert args == catalog.kernel_args(p, {"q": 1, "k": 2, "v": 3}, 4)
    assert "TMA" in catalog.WGMMA2_KNOBS and "PERSISTENT" not in catalog.WGMMA2_KNOBS
    assert catalog.parse_knobs("TMA=1", "wgmma2") == {"TMA": 1}


STUB = r"""
#include <stdint.h>
#include <string.h>
/* cuda.h's signature (enums as int); records what it was given, fills the map with 0..127 */
uint64_t seen[32];
int cuTensorMapEncodeTiled(void* map, int dtype, uint32_t rank, void* address, const uint64_t* dims,
                           const uint64_t* strides, const uint32_t* box, const uint32_t* estr, int interleave,
                           int swizzle, int l2, int oob) {
    int n = 0;
    seen[n++] = (uint64_t)(uintptr_t)map % 64; seen[n++] = dtype; seen[n++] = rank; seen[n++] = (uintptr_t)address;
    for (uint32_t i = 0; i < rank; ++i) seen[n++] = dims[i];
    for (uint32_t i = 0; i + 1 < rank; ++i) seen[n++] = strides[i];
    for (uint32_t i = 0; i < rank; ++i) seen[n++] = box[i];
    for (uint32_t i = 0; i < rank; ++i) seen[n++] = estr[i];
    seen[n++] = interleave; seen[n++] = swizzle; seen[n++] = l2; seen[n++] = oob;
    for (int i = 0; i < 128; ++i) ((unsigned char*)map)[i] = (unsigned char)i;
    return 0;
}
"""


def test_the_ctypes_call_through_a_stub_driver(monkeypatch, tmp_path):
    """The real ctypes path (argtypes, arrays, the 128-byte-aligned map) against a C stub of
    the driver function with cuda.h's signature."""
    import shutil
    import subprocess

    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler")
    (tmp_path / "stub.c").write_text(STUB)
    lib = tmp_path / "libstub.so"
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", str(lib), str(tmp_path / "stub.c")], check=True)
    monkeypatch.setattr(tensormap, "LIBCUDA", str(lib))
    tensormap._encode_fn.cache_clear()
    try:
        m = tensormap.rows_map("bf16", 4 * 8, 8192, 128, 128)
        assert tensormap.encode_tiled(m, 0x7F1234560000) == bytes(range(128))
        seen = list((ctypes.c_uint64 * 32).in_dll(ctypes.CDLL(str(lib)), "seen"))
        assert seen[:4 + 3 + 2 + 3 + 3 + 4] == [0, 9, 3, 0x7F1234560000, 128, 8192, 32, 256, 8192 * 256,
                                                  64, 128, 1, 1, 1, 1, 0, 3, 3, 0]
    finally:
        tensormap._encode_fn.cache_clear()
