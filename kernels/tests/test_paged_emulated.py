"""v5/v6's tensor-core kernel (paged_decode/v5_mma.cu, the register feed) run on the CPU by
kernels/tests/paged_emu (no GPU): the .cu source compiled unchanged, with the launcher's own
-D values (``variants.fast_defines``), against host stand-ins for every CUDA builtin and
PTX instruction it uses (mma.sync, cvt's packings, shuffles, votes, byte permutes; from
the PTX ISA's definitions), then checked against the family's float64 reference. Every
load of the register feed must lie inside the K or V cache and is recorded: the bytes the
kernel read must be exactly the K and V of the tokens it attends over (the work model's
bytes), so a stride, page or head offset that reads the wrong rows fails even where the
values it finds happen to be finite. AddressSanitizer watches every other access.

fp16 and bf16 (passing on the H200) check the emulation itself; fp8 is what it was built
for: its first GPU run failed (rel 1.5, faster than the read ceiling) on a byte stride
written for 2-byte elements."""

from __future__ import annotations

import functools
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from paprof_kernels.paged_decode import FAMILY, problem, variants
from paprof_kernels.paged_decode.problem import Shape
from paprof.measure.kernels import harness

try:
    from emu_build import GXX, build_driver
    from v7_cases import EDGE_RAGGED, PACKED_CASES, SCALED_RAGGED, V7_CAPACITY, _packed_covering, _spans
except ImportError:  # tests/ as a package
    from tests.emu_build import GXX, build_driver
    from tests.v7_cases import EDGE_RAGGED, PACKED_CASES, SCALED_RAGGED, V7_CAPACITY, _packed_covering, _spans

HERE = Path(__file__).resolve().parent / "paged_emu"
FOLDER = Path(problem.__file__).resolve().parent
pytestmark = [pytest.mark.emulation, pytest.mark.skipif(GXX is None, reason="g++ is not on PATH")]


@functools.lru_cache(maxsize=None)
def driver(defines: tuple, build: Path, folder: Path = FOLDER) -> Path:
    exe = build / (f"{folder.name}-" + "-".join(f"{k}{v}" for k, v in defines))
    return build_driver(HERE / "driver.cpp", exe, {"PAGED_EMULATE": None, **dict(defines)}, [folder, HERE])


@pytest.fixture(scope="module")
def build(tmp_path_factory):
    return tmp_path_factory.mktemp("paged_emu")


def launch_config(shape: Shape, vid: str, tuning: dict | None = None):
    """(defines, splits or work items, threads, shared-memory bytes, partial rows, work list)
    as v5/v6/v7's builder would launch it (v6 with shape.num_splits splits, v7 planned for
    V7_CAPACITY slots: the emulation has no device to choose them)."""
    items, worklist = None, 0
    if vid == "v7":
        plan = variants.plan_work(shape.context_lens, shape.page_size, shape.kv_heads, V7_CAPACITY,
                                  shape.chunk_pages)
        items = variants.work_array(plan["items"])
        name, split, splits, rows = variants.V7_KERNEL, True, len(items), plan["part_slots"] * shape.q_heads
        parts, worklist = plan["max_parts"], 1
    elif vid == "v7packed":
        plan = variants.plan_packed(shape.context_lens, shape.page_size, shape.kv_heads, V7_CAPACITY,
                                    item_cost=variants.packed_item_cost(shape))
        items = variants.packed_array(plan)
        name, split, splits, rows = variants.V7_PACKED_KERNEL, True, plan["ctas"], plan["part_slots"] * shape.q_heads
        parts, worklist = plan["max_parts"], 2
    else:
        splits = (shape.num_splits or 1) if vid == "v6" else 1
        split, rows, parts = splits > 1, shape.batch * shape.q_heads * splits, splits
        name = "paged_decode_v6_split" if split else ("paged_decode_v6_nosplit" if vid == "v6" else "paged_decode_v5")
    defines = {**variants.fast_defines(shape, split, name, worklist=worklist), **(tuning or {})}
    assert defines.get("FEED") == 1, "the emulation runs the register feed"
    smem = variants.fast_smem(defines)
    if split:
        smem = max(smem, variants.merge_smem(defines["WARPS"], shape.group, shape.head_dim, parts))
    return defines, splits, defines["WARPS"] * 32, smem, rows, items


