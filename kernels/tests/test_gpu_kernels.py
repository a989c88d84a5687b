"""Every variant against the float64 reference on the GPU (skips itself without one).

Fresh random inputs every run; the output is poisoned with NaN before each launch.
"""

from __future__ import annotations

import pytest

from paprof import registry
from paprof.errors import ShapeError
from paprof.measure.kernels import harness
from paprof_kernels.paged_decode.problem import Shape

pytestmark = pytest.mark.gpu

ALL = [v.id for v in registry.variants("paged_decode")]
RAGGED = (1, 15, 16, 17, 1000, 4096)


def check(variant_id, shape, tuning=None):
    """``variant_id`` at ``shape`` verified against the reference (``tuning``: built as
    ``catalog.tuned`` makes it)."""
    variant = registry.get(variant_id, "paged_decode")
    if tuning:
        from paprof_kernels.paged_decode import catalog

        variant = catalog.tuned(variant, tuning)
    try:
        variant.check(shape)
    except ShapeError as err:
        pytest.skip(f"{variant_id} does not take this shape: {err}")
    prep = harness.prepare(registry.family("paged_decode"), variant, shape)
    result = harness.verify(prep)
    assert result.passed, describe_failure(prep, result)
    return prep


def describe_failure(prep, result) -> str:
    """What a failed check looks like: the overall error, the NaN / inf count, and the
    error of each sequence (its length) and of each KV head, worst first, so that a wrong
    page, head, tail or split shows in the one line pytest prints."""
    import cupy as cp
    import numpy as np

    shape = prep.params
    head = (f"{prep.variant.id} {shape.slug()} {dict(prep.launcher.details)}: rel {result.rel_error:.3g} "
            f"max abs {result.max_abs_error:.3g} (tolerance {result.tolerance:g})")
    try:
        out = cp.asnumpy(prep.out).astype(np.float64)
        ref = cp.asnumpy(prep.family.reference(shape, prep.inputs[0], cp)).astype(np.float64)
    except Exception as err:  # a launch that broke the context (illegal address): say so
        return f"{head}; the output cannot be read back: {type(err).__name__}: {err}"
    bad = ~np.isfinite(out)
    diff = np.where(bad, 0.0, out - ref)

    def rel(axes):
        return np.sqrt((diff**2).sum(axis=axes) / np.maximum((ref**2).sum(axis=axes), 1e-300))

    lens = shape.context_lens
    per_seq = rel((1, 2))
    per_kv = rel((0, 2)).reshape(shape.kv_heads, shape.group).max(axis=1)
    worst_seq = ", ".join(f"b{b} (ctx {lens[b]}, {int(bad[b].sum())} non-finite): {per_seq[b]:.2g}"
                          for b in np.argsort(-per_seq)[:4])
    worst_kv = ", ".join(f"kv{h}: {per_kv[h]:.2g}" for h in np.argsort(-per_kv)[:4])
    return (f"{head}; {int(bad.sum())} of {out.size} outputs non-finite; worst sequences {worst_seq}; "
            f"worst KV heads {worst_kv}")


@pytest.mark.parametrize("vid", ALL)
def test_ragged_contexts(vid):
    check(vid, Shape(batch=len(RAGGED), context=RAGGED))


@pytest.mark.parametrize("vid", ALL)
def test_main_shape(vid):
    check(vid, Shape(batch=64, context=1024 if vid == "baseline" else 4096))


@pytest.mark.parametrize("vid", ALL)
@pytest.mark.parametrize("head_dim", [64])
def test_head_dim_64(vid, head_dim):
    check(vid, Shape(batch=4, context=(5, 300, 33, 1024), head_dim=head_dim))


@pytest.mark.parametrize("vid", ALL)
@pytest.mark.parametrize("q_heads, kv_heads", [(8, 8), (32, 8), (64, 8)])
def test_gqa_ratios(vid, q_heads, kv_heads):
    check(vid, Shape(batch=3, q_heads=q_heads, kv_heads=kv_heads, context=(700, 1, 129)))


@pytest.mark.parametrize("vid", ALL)
@pytest.mark.parametrize("page", [8, 16, 32])
def test_page_sizes(vid, page):
    check(vid, Shape(batch=4, page_size=page, context=(1, page - 1, page + 1, 999)))


