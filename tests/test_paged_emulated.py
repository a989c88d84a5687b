"""v5/v6's tensor-core kernel (paged_decode/v5_mma.cu, the register feed) run on the CPU by
tests/paged_emu (no GPU): the .cu source compiled unchanged, with the launcher's own
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
import subprocess
from pathlib import Path

import numpy as np
import pytest

from paprof.families.paged_decode import FAMILY, problem, variants
from paprof.families.paged_decode.problem import Shape
from paprof.kernels import harness

try:
    from emu_build import GXX, build_driver
except ImportError:  # tests/ as a package
    from tests.emu_build import GXX, build_driver

HERE = Path(__file__).resolve().parent / "paged_emu"
FOLDER = Path(problem.__file__).resolve().parent
pytestmark = pytest.mark.skipif(GXX is None, reason="g++ is not on PATH")


@functools.lru_cache(maxsize=None)
def driver(defines: tuple, build: Path, folder: Path = FOLDER) -> Path:
    exe = build / (f"{folder.name}-" + "-".join(f"{k}{v}" for k, v in defines))
    return build_driver(HERE / "driver.cpp", exe, {"PAGED_EMULATE": None, **dict(defines)}, [folder, HERE])


@pytest.fixture(scope="module")
def build(tmp_path_factory):
    return tmp_path_factory.mktemp("paged_emu")


def launch_config(shape: Shape, vid: str, tuning: dict | None = None):
    """(defines, splits, threads, shared-memory bytes) as v5/v6's builder would launch it
    (v6 with shape.num_splits splits: the emulation has no device to choose them)."""
    splits = (shape.num_splits or 1) if vid == "v6" else 1
    split = splits > 1
    name = "paged_decode_v6_split" if split else ("paged_decode_v6_nosplit" if vid == "v6" else "paged_decode_v5")
    defines = {**variants.fast_defines(shape, split, name), **(tuning or {})}
    assert defines.get("FEED") == 1, "the emulation runs the register feed"
    smem = variants.fast_smem(defines)
    if split:
        smem = max(smem, variants.merge_smem(defines["WARPS"], shape.group, shape.head_dim, splits))
    return defines, splits, defines["WARPS"] * 32, smem


def run_emulated(vid: str, shape: Shape, build: Path, tuning: dict | None = None, seed: int = 5,
                 folder: Path = FOLDER):
    """The kernel's output, the K and V bytes it read, its split counters after the run."""
    defines, splits, threads, smem = launch_config(shape, vid, tuning)
    exe = driver(tuple(sorted(defines.items())), build, folder)
    inputs = problem.make_inputs(shape, seed, xp=np)
    cache_bytes = inputs["key_cache"].nbytes
    header = np.array([shape.batch, shape.q_heads, shape.kv_heads, shape.pages_per_seq, shape.num_pages, splits,
                       threads, smem, cache_bytes], dtype=np.int32)
    src, dst = build / f"in-{vid}-{shape.slug()}", build / f"out-{vid}-{shape.slug()}"
    with open(src, "wb") as fh:
        fh.write(header.tobytes())
        fh.write(np.float32(shape.scale).tobytes())
        for name in (*problem.INPUT_NAMES, *problem.FP8_SCALE_NAMES):
            if name in inputs:
                fh.write(np.ascontiguousarray(inputs[name]).tobytes())
    done = subprocess.run([str(exe), str(src), str(dst)], capture_output=True, text=True, timeout=900)
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


def check_emulated(vid: str, shape: Shape, build: Path, tuning: dict | None = None, folder: Path = FOLDER):
    inputs, out, seen, counters = run_emulated(vid, shape, build, tuning, folder=folder)
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