def run_emulated(vid: str, shape: Shape, build: Path, tuning: dict | None = None, seed: int = 5,
                 folder: Path = FOLDER, cta_order: str = ""):
    """The kernel's output, the K and V bytes it read, its split counters after the run (the
    CTAs in y order, or ``cta_order`` "odd-first": the driver's PAGED_EMU_CTA_ORDER)."""
    defines, splits, threads, smem, rows, items = launch_config(shape, vid, tuning)
    exe = driver(tuple(sorted(defines.items())), build, folder)
    inputs = problem.make_inputs(shape, seed, xp=np)
    cache_bytes = inputs["key_cache"].nbytes
    header = np.array([shape.batch, shape.q_heads, shape.kv_heads, shape.pages_per_seq, shape.num_pages, splits,
                       threads, smem, cache_bytes, rows], dtype=np.int32)
    src, dst = build / f"in-{vid}-{shape.slug()}", build / f"out-{vid}-{shape.slug()}"
    with open(src, "wb") as fh:
        fh.write(header.tobytes())
        fh.write(np.float32(shape.scale).tobytes())
        for name in (*problem.INPUT_NAMES, *problem.FP8_SCALE_NAMES):
            if name in inputs:
                fh.write(np.ascontiguousarray(inputs[name]).tobytes())
        if items is not None:
            fh.write(np.ascontiguousarray(items, dtype=np.int32).tobytes())
    env = {**os.environ, "PAGED_EMU_CTA_ORDER": cta_order}
    done = subprocess.run([str(exe), str(src), str(dst)], capture_output=True, text=True, timeout=900, env=env)
    assert done.returncode == 0, done.stderr[-4000:]
    raw = dst.read_bytes()
    n_out = shape.batch * shape.q_heads * shape.head_dim * 4
    out = np.frombuffer(raw[:n_out], dtype=np.float32).reshape(shape.batch, shape.q_heads, shape.head_dim)
    seen = np.frombuffer(raw[n_out:n_out + 2 * cache_bytes], dtype=np.uint8).reshape(2, cache_bytes)
    counters = np.frombuffer(raw[n_out + 2 * cache_bytes:], dtype=np.int32)
    return inputs, out, seen, counters