@pytest.mark.parametrize("vid", ["v4", "v6"])
@pytest.mark.parametrize("splits", [1, 2, 3, 7, 16])
def test_splits_including_more_than_pages(vid, splits):
    # context 17 at page 16 has 2 pages: most splits are empty for the short sequences
    prep = check(vid, Shape(batch=4, context=(1, 17, 200, 2000), num_splits=splits))
    assert prep.launcher.details["num_splits"] == splits


@pytest.mark.parametrize("vid", ["v5", "v6"])
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("head_dim", [64, 128, 256])
def test_half_caches(vid, dtype, head_dim):
    check(vid, Shape(batch=5, head_dim=head_dim, context=RAGGED[1:], dtype=dtype))


@pytest.mark.parametrize("context, batch", [(32768, 4), (131072, 1)])
def test_v6_splits_small_batches(context, batch):
    prep = check("v6", Shape(batch=batch, context=context, dtype="fp16"))
    assert prep.launcher.details["num_splits"] > 1


def test_v6_does_not_split_a_full_batch():
    prep = check("v6", Shape(batch=64, context=4096, dtype="fp16"))
    assert prep.launcher.details["num_splits"] == 1


def test_fresh_inputs_differ_between_runs():
    fam = registry.family("paged_decode")
    a = harness.prepare(fam, registry.get("v2"), Shape(batch=2, context=64))
    b = harness.prepare(fam, registry.get("v2"), Shape(batch=2, context=64))
    assert float(abs(a.inputs[0]["key_cache"] - b.inputs[0]["key_cache"]).max()) > 0


@pytest.mark.parametrize("vid", ["v5", "v6"])
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("page", [4, 8, 32])
def test_half_caches_page_sizes(vid, dtype, page):
    # page 16 is the tensor-core tile: smaller pages split a tile over pages (a table
    # lookup a token), larger ones hold two tiles
    check(vid, Shape(batch=4, page_size=page, context=(1, page - 1, page + 1, 999), dtype=dtype))


@pytest.mark.parametrize("vid", ["v5", "v6"])
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("q_heads, kv_heads", [(8, 8), (16, 8), (64, 8)])
def test_half_caches_gqa_ratios(vid, dtype, q_heads, kv_heads):
    # groups of 1, 2 and 8 heads: the O^T columns past the group are never stored
    check(vid, Shape(batch=3, q_heads=q_heads, kv_heads=kv_heads, context=(700, 1, 129), dtype=dtype))


@pytest.mark.parametrize("vid", ["v5", "v6"])
def test_half_caches_head_dim_32(vid):
    # the cp.async ring (the register feed takes head_dim 64 and 128)
    check(vid, Shape(batch=4, context=(5, 300, 33, 1024), head_dim=32, dtype="fp16"))


@pytest.mark.parametrize("splits", [3, 16])
def test_half_cache_splits_including_more_than_pages(splits):
    prep = check("v6", Shape(batch=4, context=(1, 17, 200, 2000), num_splits=splits, dtype="fp16"))
    assert prep.launcher.details["num_splits"] == splits


# -- fp8 (e4m3) caches: the register feed, two tiles a step, scales folded in ----------------

FP8_RAGGED = (1, 15, 16, 17, 33, 1000, 4096, 4112)  # 16: a step's second tile is past the end;
# 4112: a 256-page chunk of the block table followed by one page


@pytest.mark.parametrize("vid", ["v5", "v6"])
@pytest.mark.parametrize("head_dim", [64, 128])
def test_fp8_caches(vid, head_dim):
    check(vid, Shape(batch=len(FP8_RAGGED), head_dim=head_dim, context=FP8_RAGGED, dtype="fp8"))


@pytest.mark.parametrize("vid", ["v5", "v6"])
@pytest.mark.parametrize("page", [4, 8, 16, 32])
def test_fp8_page_sizes(vid, page):
    check(vid, Shape(batch=5, page_size=page, context=(1, page - 1 or 1, page + 1, 999, 2 * page), dtype="fp8"))


@pytest.mark.parametrize("vid", ["v5", "v6"])
@pytest.mark.parametrize("q_heads, kv_heads, head_dim", [(8, 8, 128), (16, 8, 128), (64, 8, 128), (32, 32, 64)])
def test_fp8_gqa_ratios(vid, q_heads, kv_heads, head_dim):
    check(vid, Shape(batch=3, q_heads=q_heads, kv_heads=kv_heads, head_dim=head_dim, context=(700, 1, 129),
                     dtype="fp8"))


