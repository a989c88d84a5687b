"""Every .cu file compiles for sm_90 with nvcc (a variant's own arch where it names one: wgmma
for sm_90a), in the configurations the launchers use."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from paprof import registry
from paprof.measure.kernels import harness
from paprof_kernels.paged_decode import variants as pd_variants
from paprof_kernels.paged_decode.problem import Shape

NVCC = shutil.which("nvcc")
pytestmark = [pytest.mark.nvcc, pytest.mark.skipif(NVCC is None, reason="nvcc is not on PATH")]

SOURCES = sorted({p for v in registry.variants() if hasattr(v, "source_paths") for p in v.source_paths()}) + [
    harness.STREAM_READ_SOURCE, harness.SPIN_SOURCE
]
ARCHS = {p: v.arch for v in registry.variants() if getattr(v, "arch", None) for p in v.source_paths()}
"""Sources a variant compiles for its own target (wgmma.cu: sm_90a); the rest sm_90."""


def target(source) -> list[str]:
    """nvcc's target flags: sm_90, or the source's own as its only target (nvcc 13's plain
    ``-arch=sm_90a`` with ``-c`` also assembles compute_90 PTX, which has no wgmma)."""
    arch = ARCHS.get(source)
    return ["-arch=sm_90"] if arch is None else ["-gencode", f"arch={arch.replace('sm_', 'compute_')},code={arch}"]


def nvcc(tmp_path, source, defines=()):
    cmd = [NVCC, *target(source), "-std=c++17", "-c", "-o", str(tmp_path / "k.o"), f"-I{source.parent}",
           "-Xptxas", "-v", *[f"-D{k}={v}" for k, v in defines], str(source)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stderr


def kernel_spill_stores(log, name="paged_decode_v5"):
    """The spill stores ptxas reports for kernel ``name`` itself (not for the functions it calls)."""
    found = re.search(rf"Function properties for {name}\n\s*\d+ bytes stack frame, (\d+) bytes spill stores", log)
    return int(found[1])


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.name)
def test_source_compiles(tmp_path, source):
    nvcc(tmp_path, source)


@pytest.mark.parametrize("dtype", ["fp32", "fp16", "bf16", "fp8"])
@pytest.mark.parametrize("split", [False, True])
@pytest.mark.parametrize("q_heads", [32, 64])
def test_fast_kernel_compiles_within_its_register_budget(tmp_path, dtype, split, q_heads):
    """v5/v6 as shipped (head_dim 128: the tensor cores fed from registers for fp16/bf16/fp8),
    groups of 4 and 8: no spills (3 warps x 4 CTAs: 168 registers; fp32 with groups of 8
    heads asks for 2 CTAs of 4 warps, 255 registers). The spill stores of the kernel
    itself are counted: the merge is a function of its own."""
    shape = Shape(dtype=dtype, q_heads=q_heads)  # groups of 4 and 8 heads
    defines = pd_variants.fast_defines(shape, split, "paged_decode_v5").items()
    log = nvcc(tmp_path, pd_variants.fast_source(shape), defines)
    assert kernel_spill_stores(log) == 0, log


@pytest.mark.parametrize("dtype", ["fp32", "fp16", "bf16", "fp8"])
@pytest.mark.parametrize("q_heads, kv_heads, head_dim", [(32, 8, 128), (64, 8, 128), (32, 32, 64)])
@pytest.mark.parametrize("name, worklist", [(pd_variants.V7_KERNEL, 1), (pd_variants.V7_PACKED_KERNEL, 2)])
def test_v7_work_list_kernel_compiles_without_spills(tmp_path, dtype, q_heads, kv_heads, head_dim, name, worklist):
    """v7's token split (WORKLIST 1: the CTA's item read from the work list, a one-part
    sequence written directly) and its packed ranges (WORKLIST 2: the kernel's body a loop
    over the CTA's items) within v6's register budget: no spills, and the registers the
    resident CTAs a SM (MIN_BLOCKS) allow (3 warps x 4 CTAs: 168; group 1 at head_dim 64,
    2 warps x 8 CTAs: 128). The packed kernel calls the merge (merge_parts, not inlined)
    after its item loop, not inside it: no stack frame (with the call inside the loop,
    ptxas saved 176-496 bytes of registers around it), but for groups of 8, whose 8-row
    merge spills in both kernels (token kernel 32 bytes of frame, packed 64)."""
    shape = Shape(dtype=dtype, q_heads=q_heads, kv_heads=kv_heads, head_dim=head_dim)
    defines = pd_variants.fast_defines(shape, True, name, worklist=worklist)
    assert defines["WORKLIST"] == worklist and defines["SPLIT"] == 1
    log = nvcc(tmp_path, pd_variants.fast_source(shape), defines.items())
    assert kernel_spill_stores(log, name) == 0, log
    frame = int(re.search(rf"Function properties for {name}\n\s*(\d+) bytes stack frame", log)[1])
    if worklist == 2:
        assert frame <= (64 if q_heads // kv_heads == 8 else 0), log
    regs = int(re.search(rf"Compiling entry function '{name}'.*?Used (\d+) registers", log, re.S)[1])
    assert regs * defines["WARPS"] * 32 * defines["MIN_BLOCKS"] <= 65536, (regs, log)


@pytest.mark.parametrize("dtype", ["fp16", "bf16", "fp8"])
@pytest.mark.parametrize("split", [False, True])
def test_group_1_head_dim_64_tuning_fits_8_ctas_without_spills(tmp_path, dtype, split):
    """GROUP1_D64_TUNING (2 warps, 8 resident CTAs a SM: 97.5 % on the H200 in fp16) for
    v5/v6's kernels: within 128 registers, no spills."""
    shape = Shape(dtype=dtype, q_heads=32, kv_heads=32, head_dim=64)
    defines = pd_variants.fast_defines(shape, split, "paged_decode_v5")
    assert (defines["WARPS"], defines["MIN_BLOCKS"]) == (2, 8)
    log = nvcc(tmp_path, pd_variants.fast_source(shape), defines.items())
    assert kernel_spill_stores(log) == 0, log
    assert int(re.search(r"Used (\d+) registers", log)[1]) <= 128, log


@pytest.mark.parametrize("split", [False, True])
@pytest.mark.parametrize("heads, page", [((32, 8), 16), ((32, 32), 16), ((64, 8), 8), ((8, 8), 32)])
def test_fp8_head_dim_64_and_other_pages_compile_without_spills(tmp_path, split, heads, page):
    shape = Shape(dtype="fp8", head_dim=64 if heads[1] == 32 else 128, q_heads=heads[0], kv_heads=heads[1],
                  page_size=page)
    defines = pd_variants.fast_defines(shape, split, "paged_decode_v5").items()
    log = nvcc(tmp_path, pd_variants.fast_source(shape), defines)
    assert kernel_spill_stores(log) == 0, log
    assert int(re.search(r"Used (\d+) registers", log)[1]) <= 168, log


FLASH_CONFIGS = [("handbook", "fp32", 64), ("handbook", "fp32", 128),
                 ("mma", "fp16", 64), ("mma", "fp16", 128), ("mma", "bf16", 64), ("mma", "bf16", 128),
                 ("mma128", "fp16", 64), ("mma128", "fp16", 128), ("mma128", "bf16", 64), ("mma128", "bf16", 128),
                 ("wgmma", "fp16", 64), ("wgmma", "fp16", 128), ("wgmma", "bf16", 64), ("wgmma", "bf16", 128),
                 ("wgmma2", "fp16", 128), ("wgmma2", "bf16", 128)]


@pytest.mark.parametrize("vid, dtype, head_dim", FLASH_CONFIGS, ids=lambda x: str(x))
def test_flash_fwd_kernels_compile_without_spills(tmp_path, vid, dtype, head_dim):
    """flash_fwd's kernels as the family declares them (its -D values): no spills, and the
    registers leave the resident CTAs mma asks for (MIN_BLOCKS, __launch_bounds__)."""
    from paprof_kernels.flash_fwd import FAMILY

    variant = FAMILY.variant(vid)
    shape = FAMILY.parse(f"dtype={dtype},head_dim={head_dim},seq_q=1000")
    defines = variant.defines(shape)
    (source,) = variant.source_paths()
    log = nvcc(tmp_path, source, defines.items())
    props = re.search(rf"Function properties for {variant.kernel}\n\s*(\d+) bytes stack frame, "
                      rf"(\d+) bytes spill stores, (\d+) bytes spill loads", log)
    assert props and props.group(2) == props.group(3) == "0", log
    regs = int(re.search(rf"Compiling entry function '{variant.kernel}'.*?Used (\d+) registers", log, re.S)[1])
    threads = (variant.block(shape) if callable(variant.block) else variant.block)[0]
    blocks = defines.get("MIN_BLOCKS", 1)
    assert regs * threads * blocks <= 65536, (regs, log)
    if callable(variant.shared_mem):  # the CTAs asked for fit the SM's 228 KiB (1 KiB each reserved)
        assert blocks * (variant.shared_mem(shape) + 1024) <= 228 * 1024


MMA128_BUILDS = [
    # (head_dim, knobs over the shipped layout): the layouts kernels/scripts/tune_flash.py benches
    (128, "BC=32,KSUB=32,STAGES=3"), (64, "QREG=0,STAGES=2"),
]


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("head_dim, knobs", MMA128_BUILDS, ids=str)
def test_mma128_layouts_compile_without_spills(tmp_path, dtype, head_dim, knobs):
    """mma128's other layouts, as the tuning script builds them (grid, block, shared memory
    and -D values through the catalogue): no spills, the CTAs asked for fit."""
    from paprof_kernels.flash_fwd import FAMILY, catalog

    variant = catalog.tuned(FAMILY.variant("mma128"), catalog.parse_knobs(knobs))
    shape = FAMILY.parse(f"dtype={dtype},head_dim={head_dim},seq_q=1000")
    defines = variant.defines(shape)
    log = nvcc(tmp_path, variant.source_paths()[0], defines.items())
    props = re.search(r"Function properties for flash_fwd_mma128\n\s*(\d+) bytes stack frame, "
                      r"(\d+) bytes spill stores, (\d+) bytes spill loads", log)
    assert props and props.group(2) == props.group(3) == "0", log
    regs = int(re.search(r"Used (\d+) registers", log)[1])
    blocks = defines["MIN_BLOCKS"]
    assert regs * variant.block(shape)[0] * blocks <= 65536, (regs, log)
    assert blocks * (variant.shared_mem(shape) + 1024) <= 228 * 1024


@pytest.mark.parametrize("dtype, head_dim", [("bf16", 128), ("fp16", 128), ("bf16", 64)])
def test_wgmma_runs_on_hgmma(dtype, head_dim):
    """The static gate's compile of wgmma (its own sm_90a target): Hopper's HGMMA in the
    SASS (S = Q K^T: head_dim / 16 of them, O += P V: 64 / 16), no mma.sync HMMA, no spills."""
    from paprof.measure import static
    from paprof_kernels.flash_fwd import FAMILY

    cuobjdump = static.find_cuobjdump()
    if cuobjdump is None:
        pytest.skip("cuobjdump not found (the test extra's nvidia-cuda-cuobjdump)")
    variant = FAMILY.variant("wgmma")
    (unit,) = static.compile_units(variant, FAMILY.parse(f"dtype={dtype},head_dim={head_dim}"), FAMILY.arch)
    assert unit.arch == "sm_90a"
    counts = static.kernel_counts(unit, static.find_nvcc(), cuobjdump)["flash_fwd_wgmma"]
    assert counts["sass_hgmma"] == head_dim // 16 + 4 and counts["sass_hmma"] == 0, counts
    assert counts["spill_stores_bytes"] == counts["spill_loads_bytes"] == 0, counts


WGMMA2_BUILDS = {
    # knobs over the shipped ones -> HGMMA in the SASS: S = Q K^T is head_dim / 16 = 8, P V
    # BC / 16; with OVERLAP the first S and the last P V are peeled off the loop (twice each)
    "": 32, "OVERLAP=0,QSMEM=1": 16, "PINGPONG=0": 32, "QSMEM=1": 32, "BC=64": 24, "STAGES=2": 32,
    "OVERLAP=0,PINGPONG=0,QSMEM=1": 16,
    "TMA=0,STAGES=2": 32, "TMA=0,STAGES=2,BC=64": 24, "TMA=0": 32, "TMA=0,STAGES=2,OVERLAP=0,PINGPONG=0,QSMEM=1": 16,
    # two steps of the consumers' instruction diet (NOTES item 85) taken away: the same GEMMs
    "FAST_MAX=0": 32, "DESC_ADD=0": 32, "REG_CONSUMER=240,REG_PRODUCER=24": 32,
}
WGMMA2_CASES = [("fp16", ""), *(("bf16", knobs) for knobs in WGMMA2_BUILDS)]
"""The shipped build in both dtypes, the tuning script's other builds in bf16 (the dtype is a
conversion at the edges: it moves no GEMM, barrier or register budget)."""


@pytest.mark.parametrize("dtype, knobs", WGMMA2_CASES, ids=lambda x: x or "shipped")
def test_wgmma2_builds_compile_unserialised_without_spills(tmp_path, dtype, knobs):
    """wgmma2 in each knob setting the tuning script benches: no spills (the consumers at
    setmaxnreg's 232, the producer at 40), no ptxas note that it serialised the wgmma
    (C7510-C7520: a wgmma issued under a branch, an accumulator read in flight), the HGMMA
    count of the design, and the CTA's shared memory within the SM's."""
    from paprof.measure import static
    from paprof_kernels.flash_fwd import FAMILY, catalog

    variant = catalog.tuned(FAMILY.variant("wgmma2"), catalog.parse_knobs(knobs, "wgmma2"))
    shape = FAMILY.parse(f"dtype={dtype},head_dim=128,seq_q=1000")
    log = nvcc(tmp_path, variant.source_paths()[0], variant.defines(shape).items())
    props = re.search(r"Function properties for flash_fwd_wgmma2\n\s*(\d+) bytes stack frame, "
                      r"(\d+) bytes spill stores, (\d+) bytes spill loads", log)
    assert props and props.group(2) == props.group(3) == "0", log
    assert "serialized" not in log, log
    assert variant.shared_mem(shape) + 1024 <= 228 * 1024
    cuobjdump = static.find_cuobjdump()
    if cuobjdump is None:
        pytest.skip("cuobjdump not found (the test extra's nvidia-cuda-cuobjdump)")
    (unit,) = static.compile_units(variant, shape, FAMILY.arch)
    counts = static.kernel_counts(unit, static.find_nvcc(), cuobjdump)["flash_fwd_wgmma2"]
    assert counts["sass_hgmma"] == WGMMA2_BUILDS[knobs] and counts["sass_hmma"] == 0, counts


@pytest.mark.parametrize("knobs, copies", [("TMA=0", 0), ("TMA=1", 4), ("TMA=1,BC=64", 4)])
def test_wgmma2_tma_issues_tensor_copies(tmp_path, knobs, copies):
    """TMA 1: the producer's loop holds HEAD_DIM / 64 UTMALDG.3D a K tile and as many a V
    tile and no LDGSTS of its own (Q's are the consumers': the same count as TMA 0's minus the
    producer's); TMA 0 has no UTMALDG."""
    from paprof.measure import static
    from paprof_kernels.flash_fwd import FAMILY, catalog

    cuobjdump = static.find_cuobjdump()
    if cuobjdump is None:
        pytest.skip("cuobjdump not found (the test extra's nvidia-cuda-cuobjdump)")
    variant = catalog.tuned(FAMILY.variant("wgmma2"), catalog.parse_knobs(knobs, "wgmma2"))
    shape = FAMILY.parse("dtype=bf16,head_dim=128,seq_q=1000")
    sass = sass_lines(tmp_path, variant.source_paths()[0], variant.defines(shape).items(), cuobjdump)
    assert sum(ins.split()[0].startswith("UTMALDG.3D") for ins in sass) == copies, knobs
    if copies:
        variant = catalog.tuned(FAMILY.variant("wgmma2"), catalog.parse_knobs(knobs.replace("TMA=1", "TMA=0"), "wgmma2"))
        plain = sass_lines(tmp_path, variant.source_paths()[0], variant.defines(shape).items(), cuobjdump)
        ldgsts = [sum(ins.startswith("LDGSTS") for ins in x) for x in (sass, plain)]
        assert 0 < ldgsts[0] < ldgsts[1], ldgsts


def sass_lines(tmp_path, source, defines, cuobjdump) -> list[str]:
    """The SASS of ``source`` built with ``defines`` for its arch: one instruction a line,
    without the address and encoding comments."""
    cubin = tmp_path / "k.cubin"
    cmd = [NVCC, *target(source), "-std=c++17", "-cubin", "-o", str(cubin), f"-I{source.parent}",
           *[f"-D{k}={v}" for k, v in defines], str(source)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    text = subprocess.run([cuobjdump, "-sass", str(cubin)], capture_output=True, text=True, check=True).stdout
    found = (re.match(r"\s*/\*[0-9a-f]+\*/\s+(.*?)\s*;", line) for line in text.splitlines())
    return [m[1] for m in found if m]


def written_registers(ins: str) -> set[int]:
    """The general registers an instruction writes (its first operand, when that is a
    register: 4 for LDSM .x4 and 128-bit loads, 2 for 64-bit and .WIDE results)."""
    parts = re.sub(r"^@!?U?P\w+\s+", "", ins).split(None, 1)
    if len(parts) < 2 or parts[0].startswith(("HGMMA", "ST", "BAR", "BRA", "RED", "SYNCS", "WARPGROUP")):
        return set()
    first = re.match(r"R(\d+)\b", parts[1])
    if not first:
        return set()
    op = parts[0]
    width = 4 if (op.startswith("LDSM") and op.endswith(".4")) or ".128" in op else 2 if (".64" in op or "WIDE" in op) else 1
    return set(range(int(first[1]), int(first[1]) + width))


def q_fragment_clobbers(lines: list[str]) -> list[str]:
    """Instructions writing a register that an S = Q K^T HGMMA (not the transposed-B one
    of P V) reads as its A fragment, after the LDSM that loaded Q into it: Q is loaded once,
    before the key loop, and must stay in those registers through it."""
    q = set()
    for ins in lines:
        m = re.match(r"HGMMA\.\S+ R\d+, R(\d+), gdesc\[\w+\](?!\.tnspB)", ins)
        if m:
            q |= set(range(int(m[1]), int(m[1]) + 4))
    loaded, found = set(), []
    for ins in lines:
        written = written_registers(ins) & q
        if ins.startswith("LDSM"):
            loaded |= written
        elif written & loaded:
            found.append(ins)
    return found


def window_hazards(lines):
    """writes, by non-HGMMA instructions, to the A or D registers of an HGMMA in flight:
    issued, its group (closed by the HGMMA marked gsb0) not yet retired by a
    WARPGROUP.DEPBAR.LE gsb0, N (which leaves the N newest groups flying); straight-line order"""
    out, groups, open_ = [], [], set()
    for ins in lines:
        m = re.match(r"HGMMA\.64x(\d+)x16\S* R(\d+), (R(\d+)|gdesc)", ins)
        if m:
            n, d = int(m[1]), int(m[2])
            open_ |= set(range(d, d + n // 2))
            if m[4]:
                open_ |= set(range(int(m[4]), int(m[4]) + 4))
            if ins.rstrip().endswith("gsb0"):
                groups.append(open_)
                open_ = set()
            continue
        m = re.match(r"WARPGROUP\.DEPBAR\.LE gsb0, 0x(\d+)", ins)
        if m:
            keep = int(m[1], 16)
            groups = groups[len(groups) - keep:] if keep else []
            continue
        live = set().union(*groups) if groups else set()
        w = written_registers(ins) & live
        if w:
            out.append(ins)
    return out


@pytest.mark.parametrize("vid, head_dim, knobs", [("wgmma", 64, ""), ("wgmma", 128, ""), ("wgmma2", 128, ""),
                                                  ("wgmma2", 128, "QSMEM=1"), ("wgmma2", 128, "OVERLAP=0,QSMEM=1"),
                                                  ("wgmma2", 128, "FAST_MAX=0,DESC_ADD=0")])
def test_no_register_of_a_flying_hgmma_is_written(tmp_path, vid, head_dim, knobs):
    """In the SASS, nothing but HGMMA writes an in-flight HGMMA's A fragments or
    accumulators (wgmma's d64 failure is not such a move: item 64)."""
    from paprof.measure import static
    from paprof_kernels.flash_fwd import FAMILY, catalog

    cuobjdump = static.find_cuobjdump()
    if cuobjdump is None:
        pytest.skip("cuobjdump not found (the test extra's nvidia-cuda-cuobjdump)")
    variant = FAMILY.variant(vid)
    if vid == "wgmma2":
        variant = catalog.tuned(variant, catalog.parse_knobs(knobs, "wgmma2"))
    defines = (catalog.wgmma_defines if vid == "wgmma" else variant.defines)(
        FAMILY.parse(f"dtype=bf16,head_dim={head_dim},seq_q=1000"))
    found = window_hazards(sass_lines(tmp_path, variant.source_paths()[0], defines.items(), cuobjdump))
    assert not found, found[:8]


@pytest.mark.parametrize("vid, head_dim, knobs, clobbered", [
    ("wgmma", 128, "", False),
    # kernels/NOTES.md (items 64, 76): loaded once before the loop, at head_dim 64 ptxas gives
    # Q's A fragments the same registers as P's and the loop's address arithmetic; right for
    # the first key tile only, as the H200 showed. QRELOAD (wgmma's default at d64) reads
    # them again each step, and ptxas then keeps them apart.
    ("wgmma", 64, "QRELOAD=0", True),
    ("wgmma", 64, "", False),
    ("wgmma2", 128, "", False),
    ("wgmma2", 128, "FAST_MAX=0,DESC_ADD=0", False),
    ("wgmma2", 128, "PINGPONG=0", False),
    ("wgmma2", 128, "TMA=0", False),
    # OVERLAP 0 with Q in registers (refused by the catalogue and a static_assert since item
    # 86): this check found what the H200 showed, a wrong output from every query block
    ("wgmma2", 128, "OVERLAP=0,QSMEM=0 hazard", True),
])
def test_q_fragments_stay_in_their_registers(tmp_path, vid, head_dim, knobs, clobbered):
    from paprof.measure import static
    from paprof_kernels.flash_fwd import FAMILY, catalog

    cuobjdump = static.find_cuobjdump()
    if cuobjdump is None:
        pytest.skip("cuobjdump not found (the test extra's nvidia-cuda-cuobjdump)")
    hazard = knobs.endswith(" hazard")  # past the static_assert that refuses the build
    variant = FAMILY.variant(vid)
    if vid == "wgmma2":
        variant = catalog.tuned(variant, catalog.parse_knobs(knobs.removesuffix(" hazard"), "wgmma2"))
    defines = (catalog.wgmma_defines if vid == "wgmma" else variant.defines)(
        FAMILY.parse(f"dtype=bf16,head_dim={head_dim},seq_q=1000"))
    if hazard:
        defines = {**defines, "ALLOW_Q_HAZARD": 1}
    if vid == "wgmma" and knobs:
        defines = {**defines, **dict(kv.split("=") for kv in knobs.split(","))}
    found = q_fragment_clobbers(sass_lines(tmp_path, variant.source_paths()[0], defines.items(), cuobjdump))
    assert bool(found) == clobbered, found[:8]


@pytest.mark.parametrize("dtype, head_dim", [("fp16", 128), ("fp8", 128), ("fp32", 128), ("bf16", 64), ("fp16", 256)])
def test_v7_deferred_merge_kernel_compiles_without_spills(tmp_path, dtype, head_dim):
    """With DEFER_MERGE (V7_MERGE "kernel") the module also holds paged_decode_v7_merge: no
    spill, within its MERGE_THREADS (512 threads, so 128 registers at most); the streaming
    kernel no more registers than with the fused merge."""
    shape = Shape(dtype=dtype, head_dim=head_dim)
    logs = []
    for defer in (False, True):
        defines = pd_variants.fast_defines(shape, True, pd_variants.V7_KERNEL, worklist=1, defer=defer)
        assert defines.get("DEFER_MERGE", 0) == int(defer)
        logs.append(nvcc(tmp_path, pd_variants.fast_source(shape), defines.items()))
    assert kernel_spill_stores(logs[1], "paged_decode_v7_merge") == 0, logs[1]

    def regs(log, name):
        return int(re.search(rf"Compiling entry function '{name}'.*?Used (\d+) registers", log, re.S)[1])

    assert regs(logs[1], pd_variants.V7_KERNEL) <= regs(logs[0], pd_variants.V7_KERNEL), logs
    assert pd_variants.MERGE_THREADS == 512 and regs(logs[1], "paged_decode_v7_merge") <= 128
