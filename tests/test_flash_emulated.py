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

ELEM = {"handbook": "float"}  # the tensor-core kernels move 16-bit bit patterns
EMULATED = ("handbook", "mma", "mma128", "wgmma")


def kernel(vid: str):
    """The variant as the catalogue declares it: its source, kernel, grid, block, shared
    memory and -D values are what the emulation builds and launches."""
    v = FAMILY.variant(vid)
    assert v.kind == "cuda" and len(v.sources) == 1
    return v


@functools.lru_cache(maxsize=None)
def driver(vid: str, defines: tuple, build: Path) -> Path:
    v = kernel(vid)
    exe = build / f"{vid}-{'-'.join(f'{k}{v}' for k, v in defines)}"
    return build_driver(HERE / "driver.cpp", exe, {"FLASH_EMULATE": None, "FLASH_KERNEL_FILE": f'"{v.sources[0]}"',
                                                    "FLASH_KERNEL": v.kernel,
                                                    "FLASH_ELEM": ELEM.get(vid, "unsigned short"), **dict(defines)},
                        [FOLDER, HERE])


@pytest.fixture(scope="module")
def build(tmp_path_factory):
    return tmp_path_factory.mktemp("flash_emu")


def run_emulated(vid: str, p: problem.Shape, build: Path, eager: bool = False, seed: int = 3,
                 exe: Path | None = None, **override):
    """Run ``vid`` on ``p`` in the emulation; ``override``: -D values replacing the catalogue's;
    ``exe``: a driver built from another copy of the source (the mutation tests)."""
    v = kernel(vid)
    if not (vid == "wgmma" and p.head_dim not in catalog.WGMMA_DIMS):
        # wgmma at head_dim 64 stays emulated though the catalogue refuses it: it passes here
        # and fails on the H200 past one key tile (docs/NOTES.md), the case a fix must mend
        v.check(p)
    shipped = dict(catalog.MMA128_TUNING)
    if vid == "mma128":  # the layout's knobs also set the block and shared memory
        catalog.MMA128_TUNING.update(override)
        override_d = {}
    else:
        override_d = override
    try:
        defines = {**v.defines(p), **override_d}
        grid_x, grid_y = v.grid(p)
        (threads,) = v.block(p) if callable(v.block) else v.block
        smem = v.shared_mem(p)
    finally:
        catalog.MMA128_TUNING.clear()
        catalog.MMA128_TUNING.update(shipped)
    exe = exe or driver(vid, tuple(sorted(defines.items())), build)
    inputs = problem.make_inputs(p, seed, xp=np)
    assert grid_y == p.batch * p.q_heads
    header = np.array([p.batch, p.q_heads, p.kv, p.seq_q, p.keys, int(p.causal), int(eager),
                       smem, grid_x, threads], dtype=np.int32)
    scale = np.array([p.scale * np.log2(np.e)], dtype=np.float32)
    tag = f"{p.slug()}-{vid}-{'-'.join(f'{k}{x}' for k, x in sorted(override.items()))}"
    src, dst = build / f"in-{tag}", build / f"out-{tag}"
    with open(src, "wb") as fh:
        for part in (header, scale, inputs["q"], inputs["k"], inputs["v"]):
            fh.write(np.ascontiguousarray(part).tobytes())
    done = subprocess.run([str(exe), str(src), str(dst)], capture_output=True, text=True, timeout=900)
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
    ("wgmma", dict(batch=1, q_heads=2, kv_heads=1, seq_q=100, seq_k=150, head_dim=64, causal=True, dtype="bf16")),
    ("wgmma", dict(batch=2, q_heads=2, seq_q=70, seq_k=70, head_dim=128, causal=False, dtype="fp16")),
    ("wgmma", dict(batch=1, q_heads=1, seq_q=130, head_dim=128, causal=True, dtype="bf16")),     # 2 tiles, diagonal
    ("wgmma", dict(batch=1, q_heads=1, seq_q=65, seq_k=200, head_dim=64, causal=False, dtype="fp16")),
    ("wgmma", dict(batch=1, q_heads=1, seq_q=256, head_dim=64, causal=True, dtype="fp16")),      # whole tiles
    ("wgmma", dict(batch=1, q_heads=1, seq_q=200, seq_k=333, head_dim=128, causal=True, dtype="fp16")),
    ("wgmma", dict(batch=1, q_heads=4, kv_heads=2, seq_q=128, seq_k=64, head_dim=128, causal=False, dtype="bf16")),
    ("wgmma", dict(batch=1, q_heads=1, seq_q=1, seq_k=129, head_dim=64, causal=True, dtype="bf16")),
    ("handbook", dict(batch=1, q_heads=2, kv_heads=1, seq_q=70, seq_k=100, head_dim=64, causal=True, dtype="fp32")),
    ("handbook", dict(batch=2, q_heads=1, seq_q=40, seq_k=90, head_dim=128, causal=False, dtype="fp32")),
]