def test_fp8_main_shape():
    check("v5", Shape(batch=64, context=4096, dtype="fp8"))


@pytest.mark.parametrize("context, batch", [(32768, 4), (131072, 1)])
def test_fp8_v6_splits_small_batches(context, batch):
    prep = check("v6", Shape(batch=batch, context=context, dtype="fp8"))
    assert prep.launcher.details["num_splits"] > 1


@pytest.mark.parametrize("splits", [3, 16])
def test_fp8_splits_including_more_than_pages(splits):
    prep = check("v6", Shape(batch=4, context=(1, 17, 200, 2000), num_splits=splits, dtype="fp8"))
    assert prep.launcher.details["num_splits"] == splits


def test_fp8_scales_are_applied_per_kv_head():
    # the same bytes with one head's K and V scales doubled: only that head's outputs move
    prep = check("v5", Shape(batch=2, q_heads=8, kv_heads=4, context=(300, 77), dtype="fp8"))
    first = prep.out.copy()
    for name in ("k_scale", "v_scale"):
        prep.inputs[0][name][2] *= 2
    again = harness.verify(prep)
    assert again.passed, again
    moved = abs(prep.out - first).max(axis=(0, 2)).get()
    assert (moved[4:6] > 0).all() and (moved[:4] == 0).all() and (moved[6:] == 0).all(), moved


# -- v7: the work split by tokens (a work list of chunks, longest first) ---------------------

ISSUE_RAGGED = (17, 300, 1024, 2048, 4000, 4096, 6000, 8192, 9000, 12000, 15000, 16384, 500, 3000, 7000, 10000)


@pytest.mark.parametrize("dtype", ["fp16", "bf16", "fp8", "fp32"])
def test_v7_issue_ragged_batch(dtype):
    prep = check("v7", Shape(batch=len(ISSUE_RAGGED), context=ISSUE_RAGGED, dtype=dtype))
    from paprof.measure.kernels import gpu

    d = prep.launcher.details
    slots = gpu.current_device().sm_count * d["resident_ctas_per_sm"] * d["waves"]
    # variants.v7_path: packed for a ragged 16-bit cache, the token plan otherwise
    if dtype in ("fp16", "bf16"):
        assert d["path"] == "packed" and d["waves"] == 1 and d["ctas"] * 8 <= slots, d
        assert d["work_items"] > d["ctas"] and d["pages_per_cta"] < max(ISSUE_RAGGED) // 16, d
    else:
        assert d["path"] == "tokens" and d["waves"] == 1 and d["work_items"] * 8 <= slots, d
    assert d["multi_part_sequences"] >= 1 and d["num_splits"] > 1, d


V7_FORCED_SPECS = [
    dict(batch=len(ISSUE_RAGGED), context=ISSUE_RAGGED),
    dict(batch=1, context=131072),
    dict(batch=6, context=(1, 15, 16, 17, 3000, 9000), q_heads=64),
    dict(batch=5, context=(1, 1, 1, 1, 40000), q_heads=32, kv_heads=32, head_dim=64),
]
"""Shapes both v7 paths run forced: the ragged batch, b1, groups of 8, group 1 at d64."""


@pytest.mark.parametrize("path", ["tokens", "packed"])
@pytest.mark.parametrize("spec", V7_FORCED_SPECS)
@pytest.mark.parametrize("dtype", ["fp16", "fp8"])
def test_v7_packed_and_tokens_forced(path, spec, dtype):
    # the A/B kernels/scripts/tune_v5.py's PATH knob makes: either path on the same shapes
    prep = check("v7", Shape(**spec, dtype=dtype), {"PATH": path})
    assert prep.launcher.details["path"] == path, prep.launcher.details
    for _ in range(2):  # the counters are back at 0 after each launch
        again = harness.verify(prep)
        assert again.passed, again


