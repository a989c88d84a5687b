"""v5/v6's compile-time choices per shape (no GPU): which feed of the tensor-core kernel a
16-bit cache gets, and the shared memory each needs."""

import pytest

from paprof_kernels.paged_decode import variants
from paprof_kernels.paged_decode.problem import Shape


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("head_dim, feed", [(32, 0), (64, 1), (128, 1), (256, 0)])
def test_half_caches_take_the_register_feed_where_it_fits(dtype, head_dim, feed):
    defines = variants.fast_defines(Shape(dtype=dtype, head_dim=head_dim), False, "k")
    assert defines["FEED"] == feed
    ring = defines["WARPS"] * defines.get("NSTAGES", 0) * 2 * 16 * (head_dim * 2 + 16)
    warp_merge = (2 + head_dim) * defines["WARPS"] * defines["GROUP"] * 4
    if feed:  # registers only: shared memory is the warps' merge area
        assert variants.fast_smem(defines) == warp_merge
    else:  # the cp.async ring, reused for the merge
        assert defines["NSTAGES"] >= 2 and variants.fast_smem(defines) == max(ring, warp_merge)


def test_fp32_keeps_its_cuda_core_kernel():
    defines = variants.fast_defines(Shape(dtype="fp32"), True, "k")
    assert variants.fast_source(Shape(dtype="fp32")).name == "v5_fast.cu"
    assert "FEED" not in defines and defines["SPLIT"] == 1


@pytest.mark.parametrize("head_dim", [64, 128])
def test_fp8_takes_the_register_feed_two_tiles_a_step(head_dim):
    defines = variants.fast_defines(Shape(dtype="fp8", head_dim=head_dim), True, "k")
    assert variants.fast_source(Shape(dtype="fp8")).name == "v5_mma.cu"
    assert (defines["KV_DTYPE"], defines["FEED"], defines["TSUB"], defines["MIN_BLOCKS"]) == (3, 1, 2, 4)
    assert variants.fast_smem(defines) == (2 + head_dim) * defines["WARPS"] * defines["GROUP"] * 4


@pytest.mark.parametrize("vid", ["v5", "v6"])
@pytest.mark.parametrize("head_dim", [32, 256])
def test_fp8_refuses_head_dims_the_register_feed_does_not_take(vid, head_dim):
    from paprof import registry
    from paprof.errors import ShapeError

    with pytest.raises(ShapeError, match="fp8 K/V only through the tensor cores' register feed"):
        registry.get(vid, "paged_decode").check(Shape(dtype="fp8", head_dim=head_dim))


@pytest.mark.parametrize("vid", ["baseline", "v1", "v2", "v3", "v4", "handbook"])
def test_the_sources_kernels_refuse_fp8(vid):
    from paprof import registry
    from paprof.errors import ShapeError

    with pytest.raises(ShapeError, match="fp32 K/V only"):
        registry.get(vid, "paged_decode").check(Shape(dtype="fp8"))


def test_v7_refuses_splits_and_compiles_its_work_list_kernel():
    from paprof import registry
    from paprof.errors import ShapeError

    with pytest.raises(ShapeError, match="chunk=PAGES"):
        registry.get("v7", "paged_decode").check(Shape(num_splits=4, dtype="fp16"))
    units = variants.compile_units("v7", Shape(dtype="fp16"))
    assert [(d["KERNEL_NAME"], d["SPLIT"], d.get("WORKLIST", 0)) for _, d in units] == [
        ("paged_decode_v7_tokens", 1, 1), ("paged_decode_v7_packed", 1, 2), ("paged_decode_v6_nosplit", 0, 0)]


@pytest.mark.parametrize("dtype, want", [("fp16", (2, 8)), ("bf16", (2, 8)), ("fp8", (2, 8)), ("fp32", (4, 4))])
def test_group_1_at_head_dim_64_takes_its_measured_tuning(dtype, want):
    """GROUP1_D64_TUNING: the tensor-core caches at group 1, head_dim 64 take 2 warps x 8 CTAs
    a SM (H200: fp16 97.5 % against 87.4 %, bf16 99.3 / 89.1, fp8 87.9 / 73.8); fp32 keeps
    FAST_TUNING's; other groups and head dims are untouched."""
    d64 = variants.fast_defines(Shape(dtype=dtype, q_heads=32, kv_heads=32, head_dim=64), True, "k")
    assert (d64["WARPS"], d64["MIN_BLOCKS"]) == want
    for other in (Shape(dtype=dtype, q_heads=32, kv_heads=8, head_dim=64), Shape(dtype=dtype, q_heads=32, kv_heads=32)):
        d = variants.fast_defines(other, True, "k")
        assert d["WARPS"] == variants.FAST_TUNING[dtype][1]["WARPS"] and d["MIN_BLOCKS"] in (2, 4)
    assert variants.fast_smem(d64) == (2 + 64) * d64["WARPS"] * 4


def test_a_tuning_is_passed_to_the_build_and_leaves_the_shipped_tables_alone():
    """A sweep's knobs are a value given to fast_defines / compile_units / catalog.tuned: -D
    values (or SOURCE) are the whole tuning of that build (no per-shape table, the ring still
    taking over where the register feed cannot), host knobs alone keep the shipped -D values;
    the shipped tables are read only and every call without a tuning gets them."""
    from paprof import registry
    from paprof_kernels.paged_decode import catalog

    d64 = Shape(dtype="fp16", q_heads=32, kv_heads=32, head_dim=64)
    shipped = variants.fast_defines(d64, True, "k")
    tuned = variants.fast_defines(d64, True, "k", tuning={"SOURCE": "v5_mma.cu", "WARPS": 3, "FEED": 1, "TSUB": 2})
    assert (tuned["WARPS"], tuned["TSUB"], tuned["MIN_BLOCKS"]) == (3, 2, 4) and "FEED_HINT" not in tuned
    assert variants.fast_defines(d64, True, "k") == shipped and (shipped["WARPS"], shipped["MIN_BLOCKS"]) == (2, 8)
    assert variants.fast_defines(d64, True, "k", tuning={"PATH": "packed", "MERGE": "kernel"}) == shipped
    ring = variants.fast_defines(Shape(dtype="bf16", head_dim=256), False, "k", tuning={"WARPS": 4, "FEED": 1})
    assert (ring["WARPS"], ring["FEED"], ring["NSTAGES"]) == (4, 0, 2)  # RING_TUNING over it
    fast = Shape(dtype="fp16")
    assert variants.fast_source(fast, {"SOURCE": "v5_fast.cu"}).name == "v5_fast.cu"
    assert variants.fast_source(fast).name == "v5_mma.cu"
    with pytest.raises(TypeError):
        variants.FAST_TUNING["fp16"] = ("v5_fast.cu", {})
    with pytest.raises(TypeError):
        variants.GROUP1_D64_TUNING["fp16"] = {}
    v5 = catalog.tuned(registry.get("v5", "paged_decode"), {"SOURCE": "v5_fast.cu", "WARPS": 4, "UNROLL": 8})
    ((sources, defines),) = v5.compile_units(fast)
    assert sources[0].name == "v5_fast.cu" and (defines["WARPS"], defines["UNROLL"]) == (4, 8)
    ((sources, defines),) = registry.get("v5", "paged_decode").compile_units(fast)
    assert sources[0].name == "v5_mma.cu" and defines["WARPS"] == 3
    with pytest.raises(ValueError, match="no tuning"):
        catalog.tuned(registry.get("v4", "paged_decode"), {"WARPS": 4})
