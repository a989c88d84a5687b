"""paged_decode v7's planner (``variants.plan_work``, ``plan_packed``, ``merge_list``,
``v7_path``): pure Python, no compiler, so these run in the fast lane on any machine (the
kernels that read the plans run in tests/test_paged_emulated.py)."""

from __future__ import annotations

import pytest

from paprof_kernels.paged_decode import problem, variants
from paprof_kernels.paged_decode.problem import Shape

try:
    from v7_cases import ISSUE_RAGGED, PACKED_CASES, V7_CAPACITY, _packed_covering
except ImportError:  # tests/ as a package
    from tests.v7_cases import ISSUE_RAGGED, PACKED_CASES, V7_CAPACITY, _packed_covering


def _covering(shape: Shape, plan: dict) -> None:
    """The plan's items cut each sequence's pages into its parts, once each, in order."""
    pages = [-(-c // shape.page_size) for c in shape.context_lens]
    by_seq: dict = {}
    for seq, p0, p1, part, parts, base in plan["items"]:
        assert 0 <= p0 < p1 <= pages[seq] and p1 - p0 <= plan["chunk_pages"]
        by_seq.setdefault(seq, []).append((part, p0, p1, parts, base))
    bases = []
    for seq, got in by_seq.items():
        got.sort()
        assert [g[0] for g in got] == list(range(got[0][3])) and {g[3] for g in got} == {len(got)}
        assert got[0][1] == 0 and got[-1][2] == pages[seq]
        assert all(a[2] == b[1] for a, b in zip(got, got[1:]))
        if len(got) > 1:
            bases.append((got[0][4], len(got)))
    assert sorted(by_seq) == list(range(shape.batch))
    bases.sort()  # the partial slots of the multi-part sequences: disjoint, packed
    assert [b for b, _ in bases] == [sum(n for _, n in bases[:i]) for i in range(len(bases))]
    assert plan["part_slots"] == sum(n for _, n in bases)
    sizes = [p1 - p0 for _, p0, p1, *_ in plan["items"]]
    assert sizes == sorted(sizes, reverse=True), "longest first"


@pytest.mark.parametrize("spec, chunk, items", [
    # the H200's 132 SMs x 4 resident CTAs: v7 gives even batches v6's split (choose_splits)
    ("batch=4,context=32768", 128, 64),
    ("batch=1,context=131072", 125, 66),
    ("batch=32,context=8192,q_heads=64", 256, 64),
    ("batch=64,context=4096", 256, 64),
    ("context=" + ":".join(map(str, ISSUE_RAGGED)), 108, 66),
    ("context=" + ":".join(map(str, ISSUE_RAGGED)) + ",chunk=32", 32, 197),
])
def test_v7_plan_covers_every_page_once_and_fills_one_wave(spec, chunk, items):
    shape = problem.parse_shape(spec)
    plan = variants.plan_work(shape.context_lens, shape.page_size, shape.kv_heads, 132 * 4, shape.chunk_pages)
    _covering(shape, plan)
    assert (plan["chunk_pages"], len(plan["items"])) == (chunk, items)
    assert plan["waves"] == -(-items * shape.kv_heads // 528)  # chunk 32 on the ragged batch: 3
    if not shape.chunk_pages:  # the smallest chunk whose CTAs fit one wave of 528
        assert len(plan["items"]) * shape.kv_heads <= 528
        smaller = variants._parts_of([-(-c // 16) for c in shape.context_lens], chunk - 1)
        assert chunk == variants.MIN_PAGES_PER_SPLIT or smaller * shape.kv_heads > 528 or chunk == max(
            -(-c // 16) for c in shape.context_lens)


def test_v7_matches_v6s_split_count_on_even_batches():
    class Device:
        sm_count = 132

    for batch, ctx in [(1, 131072), (2, 65536), (4, 32768), (8, 16384), (16, 8192), (33, 4096), (64, 4096)]:
        shape = Shape(batch=batch, context=ctx)
        plan = variants.plan_work(shape.context_lens, 16, 8, 132 * 4)
        assert plan["max_parts"] == variants.choose_splits(shape, Device, 4), (batch, ctx, plan["max_parts"])


def test_v7_path_direct_for_even_full_batches_packed_for_ragged_16_bit():
    cap = 132 * 4
    for spec, path in [("batch=64,context=4096", "direct"), ("batch=64,context=4096,kv_heads=32,head_dim=64", "direct"),
                       ("batch=4,context=32768", "tokens"), ("batch=64,context=4096,chunk=256", "tokens"),
                       ("context=" + ":".join(map(str, ISSUE_RAGGED)) + ",dtype=fp16", "packed"),
                       ("context=" + ":".join(map(str, ISSUE_RAGGED)) + ",dtype=bf16", "packed"),
                       ("context=" + ":".join(map(str, ISSUE_RAGGED)) + ",dtype=fp8", "tokens"),
                       ("context=" + ":".join(map(str, ISSUE_RAGGED)) + ",dtype=fp32", "tokens"),
                       ("context=" + ":".join(map(str, ISSUE_RAGGED)) + ",chunk=108", "tokens")]:
        shape = problem.parse_shape(spec)
        plan = variants.plan_work(shape.context_lens, shape.page_size, shape.kv_heads, cap, shape.chunk_pages)
        assert variants.v7_path(shape, plan) == path, spec
        # the rule ships; a tuning's PATH (kernels/scripts/tune_v5.py's PATH knob) forces one
        forced = "tokens" if path == "packed" else "packed"
        assert variants.v7_path(shape, plan, {"PATH": forced}) == forced
        assert variants.v7_path(shape, plan, {"WARPS": 2}) == path
    assert set(variants.V7_CHOICES) == {"direct", "tokens", "packed"}
    assert not hasattr(variants, "V7_PATH") and not hasattr(variants, "V7_MERGE")


def test_v7_serpentine_order_is_the_same_items_every_other_round_reversed():
    lens = ISSUE_RAGGED
    longest = variants.plan_work(lens, 16, 8, 528, sm_count=132, order="longest")["items"]
    serp = variants.plan_work(lens, 16, 8, 528, sm_count=132, order="serpentine")["items"]
    per = round(132 / 8)  # items a round of 132 CTAs holds (16.5, rounded)
    assert sorted(serp) == sorted(longest) and serp[:per] == longest[:per]
    assert serp[per:2 * per] == longest[per:2 * per][::-1] and serp != longest
    assert variants.V7_ORDER == "longest"  # shipped until the GPU call measures serpentine


def test_v7_packed_cases_span_one_two_and_many_sequences_a_cta():
    """The emulated packed cases hold CTA ranges of exactly 1, exactly 2 and 3 or more
    sequences, and sequences cut across 3 or more CTAs."""
    per_cta, per_seq = set(), set()
    for c, _ in PACKED_CASES:
        shape = Shape(**c)
        plan = variants.plan_packed(shape.context_lens, shape.page_size, shape.kv_heads, V7_CAPACITY,
                                    item_cost=variants.packed_item_cost(shape))
        r = plan["ranges"]
        per_cta |= {len({it[0] for it in plan["items"][a:b]}) for a, b in zip(r, r[1:])}
        per_seq |= {it[4] for it in plan["items"]}
    assert {1, 2} <= per_cta and max(per_cta) >= 3 and max(per_seq) >= 3, (per_cta, per_seq)


@pytest.mark.parametrize("spec", ["context=" + ":".join(map(str, ISSUE_RAGGED)), "batch=1,context=131072",
                                  "batch=4,context=32768", "context=1:1:1:40000", "batch=3,context=5",
                                  "context=16:16:16:16:16:16:16:16:16:4000,kv_heads=2"])
@pytest.mark.parametrize("snap", [0, 2, 6])
@pytest.mark.parametrize("cost", [0, 3, 8])
def test_v7_packed_plan_covers_every_page_once_in_equal_ranges(spec, snap, cost):
    shape = problem.parse_shape(spec)
    plan = variants.plan_packed(shape.context_lens, shape.page_size, shape.kv_heads, 528, snap, cost)
    _packed_covering(shape, plan, 528, snap, cost)


def test_v7_packed_on_the_issue_batch_evens_the_largest_cta():
    """The issue's 16 lengths: 6,164 pages a KV head over 66 CTAs (one wave of 528): the
    largest CTA 94 pages (tokens: 108, 86 % of the ceiling measured = mean / max)."""
    plan = variants.plan_packed(ISSUE_RAGGED, 16, 8, 528, item_cost=0)
    tokens = variants.plan_work(ISSUE_RAGGED, 16, 8, 528)
    total = sum(-(-c // 16) for c in ISSUE_RAGGED)
    assert plan["ctas"] == 66 and plan["waves"] == 1
    assert plan["pages_per_cta"] == -(-total // 66) and tokens["chunk_pages"] == 108


def test_v7_packed_item_cost_gives_ctas_of_several_items_fewer_pages():
    """The issue's 16 lengths with V7_PACK_ITEM_COST 3: the CTA of the short sequences (4
    items and 93 pages with equal pages) gets fewer pages, so that the largest CTA in pages
    plus 3 an item is 98 rather than 105; one sequence (b1) keeps the token plan's parts."""
    def worst(plan, cost):
        r = plan["ranges"]
        return max(sum(p1 - p0 + cost for _, p0, p1, *_ in plan["items"][a:b]) for a, b in zip(r, r[1:]))

    equal = variants.plan_packed(ISSUE_RAGGED, 16, 8, 528, item_cost=0)
    costed = variants.plan_packed(ISSUE_RAGGED, 16, 8, 528, item_cost=3)
    assert variants.V7_PACK_ITEM_COST == 3
    assert (worst(equal, 3), worst(costed, 3)) == (105, 98)
    assert [variants.packed_item_cost(Shape(dtype=d)) for d in ("fp16", "bf16", "fp8", "fp32")] == [3, 3, 6, 1]
    assert costed["pages_per_cta"] == 95 and costed["min_pages_per_cta"] < 90
    b1 = variants.plan_packed([131072], 16, 8, 528)
    tokens = variants.plan_work([131072], 16, 8, 528)
    assert sorted(it[1:3] for it in b1["items"]) == sorted(it[1:3] for it in tokens["items"])


def test_v7_packed_snap_moves_cuts_onto_sequence_ends():
    """A cut 1 page past a sequence end moves onto it with snap 2 (no 1-page segment), not
    with snap 0."""
    lens = [16 * 41] + [16 * 40] * 3  # 161 pages, 8 CTAs of ~20: the first cut at 20
    cap = 8
    exact = variants.plan_packed(lens, 16, 1, cap, 0, 0)
    snapped = variants.plan_packed(lens, 16, 1, cap, 2, 0)
    smallest = lambda plan: min(p1 - p0 for _, p0, p1, *_ in plan["items"])  # noqa: E731
    assert smallest(exact) == 1 and smallest(snapped) > 2


def test_merge_list_names_each_sequence_of_several_parts_once():
    shape = Shape(batch=len(ISSUE_RAGGED), context=ISSUE_RAGGED)
    for plan in (variants.plan_work(shape.context_lens, 16, 8, 528),
                 variants.plan_packed(shape.context_lens, 16, 8, 528, item_cost=3)):
        merges = variants.merge_list(plan["items"])
        parts = {}
        for it in plan["items"]:
            parts.setdefault(it[0], set()).add((it[4], it[5]))
        want = sorted((b, base, n) for b, ps in parts.items() for n, base in ps if n > 1)
        assert [tuple(m[:3]) for m in merges] == want and len(merges) == plan["multi_part"]
        assert (merges[:, 3] == 0).all() and merges.shape[1] == variants.MERGE_INTS


@pytest.mark.parametrize("spec, merge", [
    ("batch=1,context=131072", "kernel"), ("batch=4,context=32768", "fused"), ("batch=2,context=131072", "kernel"),
    ("context=" + ":".join(map(str, ISSUE_RAGGED)), "fused"), ("batch=32,context=8192,q_heads=64", "fused"),
])
def test_v7_merges_in_a_kernel_where_a_sequence_has_32_parts_or_more(spec, merge):
    from paprof_kernels.paged_decode.problem import parse_shape

    shape = parse_shape(spec)
    for plan in (variants.plan_work(shape.context_lens, 16, 8, 528),
                 variants.plan_packed(shape.context_lens, 16, 8, 528, item_cost=3)):
        assert variants.v7_merge(plan) == merge, plan["max_parts"]
        forced = "fused" if merge == "kernel" else "kernel"  # a tuning's MERGE forces either
        assert variants.v7_merge(plan, {"MERGE": forced}) == forced
    assert variants.V7_MERGE_KERNEL_PARTS == 32  # the rule ships