@pytest.mark.parametrize("merge", ["kernel", "fused"])
@pytest.mark.parametrize("path", ["tokens", "packed"])
@pytest.mark.parametrize("spec", [*V7_FORCED_SPECS, dict(batch=3, context=(5000, 20, 9000), head_dim=256)])  # d256: the ring
@pytest.mark.parametrize("dtype", ["fp16", "fp8", "fp32"])
def test_v7_merge_kernel_or_fused(merge, path, spec, dtype):
    # kernels/scripts/tune_v5.py's MERGE knob: the merges in paged_decode_v7_merge after the
    # streaming kernel (two kernels a step), or fused into the last CTA of a sequence's parts
    if spec.get("head_dim") == 256 and dtype == "fp8":
        pytest.skip("fp8 caches take head_dim 64 and 128")
    if merge == "fused" and dtype != "fp16":
        pytest.skip("the fused merge of fp8 and fp32: test_v7_packed_and_tokens_forced, test_v7_issue_ragged_batch")
    prep = check("v7", Shape(**spec, dtype=dtype), {"MERGE": merge, "PATH": path})
    names = [k.name for k in prep.launcher.kernels]
    assert (names[-1] == "paged_decode_v7_merge") == (merge == "kernel") and len(names) == 1 + (merge == "kernel")
    assert prep.launcher.details.get("merge", "fused") == merge
    for _ in range(2):  # launch after launch (fused: the counters are back at 0)
        again = harness.verify(prep)
        assert again.passed, again


@pytest.mark.parametrize("knob, key, value", [("SNAP", "snap", 0), ("SNAP", "snap", 8), ("COST", "item_cost", 0)])
def test_v7_packed_snap_and_item_cost(knob, key, value):
    # PATH packed: the rule takes it for ragged 16-bit batches only
    prep = check("v7", Shape(batch=len(ISSUE_RAGGED), context=ISSUE_RAGGED, dtype="bf16"), {knob: value, "PATH": "packed"})
    assert prep.launcher.details["path"] == "packed" and prep.launcher.details[key] == value


@pytest.mark.parametrize("dtype", ["fp16", "fp8"])
@pytest.mark.parametrize("spec, path", [
    (dict(batch=64, context=4096), "direct"),
    (dict(batch=4, context=32768), "tokens"),
    (dict(batch=1, context=131072), "tokens"),
    (dict(batch=32, context=8192, q_heads=64), "tokens"),
])
def test_v7_issue_shapes(dtype, spec, path):
    prep = check("v7", Shape(**spec, dtype=dtype))
    assert prep.launcher.details["path"] == path, prep.launcher.details


def test_v7_group_1_head_dim_64():
    prep = check("v7", Shape(batch=64, context=4096, q_heads=32, kv_heads=32, head_dim=64, dtype="fp16"))
    assert prep.launcher.details["path"] == "direct"


@pytest.mark.parametrize("dtype", ["fp16", "bf16", "fp8"])
@pytest.mark.parametrize("q_heads, kv_heads, head_dim", [(8, 8, 128), (32, 8, 128), (64, 8, 128), (32, 32, 64),
                                                         (64, 8, 64)])
def test_v7_ragged_groups_and_head_dims(dtype, q_heads, kv_heads, head_dim):
    # lengths 1, 15, 16, 17 (one part each) beside sequences cut into many parts
    check("v7", Shape(batch=7, q_heads=q_heads, kv_heads=kv_heads, head_dim=head_dim,
                      context=(1, 15, 16, 17, 3000, 9000, 20000), dtype=dtype))


@pytest.mark.parametrize("chunk", [1, 3, 8, 16, 64, 300, 4096])
def test_v7_chunks_given(chunk):
    # chunk 1: a part a page (many parts a sequence); 4096: every sequence one part
    prep = check("v7", Shape(batch=5, context=(1, 17, 200, 2000, 5000), chunk_pages=chunk, dtype="fp16"))
    d = prep.launcher.details
    assert d["chunk_pages"] == chunk and d["path"] == "tokens", d
    assert d["num_splits"] == -(-(-(-5000 // 16)) // chunk), d


@pytest.mark.parametrize("page", [4, 8, 32])
@pytest.mark.parametrize("dtype", ["fp16", "fp8", "fp32"])
def test_v7_page_sizes(page, dtype):
    check("v7", Shape(batch=5, page_size=page, context=(1, page - 1 or 1, page + 1, 999, 12000), dtype=dtype))


@pytest.mark.parametrize("head_dim", [32, 256])
def test_v7_ring_head_dims(head_dim):
    # the cp.async ring of v5_mma.cu (head_dim 32, 256) under the work list
    check("v7", Shape(batch=4, context=(5, 300, 33, 20000), head_dim=head_dim, dtype="fp16"))


def test_v7_repeated_launches_leave_the_counters_at_zero():
    prep = check("v7", Shape(batch=3, context=(40, 70000, 9), dtype="fp16"))
    for _ in range(3):
        again = harness.verify(prep)
        assert again.passed, again
