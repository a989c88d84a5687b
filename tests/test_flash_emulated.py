"""flash_fwd's kernels, run on the CPU by tests/flash_emu (no GPU): their .cu sources
compiled unchanged with g++ against host stand-ins for every PTX instruction they use
(ldmatrix, mma.sync, cp.async, shuffles, barriers; written from the PTX ISA's fragment
layouts), then checked against the family's float64 reference on shapes that hit partial
tiles, GQA, seq_k != seq_q and the causal diagonal. AddressSanitizer watches every
shared- and global-memory access; cp.async copies land only when waited for (or, in
eager mode, when issued)."""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path

import numpy as np
import pytest

from paprof.families.flash_fwd import FAMILY, catalog, problem
from paprof.kernels import harness

try:
    from emu_build import GXX, build_driver
except ImportError:  # tests/ as a package
    from tests.emu_build import GXX, build_driver

HERE = Path(__file__).resolve().parent / "flash_emu"
FOLDER = Path(problem.__file__).resolve().parent
pytestmark = pytest.mark.skipif(GXX is None, reason="g++ is not on PATH")

KERNELS = {  # variant -> (source, kernel, element type, threads, shared memory, -D values, grid x)
    "handbook": ("handbook.cu", "flash_fwd_handbook", "float", catalog.TILE_ROWS,
                 catalog.handbook_smem, lambda p: {"HEAD_DIM": p.head_dim, "DTYPE": 2}, catalog.tiles),
    "mma": ("mma.cu", "flash_fwd_mma", "unsigned short", catalog.MMA_THREADS, catalog.mma_smem,
            catalog.mma_defines, catalog.tiles),
    "wgmma": ("wgmma.cu", "flash_fwd_wgmma", "unsigned short", catalog.WGMMA_THREADS, catalog.wgmma_smem,
              catalog.wgmma_defines, lambda p: catalog.wgmma_grid(p)[0]),
}
CHECKS = {"handbook": catalog.check_handbook, "mma": catalog.check_mma, "wgmma": catalog.check_wgmma}


@functools.lru_cache(maxsize=None)
def driver(vid: str, defines: tuple, build: Path) -> Path:
    source, kernel, elem, *_ = KERNELS[vid]
    exe = build / f"{vid}-{'-'.join(f'{k}{v}' for k, v in defines)}"
    return build_driver(HERE / "driver.cpp", exe, {"FLASH_EMULATE": None, "FLASH_KERNEL_FILE": f'"{source}"',
                                                    "FLASH_KERNEL": kernel, "FLASH_ELEM": elem, **dict(defines)},
                        [FOLDER, HERE])


@pytest.fixture(scope="module")
def build(tmp_path_factory):
    return tmp_path_factory.mktemp("flash_emu")


def run_emulated(vid: str, p: problem.Shape, build: Path, eager: bool = False, seed: int = 3):
    CHECKS[vid](p)
    _, _, elem, threads, smem, defines, grid_x = KERNELS[vid]
    exe = driver(vid, tuple(sorted(defines(p).items())), build)
    inputs = problem.make_inputs(p, seed, xp=np)
    header = np.array([p.batch, p.q_heads, p.kv, p.seq_q, p.keys, int(p.causal), int(eager),
                       smem(p), grid_x(p), threads], dtype=np.int32)
    scale = np.array([p.scale * np.log2(np.e)], dtype=np.float32)
    src, dst = build / f"in-{p.slug()}-{vid}", build / f"out-{p.slug()}-{vid}"
    with open(src, "wb") as fh:
        for part in (header, scale, inputs["q"], inputs["k"], inputs["v"]):
            fh.write(np.ascontiguousarray(part).tobytes())
    done = subprocess.run([str(exe), str(src), str(dst)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    out = np.fromfile(dst, dtype=problem.storage_dtype(np, p.dtype)).reshape(
        problem.make_output(p, np).shape)
    return harness.compare(out, FAMILY.reference(p, inputs, np), FAMILY.tolerance_for(p), np)


CASES = [
    # (variant, shape): partial tiles, GQA, seq_k != seq_q, causal diagonal, both head_dims
    ("mma", dict(batch=1, q_heads=2, kv_heads=1, seq_q=100, seq_k=150, head_dim=64, causal=True, dtype="bf16")),
    ("mma", dict(batch=2, q_heads=2, seq_q=70, seq_k=70, head_dim=128, causal=False, dtype="fp16")),
    ("mma", dict(batch=1, q_heads=1, seq_q=130, head_dim=128, causal=True, dtype="bf16")),
    ("mma", dict(batch=1, q_heads=1, seq_q=65, seq_k=200, head_dim=64, causal=False, dtype="fp16")),
    ("mma", dict(batch=1, q_heads=1, seq_q=128, head_dim=64, causal=True, dtype="fp16")),   # whole tiles
    ("mma", dict(batch=1, q_heads=1, seq_q=30, seq_k=64, head_dim=64, causal=False, dtype="bf16")),
    ("mma", dict(batch=1, q_heads=1, seq_q=1, seq_k=129, head_dim=64, causal=True, dtype="bf16")),
    ("handbook", dict(batch=1, q_heads=2, kv_heads=1, seq_q=70, seq_k=100, head_dim=64, causal=True, dtype="fp32")),
    ("handbook", dict(batch=2, q_heads=1, seq_q=40, seq_k=90, head_dim=128, causal=False, dtype="fp32")),
]


@pytest.mark.parametrize("vid, shape", CASES, ids=lambda c: c if isinstance(c, str) else problem.Shape(**c).slug())
def test_kernel_matches_the_reference(build, vid, shape):
    check = run_emulated(vid, problem.Shape(**shape), build)
    assert check.passed, check


def test_mma_with_copies_landing_when_issued(build):
    """cp.async copies performed at once: a prefetch into a buffer another warp is still
    reading would corrupt its scores."""
    p = problem.Shape(batch=1, q_heads=1, seq_q=64, seq_k=200, head_dim=64, causal=False, dtype="bf16")
    check = run_emulated("mma", p, build, eager=True)
    assert check.passed, check


def test_a_wrong_kernel_fails(build, monkeypatch):
    """The check is not vacuous: the same run held to the wrong causal flag fails."""
    p = problem.Shape(batch=1, q_heads=1, seq_q=80, head_dim=64, causal=True, dtype="fp16")
    wrong = problem.Shape(batch=1, q_heads=1, seq_q=80, head_dim=64, causal=False, dtype="fp16")
    monkeypatch.setattr(FAMILY, "reference", lambda shape, inputs, xp: problem.reference(wrong, inputs, xp))
    check = run_emulated("mma", p, build)
    assert not check.passed and check.rel_error > 0.1