MMA128_SHAPES = [
    # 128-query tiles, the ring wrapping (steps > STAGES), a partial last key tile, diagonal
    # tiles, GQA, seq_k != seq_q, both dtypes and head_dims
    dict(batch=1, q_heads=2, kv_heads=1, seq_q=100, seq_k=150, head_dim=64, causal=True, dtype="bf16"),
    dict(batch=2, q_heads=2, seq_q=70, seq_k=70, head_dim=128, causal=False, dtype="fp16"),
    dict(batch=1, q_heads=1, seq_q=300, head_dim=128, causal=True, dtype="bf16"),
    dict(batch=1, q_heads=1, seq_q=65, seq_k=520, head_dim=64, causal=False, dtype="fp16"),
    dict(batch=1, q_heads=1, seq_q=256, head_dim=64, causal=True, dtype="fp16"),  # whole tiles
    dict(batch=1, q_heads=4, kv_heads=2, seq_q=130, seq_k=400, head_dim=128, causal=True, dtype="fp16"),
    dict(batch=1, q_heads=1, seq_q=1, seq_k=129, head_dim=64, causal=True, dtype="bf16"),
    dict(batch=1, q_heads=1, seq_q=128, seq_k=256, head_dim=128, causal=False, dtype="bf16"),
]
MMA128_LAYOUTS = {
    # name -> knobs over the shipped ones (mma128_knobs): the shipped 4 x 32 layout, the
    # first 8 x 16 one, and the 4 x 32 alternatives the tuning script benches
    "4x32": {},
    "8x16": catalog.MMA128_8X16,
    "4x32-bc32": {"BC": 32, "KSUB": 32, "STAGES": 3},
}


@pytest.mark.parametrize("vid, shape", CASES, ids=lambda c: c if isinstance(c, str) else problem.Shape(**c).slug())
def test_kernel_matches_the_reference(build, vid, shape):
    check = run_emulated(vid, problem.Shape(**shape), build)
    assert check.passed, check


@pytest.mark.parametrize("layout", MMA128_LAYOUTS)
@pytest.mark.parametrize("shape", MMA128_SHAPES, ids=lambda c: problem.Shape(**c).slug())
def test_mma128_layouts_match_the_reference(build, layout, shape):
    check = run_emulated("mma128", problem.Shape(**shape), build, **MMA128_LAYOUTS[layout])
    assert check.passed, check


def test_mma_with_copies_landing_when_issued(build):
    """cp.async copies performed at once: a prefetch into a buffer another warp is still
    reading would corrupt its scores."""
    p = problem.Shape(batch=1, q_heads=1, seq_q=64, seq_k=200, head_dim=64, causal=False, dtype="bf16")
    check = run_emulated("mma", p, build, eager=True)
    assert check.passed, check


@pytest.mark.parametrize("layout", ["4x32", "8x16"])
@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize("eager", [False, True])
def test_mma128_ring_with_copies_landing_when_issued(build, eager, head_dim, layout):
    """mma128 refills a buffer of its ring one barrier after its last reader: with
    copies landing at issue a refill one step too early would corrupt another warp's
    scores or P V (8 steps: the ring wraps twice)."""
    p = problem.Shape(batch=1, q_heads=1, seq_q=128, seq_k=500, head_dim=head_dim, causal=False, dtype="bf16")
    check = run_emulated("mma128", p, build, eager=eager, **MMA128_LAYOUTS[layout])
    assert check.passed, check


@pytest.mark.parametrize("override", [{**catalog.MMA128_8X16, "PIPELINE": 0}, {**catalog.MMA128_8X16, "STAGES": 2},
                                      {"QREG": 0, "STAGES": 2}, {"KSUB": 32, "QK_UNROLL": 1}])
def test_mma128_other_builds(build, override):
    """The build switches the catalogue does not pick at d64: 8 x 16 with Q K^T after the
    softmax (PIPELINE 0, the plain ring) and with a ring of 2 buffers (the wait then allows
    no group in flight); 4 x 32 with Q re-read from sQ and 2 buffers, and with S taken in
    sub-tiles of 32 keys (rolled Q K^T loop)."""
    p = problem.Shape(batch=1, q_heads=2, kv_heads=1, seq_q=150, seq_k=330, head_dim=64, causal=True, dtype="fp16")
    check = run_emulated("mma128", p, build, eager=True, **override)
    assert check.passed, check


