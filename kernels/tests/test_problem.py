"""The problem definition, the float64 reference and the softmax algebra the kernels use."""

from __future__ import annotations

import math

import numpy as np
import pytest

from paprof.errors import ShapeError
from paprof_kernels.paged_decode import problem
from paprof_kernels.paged_decode.problem import Shape, parse_shape


def plain_attention(inputs, shape):
    """Softmax then weighted sum, token by token, with no shared code with reference()."""
    out = np.zeros((shape.batch, shape.q_heads, shape.head_dim))
    for b, ctx in enumerate(shape.context_lens):
        for h in range(shape.q_heads):
            kvh = h // shape.group
            q = inputs["query"][b, h].astype(np.float64)
            ks, vs = [], []
            k_scale = float(inputs["k_scale"][kvh]) if shape.dtype == "fp8" else 1.0
            v_scale = float(inputs["v_scale"][kvh]) if shape.dtype == "fp8" else 1.0
            for t in range(ctx):
                page = inputs["block_tables"][b, t // shape.page_size]
                ks.append(k_scale * problem.from_storage(np, inputs["key_cache"][page, t % shape.page_size, kvh], shape.dtype))
                vs.append(v_scale * problem.from_storage(np, inputs["value_cache"][page, t % shape.page_size, kvh], shape.dtype))
            s = np.array([q @ k for k in ks]) * shape.scale
            w = np.exp(s - s.max())
            w /= w.sum()
            out[b, h] = w @ np.array(vs)
    return out


@pytest.mark.parametrize("dtype", ["fp32", "fp16", "bf16", "fp8"])
def test_reference_matches_plain_softmax(dtype):
    shape = Shape(batch=4, q_heads=8, kv_heads=2, head_dim=16, page_size=4, context=(1, 5, 8, 13), dtype=dtype)
    inputs = problem.make_inputs(shape, seed=1)
    np.testing.assert_allclose(problem.reference(shape, inputs), plain_attention(inputs, shape), rtol=1e-10, atol=1e-12)


def test_worked_online_softmax_example():
    scores, values = [1.0, 3.0, 2.0, 5.0], np.array([[10.0], [20.0], [30.0], [40.0]])
    for chunk in (1, 2, 4):
        m, l, acc = problem.online_softmax_reference(scores, values, chunk=chunk)
        assert acc[0] / l == pytest.approx(36.88, abs=0.005)
    w = np.exp(np.array(scores) - 5.0)
    assert (w @ values[:, 0]) / w.sum() == pytest.approx(36.8806, abs=1e-4)


def test_split_merge_skips_empty_split():
    rng = np.random.default_rng(3)
    scores, values = rng.normal(size=40), rng.normal(size=(40, 8))
    full = problem.online_softmax_reference(scores, values)
    parts = [problem.online_softmax_reference(scores[a:b], values[a:b]) for a, b in ((0, 17), (17, 40))]
    empty = (-math.inf, 0.0, np.zeros(8))
    ms, ls, accs = zip(*(parts + [empty]))
    merged = problem.merge_splits(ms, ls, accs)
    np.testing.assert_allclose(merged, full[2] / full[1], rtol=1e-12)
    assert np.isfinite(merged).all()
    with pytest.raises(ValueError):
        problem.merge_splits([-math.inf], [0.0], [np.zeros(8)])


def test_block_tables_use_each_page_once_and_pad_with_minus_one():
    shape = Shape(batch=5, context=(1, 15, 16, 17, 100), page_size=16, max_pages=10)
    table = problem.make_block_tables(shape, np.random.default_rng(0))
    assert table.shape == (5, 10)
    used = table[table >= 0]
    assert sorted(used.tolist()) == list(range(shape.num_pages))
    for b, ctx in enumerate(shape.context_lens):
        n = -(-ctx // 16)
        assert (table[b, :n] >= 0).all() and (table[b, n:] == -1).all()
    assert not np.array_equal(used, np.sort(used)), "physical pages should be shuffled"


def test_inputs_are_random_not_zero():
    shape = Shape(batch=2, q_heads=4, kv_heads=2, head_dim=8, page_size=4, context=9)
    inputs = problem.make_inputs(shape, seed=5)
    for arr in (inputs["query"], inputs["key_cache"], inputs["value_cache"]):
        assert np.count_nonzero(arr) == arr.size
    other = problem.make_inputs(shape, seed=6)
    assert not np.array_equal(inputs["key_cache"], other["key_cache"])


def test_bf16_storage_rounds_to_nearest_even():
    x = np.array([1.0, 1.00390625, 1.01171875, -2.5, 3.0e-3], dtype=np.float32)
    back = problem.from_storage(np, problem.to_storage(np, x, "bf16"), "bf16")
    assert back.tolist()[:2] == [1.0, 1.0]  # halfway rounds to even
    assert back[2] == pytest.approx(1.015625)
    np.testing.assert_allclose(back, x, rtol=2**-8)


E4M3_FINITE = np.array([b for b in range(256) if b & 0x7F != 0x7F], dtype=np.uint8)


def test_e4m3_decodes_every_finite_pattern():
    values = problem.from_e4m3(np, E4M3_FINITE)
    positive = np.unique(values[values > 0])
    assert len(positive) == 126 and positive[0] == 2.0**-9 and positive[-1] == 448.0
    assert problem.from_e4m3(np, np.array([0x38, 0xB8, 0x08, 0x07, 0x7E], np.uint8)).tolist() == [
        1.0, -1.0, 2.0**-6, 7 * 2.0**-9, 448.0]
    # every finite pattern encodes back to itself (-0 included)
    np.testing.assert_array_equal(problem.to_e4m3(np, values.astype(np.float32)), E4M3_FINITE)


def test_e4m3_rounds_to_nearest_even_and_saturates():
    grid = np.unique(problem.from_e4m3(np, E4M3_FINITE))
    rng = np.random.default_rng(4)
    x = (rng.standard_normal(100_000) * 10.0 ** rng.uniform(-4, 3, 100_000)).astype(np.float32)
    got = problem.from_e4m3(np, problem.to_e4m3(np, x))
    clipped = np.clip(x, -448, 448).astype(np.float64)
    i = np.clip(np.searchsorted(grid, clipped), 1, len(grid) - 1)
    nearest = np.minimum(abs(clipped - grid[i - 1]), abs(clipped - grid[i]))
    np.testing.assert_array_equal(abs(clipped - got), nearest)
    halfway = np.array([2.0**-10, 3 * 2.0**-10, 1.0625, 1.1875, 464.0, 1e9, -1e9], np.float32)
    assert problem.from_e4m3(np, problem.to_e4m3(np, halfway)).tolist() == [
        0.0, 2 * 2.0**-9, 1.0, 1.25, 448.0, 448.0, -448.0]  # ties to even; saturate, never NaN


def test_fp8_inputs_hold_scaled_e4m3_bytes_a_scale_per_kv_head():
    shape = Shape(batch=2, q_heads=8, kv_heads=4, head_dim=16, page_size=4, context=(9, 30), dtype="fp8")
    inputs = problem.make_inputs(shape, seed=3)
    assert list(inputs) == [*problem.INPUT_NAMES, *problem.FP8_SCALE_NAMES]
    for name in ("key_cache", "value_cache"):
        cache, scales = inputs[name], inputs[name[0] + "_scale"]
        assert cache.dtype == np.uint8 and scales.dtype == np.float32 and scales.shape == (4,)
        held = problem.from_e4m3(np, cache)
        # each head's largest |value| maps to (or next to) 448: the whole e4m3 range is used
        assert np.abs(held).max(axis=(0, 1, 3)).min() >= 416
        assert scales.max() / scales.min() > 1.2, "the heads' ranges should differ"
    assert shape.kv_bytes == 2 * (9 + 30) * 4 * 16 and shape.elem_bytes == 1
    assert parse_shape("dtype=FP8").dtype == "fp8" and Shape(dtype="fp8").slug().endswith("_fp8")


def test_kv_bytes_counts_ragged_contexts_exactly():
    shape = Shape(batch=3, q_heads=4, kv_heads=2, head_dim=8, context=(1, 16, 17), dtype="fp16")
    assert shape.kv_bytes == 2 * (1 + 16 + 17) * 2 * 8 * 2
    assert Shape().kv_bytes == 2 * 64 * 4096 * 8 * 128 * 4


def test_parse_shape_round_trip_and_aliases():
    s = parse_shape("b=4,ctx=1:15:16:17,heads=16,kv_heads=4,d=64,page=8,dtype=BF16,splits=3")
    assert (s.batch, s.q_heads, s.kv_heads, s.head_dim, s.page_size, s.dtype, s.num_splits) == (
        4, 16, 4, 64, 8, "bf16", 3)
    assert s.context == (1, 15, 16, 17)
    assert parse_shape(s.spec()) == s
    assert parse_shape("context=7:8:9").batch == 3
    assert Shape().slug() == "b64_ctx4096_h32x8_d128_p16_fp32"


@pytest.mark.parametrize(
    "text, message",
    [
        ("q_heads=30,kv_heads=8", "multiple of kv_heads"),
        ("batch=0", "batch must be at least 1, got 0"),
        ("head_dim=-4", "head_dim must be at least 1, got -4"),
        ("context=0", "context must be at least 1, got 0"),
        ("context=100,page=16,max_pages=4", "beyond the block table"),
        ("batch=3,context=1:2", "2 context lengths given for batch 3"),
        ("dtype=fp4", "dtype must be one of"),
        ("colour=blue", "unknown parameter .colour."),
        ("batch", "not KEY=VALUE"),
        ("batch=abc", "must be an integer"),
    ],
)
def test_bad_shapes_say_why(text, message):
    with pytest.raises(ShapeError, match=message):
        parse_shape(text)
