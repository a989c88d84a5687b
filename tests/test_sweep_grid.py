"""The sweep grid: --grid parsing, ranges, validation through the family, shards."""

from __future__ import annotations

import itertools

import pytest

from paprof.errors import ShapeError, UsageError
from paprof.sweep import grid as G

from helpers import lab_params

pytestmark = pytest.mark.lab  # the lab's paged_decode is the sample plugin


def test_values_ranges_and_order():
    g = G.make_grid(lab_params(), ["batch=1,4,16,64", "ctx=4096..32768x8"], "dtype=fp16")
    assert g.keys == ["batch", "context"]  # the alias ctx is the family's key context
    assert [a.values for a in g.axes] == [(1, 4, 16, 64), (4096, 32768)]
    assert [p.coords for p in g.points[:3]] == [
        {"batch": 1, "context": 4096}, {"batch": 1, "context": 32768}, {"batch": 4, "context": 4096}]
    assert len(g.points) == 8 and [p.index for p in g.points] == list(range(8))
    assert g.points[1].slug == "b1_ctx32768_h32x8_d128_p16_fp16"
    assert g.points[1].params.dtype == "fp16" and g.points[1].label == "batch 1, context 32768"
    again = G.make_grid(lab_params(), ["batch=1,4,16,64", "ctx=4096..32768x8"], "dtype=fp16")
    assert [p.slug for p in again.points] == [p.slug for p in g.points]


@pytest.mark.parametrize("text, values", [
    ("1024..131072x2", [1024 * 2**i for i in range(8)]),
    ("8..64+8", [8, 16, 24, 32, 40, 48, 56, 64]),
    ("1..10x3", [1, 3, 9]),
    ("5..5+1", [5]),
    ("0.5..2x2", [0.5, 1.0, 2.0]),
])
def test_expand_range(text, values):
    assert [float(v) for v in G.expand_range(text)] == [float(v) for v in values]


def test_ranges_mix_with_values_and_repeats_drop():
    g = G.make_grid(lab_params(), ["batch=1..4x2,3,4"], None)
    assert g.axes[0].values == (1, 2, 4, 3)


@pytest.mark.parametrize("grid, shape, message", [
    ([], None, "name at least one axis"),
    (["batch"], None, "is not KEY=VALUES"),
    (["batch="], None, "has no values"),
    (["batch=1,,4"], None, "empty value"),
    (["batch=1,context=4"], None, "one key per --grid"),
    (["heads_total=1"], None, "unknown parameter"),
    (["batch=1", "b=2"], None, "given twice"),
    (["batch=1,2"], "batch=4", "both swept (--grid batch=1,2) and fixed"),
    (["batch=1..64"], None, "needs a step"),
    (["batch=64..1x2"], None, "backwards"),
    (["batch=1..64x1"], None, "factor above 1"),
    (["batch=1..64+0"], None, "step above 0"),
    (["batch=1..2..3x2"], None, "is not a..bxF"),
    (["batch=1..1000000000+1"], None, "more than"),
    (["batch=0,4"], None, "--grid batch=0: batch must be at least 1, got 0"),
    (["dtype=fp16,fp4"], None, "--grid dtype=fp4: dtype must be one of"),
    (["batch=x"], None, "batch must be an integer"),
    (["batch=1,2", "page=0"], None, "--grid page=0: page must be at least 1"),  # not batch=1
    (["kv_heads=8,64"], "q_heads=32", "--grid kv_heads=64: q_heads (32) must be a multiple of kv_heads (64)"),
    (["batch=1"], "batch=0", "--shape batch=0: batch must be at least 1"),
])
def test_grid_errors_are_one_line(grid, shape, message):
    with pytest.raises((UsageError, ShapeError)) as err:
        G.make_grid(lab_params(), grid, shape)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_a_combination_the_family_refuses_is_an_invalid_point():
    g = G.make_grid(lab_params(), ["q_heads=32,64", "kv_heads=8,64"], None)
    invalid = [p for p in g.points if p.error]
    assert [p.coords for p in invalid] == [{"q_heads": 32, "kv_heads": 64}]
    assert invalid[0].params is None and "multiple of kv_heads" in invalid[0].error
    assert invalid[0].spec == "q_heads=32,kv_heads=64"


def test_too_many_points(monkeypatch):
    monkeypatch.setattr(G, "MAX_POINTS", 10)
    with pytest.raises(UsageError, match="the grid has 12 points"):
        G.make_grid(lab_params(), ["batch=1..4+1", "context=1,2,3"], None)


@pytest.mark.parametrize("sizes", [(1,), (5,), (3, 4), (2, 3, 2), (13,)])
def test_shards_cover_every_point_once(sizes):
    axes = [f"batch={','.join(str(i + 1) for i in range(sizes[0]))}"]
    for key, size in zip(("context", "page"), sizes[1:]):
        axes.append(f"{key}={','.join(str(16 * (i + 1)) for i in range(size))}")
    points = G.make_grid(lab_params(), axes, None).points
    for n in range(1, 8):
        shards = [G.shard(points, k, n) for k in range(1, n + 1)]
        indices = sorted(p.index for s in shards for p in s)
        assert indices == list(range(len(points)))
        assert max(map(len, shards)) - min(map(len, shards)) <= 1
        for k, s in enumerate(shards, 1):
            assert all(G.shard_of(p.index, n) == k for p in s)


def test_parse_shard_is_one_based():
    assert G.parse_shard(None) == (1, 1)
    assert G.parse_shard("1/4") == (1, 4) and G.parse_shard(" 4 / 4 ") == (4, 4)
    for bad in ("0/4", "5/4", "1/0", "a/b", "2", "1/2/3", "-1/2"):
        with pytest.raises(UsageError) as err:
            G.parse_shard(bad)
        assert "--shard" in str(err.value) and "K" in str(err.value)


def test_shard_composition_within_a_matrix_job():
    from paprof.sweep.gpus import child_shard

    points = list(range(23))
    for n, gpus in itertools.product(range(1, 5), range(1, 4)):
        for k in range(1, n + 1):
            mine = G.shard(points, k, n)
            split = [G.shard(points, *child_shard((k, n), i, gpus)) for i in range(1, gpus + 1)]
            assert sorted(x for s in split for x in s) == mine