def test_a_wrong_kernel_fails(build, monkeypatch):
    """The check is not vacuous: the same run held to the wrong causal flag fails."""
    p = problem.Shape(batch=1, q_heads=1, seq_q=80, head_dim=64, causal=True, dtype="fp16")
    wrong = problem.Shape(batch=1, q_heads=1, seq_q=80, head_dim=64, causal=False, dtype="fp16")
    monkeypatch.setattr(FAMILY, "reference", lambda shape, inputs, xp: problem.reference(wrong, inputs, xp))
    check = run_emulated("mma", p, build)
    assert not check.passed and check.rel_error > 0.1


def test_wgmma_with_copies_landing_when_issued(build):
    """cp.async performed at once: a prefetch into a K/V buffer a warpgroup's wgmma has not
    finished reading would show."""
    p = problem.Shape(batch=1, q_heads=1, seq_q=130, seq_k=260, head_dim=128, causal=False, dtype="bf16")
    check = run_emulated("wgmma", p, build, eager=True)
    assert check.passed, check


UNIT = HERE / "wgmma_unit.cpp"
UNIT_CASES = {  # case -> the emulated wgmma agrees with A x B
    "kmajor": True, "nmajor": True,
    "bad_kmajor_sbo": False, "bad_kmajor_noswizzle": False, "bad_kmajor_as_nmajor": False,
    "bad_nmajor_lbo_sbo_swapped": False, "bad_nmajor_as_kmajor": False, "bad_a_fragment": False,
    "bad_read_before_wait": False, "bad_no_fence": False,
}


@pytest.mark.parametrize("dtype", [1, 2])
def test_emulated_wgmma_against_a_plain_product(build, dtype):
    """One m64nNk16 on operands laid out by hand from the PTX ISA's pictures (K-major B
    with its 8-row blocks 2048 bytes apart and the descriptor 64 bytes into the swizzle
    row; N-major B over two 64-column atoms 4096 bytes apart), and the same with one thing
    wrong each: the emulator must agree exactly with the good ones and not with the others
    (or abort: a wgmma with no wgmma.fence)."""
    exe = build_driver(UNIT, build / f"wgmma_unit{dtype}", {"FLASH_EMULATE": None, "DTYPE": dtype}, [FOLDER, HERE])
    for case, good in UNIT_CASES.items():
        done = subprocess.run([str(exe), case], capture_output=True, text=True, timeout=120)
        if good:
            assert done.returncode == 0 and float(done.stdout) == 0.0, (case, done.stdout, done.stderr[-2000:])
        else:
            assert done.returncode != 0 or float(done.stdout) > 0.1, (case, done.stdout)


MUTATIONS = {  # a bug put into wgmma.cu -> (the text replaced, its replacement)
    "no swizzle in the tiles": ("((((c >> 3) & 7) ^ (r & 7)) << 4)", "(((c >> 3) & 7) << 4)"),
    "V's LBO and SBO swapped": ("BC * ATOM, PERIOD)", "PERIOD, BC * ATOM)"),
    "K's SBO doubled": ("16, PERIOD)", "16, 2 * PERIOD)"),
    "V not transposed": ("wgmma_m64n128<1>", "wgmma_m64n128<0>"),
    "P: row g given row g + 8's values": ("(i / 4) % 2 * 2] = pack2(p0, p1)", "(i / 4) % 2 * 2] = pack2(p2, p3)"),
    "no fence.proxy.async": ("    fence_proxy_async();\n", "\n"),
    "S read before its wait": ("        wgmma_wait<0>();\n        wgmma_hold(s);", "        wgmma_hold(s);"),
    "tiles not aligned to 1024 bytes": ("smem_raw + ((PERIOD - (smem_addr(smem_raw) & (PERIOD - 1))) & (PERIOD - 1))",
                                        "smem_raw"),
}


@pytest.mark.parametrize("what", MUTATIONS)
def test_a_wgmma_bug_fails_in_emulation(build, what, tmp_path):
    """Each mutation of the kernel gives the wrong output or an emulator error."""
    old, new = MUTATIONS[what]
    source = (FOLDER / "wgmma.cu").read_text()
    assert source.count(old) == 1, f"the mutation's text is not in wgmma.cu once: {old!r}"
    (tmp_path / "wgmma.cu").write_text(source.replace(old, new))
    p = problem.Shape(batch=1, q_heads=1, seq_q=130, seq_k=130, head_dim=128, causal=False, dtype="bf16")
    defines = {"FLASH_EMULATE": None, "FLASH_KERNEL_FILE": '"wgmma.cu"', "FLASH_KERNEL": "flash_fwd_wgmma",
               "FLASH_ELEM": "unsigned short", **catalog.wgmma_defines(p)}
    exe = build_driver(HERE / "driver.cpp", tmp_path / "driver", defines, [tmp_path, FOLDER, HERE])
    try:
        check = run_emulated("wgmma", p, build, exe=exe)
    except AssertionError as err:  # the driver aborted: an emulator check
        assert "emulation:" in str(err), err
        return
    assert not check.passed, f"{what}: the emulation did not notice ({check})"