def attended_bytes(shape: Shape, inputs: dict) -> np.ndarray:
    """1 for every cache byte of a token some sequence attends over (every KV head), as
    [num_pages, page_size, kv_heads, head_dim x elem_bytes] flattened."""
    mask = np.zeros((shape.num_pages, shape.page_size), dtype=np.uint8)
    for b, ctx in enumerate(shape.context_lens):
        for t in range(ctx):
            mask[inputs["block_tables"][b, t // shape.page_size], t % shape.page_size] = 1
    row = shape.kv_heads * shape.head_dim * shape.elem_bytes
    return np.repeat(mask.reshape(-1), row)


def check_emulated(vid: str, shape: Shape, build: Path, tuning: dict | None = None, folder: Path = FOLDER,
                   cta_order: str = ""):
    inputs, out, seen, counters = run_emulated(vid, shape, build, tuning, folder=folder, cta_order=cta_order)
    want = attended_bytes(shape, inputs)
    for name, got in zip(("K", "V"), seen):
        wrong = np.flatnonzero(got != want)
        row = shape.kv_heads * shape.head_dim * shape.elem_bytes
        assert wrong.size == 0, (
            f"{name}: {wrong.size} cache bytes read that should not be or not read that should "
            f"(first at byte {wrong[0]}: token row {wrong[0] // row}, byte {wrong[0] % row} of the row; "
            f"{int(got.sum())} read, {int(want.sum())} attended)")
    assert (counters == 0).all(), "the split counters must be back at 0 for the next launch"
    check = harness.compare(out, FAMILY.reference(shape, inputs, np), FAMILY.tolerance_for(shape), np)
    assert check.passed, (f"{vid} {shape.slug()}: rel {check.rel_error:.3g} max abs {check.max_abs_error:.3g}, "
                          f"{int(np.isnan(out).sum())} NaN outputs")
    return check


CASES = [
    # (variant, shape): fp8 first: both head dims, a step's second tile past the end (16),
    # partial tiles, pages smaller and larger than a tile, GQA ratios, splits (some empty)
    ("v5", dict(batch=4, q_heads=8, kv_heads=2, context=(1, 16, 17, 100), dtype="fp8")),
    ("v5", dict(batch=3, q_heads=4, kv_heads=4, head_dim=64, context=(15, 33, 70), dtype="fp8")),
    ("v5", dict(batch=3, q_heads=16, kv_heads=2, page_size=8, context=(1, 9, 77), dtype="fp8")),
    ("v5", dict(batch=2, q_heads=2, kv_heads=2, page_size=32, context=(31, 97), dtype="fp8")),
    ("v5", dict(batch=2, q_heads=2, kv_heads=1, page_size=4, context=(5, 50), dtype="fp8")),
    ("v6", dict(batch=3, q_heads=4, kv_heads=2, context=(1, 17, 300), num_splits=3, dtype="fp8")),
    ("v6", dict(batch=2, q_heads=8, kv_heads=1, context=(20, 260), num_splits=16, dtype="fp8")),
    ("v6", dict(batch=2, q_heads=4, kv_heads=2, context=(40, 129), dtype="fp8")),  # v6 without splits
    ("v5", dict(batch=1, q_heads=2, kv_heads=1, context=(4112,), dtype="fp8")),  # a 256-page chunk + 1 page
    # the emulation against the 16-bit feed the H200 passes
    ("v5", dict(batch=3, q_heads=8, kv_heads=2, context=(1, 17, 100), dtype="fp16")),
    ("v5", dict(batch=2, q_heads=4, kv_heads=2, head_dim=64, page_size=8, context=(9, 40), dtype="bf16")),
    ("v6", dict(batch=2, q_heads=4, kv_heads=2, context=(17, 200), num_splits=3, dtype="fp16")),
]


@pytest.mark.parametrize("vid, shape", CASES, ids=lambda c: c if isinstance(c, str) else Shape(**c).slug())
def test_kernel_matches_the_reference_reading_exactly_its_tokens(build, vid, shape):
    check_emulated(vid, Shape(**shape), build)


@pytest.mark.parametrize("tuning", [{"TSUB": 1}, {"TSUB": 2, "WARPS": 2}, {"TSUB": 2, "FEED_HINT": 0, "WARPS": 4}],
                         ids=lambda t: "-".join(f"{k}{v}" for k, v in t.items()))
def test_fp8_tunings_that_tune_v5_tries(build, tuning):
    check_emulated("v5", Shape(batch=2, q_heads=8, kv_heads=2, context=(33, 150), dtype="fp8"), build, tuning)


def test_fp8_head_scales_are_each_heads_own(build):
    """Heads of very different ranges (1x to 8x): a kernel using one head's scale for
    another would be far off."""
    shape = Shape(batch=1, q_heads=4, kv_heads=4, head_dim=64, context=(50,), dtype="fp8")
    inputs, out, _, _ = run_emulated("v5", shape, build)
    ref = FAMILY.reference(shape, inputs, np)
    assert inputs["k_scale"].max() / inputs["k_scale"].min() > 1.2
    assert harness.compare(out, ref, FAMILY.tolerance_for(shape), np).passed


def test_a_wrong_stride_is_caught(build):
    """Not vacuous: the kernel as first written for fp8 (the row stride and head offset in
    bytes of 2-byte elements) fails here, through the bytes it reads."""
    source = (FOLDER / "v5_mma.cu").read_text()
    fixed = ("static_cast<size_t>(kv_heads) * ROW_BYTES;", "static_cast<size_t>(kvh) * ROW_BYTES;")
    assert all(line in source for line in fixed)
    broken = build / "broken"
    broken.mkdir(exist_ok=True)
    for name in ("common.cuh", "fast_common.cuh"):
        (broken / name).write_text((FOLDER / name).read_text())
    for line in fixed:
        source = source.replace(line, line.replace("ROW_BYTES", "HEAD_DIM * 2"))
    (broken / "v5_mma.cu").write_text(source)
    with pytest.raises(AssertionError, match="emulation: (a load|register-feed load)|cache bytes read"):
        check_emulated("v5", Shape(batch=2, q_heads=4, kv_heads=2, context=(40, 70), dtype="fp8"), build,
                       folder=broken)


# -- v7: the work list (token-balanced chunks, longest first, one-part sequences direct) -------


V7_CASES = [
    dict(batch=16, q_heads=8, kv_heads=2, context=SCALED_RAGGED, dtype="fp16"),
    dict(batch=16, q_heads=4, kv_heads=4, head_dim=64, context=SCALED_RAGGED, dtype="bf16"),  # group 1
    dict(batch=6, q_heads=16, kv_heads=2, context=EDGE_RAGGED, dtype="fp8"),  # groups of 8
    dict(batch=6, q_heads=4, kv_heads=4, head_dim=64, context=EDGE_RAGGED, chunk_pages=8,
         dtype="fp8"),  # group 1, d64 (24 CTAs fill the 24 slots: the chunk given)
    dict(batch=6, q_heads=16, kv_heads=2, head_dim=64, page_size=8, context=EDGE_RAGGED, chunk_pages=3,
         dtype="fp16"),  # pages smaller than a tile, a chunk that is not a tile multiple
    dict(batch=1, q_heads=8, kv_heads=2, context=(2000,), dtype="fp16"),  # one sequence, many parts
    dict(batch=4, q_heads=8, kv_heads=2, page_size=32, context=(31, 33, 1000, 97), dtype="bf16"),
    dict(batch=4, q_heads=4, kv_heads=1, context=(1, 15, 16, 17), dtype="fp8"),  # every sequence one part
]


@pytest.mark.parametrize("shape", V7_CASES, ids=lambda c: Shape(**c).slug())
def test_v7_work_list_matches_the_reference_reading_exactly_its_tokens(build, shape):
    shape = Shape(**shape)
    plan = variants.plan_work(shape.context_lens, shape.page_size, shape.kv_heads, V7_CAPACITY, shape.chunk_pages)
    parts = [it[4] for it in plan["items"]]
    if shape.batch > 4:  # the ragged cases: sequences of one part beside sequences of several
        assert min(parts) == 1 and max(parts) >= 2, plan
    check_emulated("v7", shape, build)


def broken_common(build: Path, name: str, line: str, replacement: str) -> Path:
    """A copy of the family's kernels in build/name whose fast_common.cuh has ``line`` (which
    must be there) replaced: a folder for check_emulated, to show a test is not vacuous."""
    common = (FOLDER / "fast_common.cuh").read_text()
    assert line in common
    broken = build / name
    broken.mkdir(exist_ok=True)
    (broken / "fast_common.cuh").write_text(common.replace(line, replacement))
    for other in ("common.cuh", "v5_mma.cu"):
        (broken / other).write_text((FOLDER / other).read_text())
    return broken


def test_a_kernel_ignoring_its_item_is_caught(build):
    """Not vacuous: a kernel that starts every CTA at its sequence's first page (the item's
    first page ignored) fails here, through the CTA's item and the bytes it reads."""
    line = "const int b = item[0], p_begin = item[1], p_end = item[2];"
    broken = broken_common(build, "broken-item", line, line.replace("item[1]", "0"))
    with pytest.raises(AssertionError, match="outside the CTA's work item|cache bytes read"):
        check_emulated("v7", Shape(batch=2, q_heads=4, kv_heads=2, context=(40, 400), dtype="fp16"), build,
                       folder=broken)


@pytest.mark.parametrize("vid, dtype, tuning", [("v7", "fp16", {"TSUB": 2}), ("v6", "fp16", {"TSUB": 2, "WARPS": 2}),
                                                ("v7", "fp8", {"TSUB": 4}), ("v6", "fp8", {"TSUB": 2, "WARPS": 2}),
                                                ("v6", "fp8", {"TSUB": 4, "WARPS": 2}),
                                                ("v6", "fp8", {"TSUB": 2, "WARPS": 4}), ("v6", "bf16", {"WARPS": 3})],
                         ids=lambda t: t if isinstance(t, str) else "-".join(f"{k}{v}" for k, v in t.items()))
def test_group_1_head_dim_64_tunings_that_tune_v5_tries(build, vid, dtype, tuning):
    # kernels/scripts/tune_v5.py's D64 entries (16-bit caches at two tiles a step, fp8 at four; the
    # decode7 stage's fp8 at 2 and 4 warps, bf16 at FAST_TUNING's 3 against its d64 2)
    shape = Shape(batch=3, q_heads=4, kv_heads=4, head_dim=64, context=(16, 33, 300), dtype=dtype,
                  **({"num_splits": 3} if vid == "v6" else {"chunk_pages": 4}))
    check_emulated(vid, shape, build, tuning)


# -- v7 packed: equal page ranges a CTA over the concatenated sequences -----------------------


@pytest.mark.parametrize("shape, spans", PACKED_CASES, ids=lambda c: c if isinstance(c, str) else Shape(**c).slug())
def test_v7_packed_matches_the_reference_reading_exactly_its_tokens(build, shape, spans):
    shape = Shape(**shape)
    cost = variants.packed_item_cost(shape)
    plan = variants.plan_packed(shape.context_lens, shape.page_size, shape.kv_heads, V7_CAPACITY, item_cost=cost)
    _packed_covering(shape, plan, V7_CAPACITY, variants.V7_PACK_SNAP, cost)
    per_cta, per_seq = _spans(plan)
    one = any(len({it[0] for it in plan["items"][a:b]}) == 1 for a, b in zip(plan["ranges"], plan["ranges"][1:]))
    assert {"many": per_cta >= 3, "split3": per_seq >= 3 and one, "two": per_cta >= 2}[spans], (per_cta, per_seq)
    check_emulated("v7packed", shape, build)


def test_v7_packed_cta_owing_two_merges(build):
    """In y order the last CTA of a sequence's parts is its highest, so a CTA owes at most
    the merge of its first segment's sequence; with the odd CTAs first, an even CTA is the
    last of both the sequence it ends and the one it starts (two parts each): both merges
    after its last item (packed_merges' list of two)."""
    shape = Shape(batch=6, q_heads=8, kv_heads=2, context=(200,) * 6, dtype="fp16")
    plan = variants.plan_packed(shape.context_lens, 16, 2, V7_CAPACITY, item_cost=variants.packed_item_cost(shape))
    r, items = plan["ranges"], plan["items"]
    ctas_of: dict = {}
    for k in range(plan["ctas"]):
        for it in items[r[k]:r[k + 1]]:
            ctas_of.setdefault(it[0], []).append(k)
    rank = {k: (k % 2 == 0, k) for k in range(plan["ctas"])}  # the driver's odd-first order
    owed = [max(cs, key=rank.get) for cs in ctas_of.values() if len(cs) > 1]
    assert max(owed.count(k) for k in owed) == 2, (plan, owed)
    check_emulated("v7packed", shape, build, cta_order="odd-first")
    # not vacuous: a kernel that merges only the last sequence listed passes in y order and
    # fails here
    broken = broken_common(build, "broken-merges", "if (threadIdx.x == 0) list.count = k;",
                           "if (threadIdx.x == 0) list.count = 0;")
    check_emulated("v7packed", shape, build, folder=broken)
    with pytest.raises(AssertionError, match="NaN"):
        check_emulated("v7packed", shape, build, folder=broken, cta_order="odd-first")


def test_a_packed_kernel_taking_one_item_a_cta_is_caught(build):
    """Not vacuous: a packed kernel that stops after its CTA's first item leaves outputs
    unwritten and tokens unread."""
    broken = broken_common(build, "broken-packed", "item_index = packed_next_item())", "item_index = -1)")
    with pytest.raises(AssertionError, match="cache bytes read|NaN|rel"):
        check_emulated("v7packed", Shape(batch=6, q_heads=4, kv_heads=2, context=EDGE_RAGGED, dtype="fp16"), build,
                       folder=broken)


# -- v7 with its merges in a kernel of their own (V7_MERGE "kernel": DEFER_MERGE 1) -----------

DEFERRED_CASES = [
    ("v7", V7_CASES[0]), ("v7", V7_CASES[2]), ("v7", V7_CASES[3]), ("v7", V7_CASES[4]), ("v7", V7_CASES[5]),
    ("v7", V7_CASES[7]),  # every sequence one part: no merge kernel CTA at all
    ("v7packed", PACKED_CASES[0][0]), ("v7packed", PACKED_CASES[2][0]), ("v7packed", PACKED_CASES[3][0]),
]


@pytest.mark.parametrize("vid, shape", DEFERRED_CASES,
                         ids=lambda c: c if isinstance(c, str) else Shape(**c).slug())
def test_v7_deferred_merge_matches_the_reference_reading_exactly_its_tokens(build, vid, shape):
    """The streaming kernel writes only partials (no fence, no counter) and
    paged_decode_v7_merge, run after the whole grid as the launcher enqueues it, merges every
    sequence of several parts: groups 1 / 4 / 8, d64 / d128, fp16 / fp8, token and packed
    plans, pages smaller than a tile."""
    check_emulated(vid, Shape(**shape), build, {"DEFER_MERGE": 1})


def test_a_merge_kernel_dropping_a_part_is_caught(build):
    """Not vacuous: a merge kernel that leaves out every sequence's last part fails here."""
    line = "const int b = mg[0], parts = mg[2];"
    broken = broken_common(build, "broken-merge", line, line.replace("mg[2]", "mg[2] - 1"))
    with pytest.raises(AssertionError, match="rel"):
        check_emulated("v7", Shape(batch=2, q_heads=4, kv_heads=2, context=(40, 400), dtype="fp16"), build,
                       {"DEFER_MERGE": 1}, folder=broken)


