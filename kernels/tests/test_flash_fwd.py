"""The flash_fwd family without a GPU: parameters, work model, the sampled reference, the
variants' rules, the GEMM ceiling's place in bench, the gate's hint, the registry."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest

from paprof import registry
from paprof.errors import ShapeError, UserError
from paprof_kernels.flash_fwd import FAMILY, GATE_METRICS, TOLERANCE, catalog, problem
from paprof_kernels.flash_fwd.problem import Shape
from paprof.family import Sample, Work
from paprof.measure.kernels import harness



# -- parameters --------------------------------------------------------------------------


def test_defaults_are_the_issue_shape():
    p = FAMILY.parse("")
    assert (p.batch, p.q_heads, p.kv, p.seq_q, p.keys, p.head_dim, p.causal, p.dtype) == (
        4, 32, 32, 8192, 8192, 128, False, "bf16")
    assert p.spec() == "batch=4,q_heads=32,seq_q=8192,head_dim=128,causal=false,dtype=bf16"
    assert p.slug() == "b4_h32_s8192_d128_bf16"
    assert Shape.parse(p.spec()) == p


def test_aliases_gqa_and_seq_k():
    p = FAMILY.parse("b=2,h=8,kv_heads=2,s=1000,seq_k=1500,d=64,causal=true,dtype=FP16")
    assert (p.batch, p.q_heads, p.kv, p.group, p.seq_q, p.keys, p.offset) == (2, 8, 2, 4, 1000, 1500, 500)
    assert p.slug() == "b2_h8x2_s1000x1500_d64_causal_fp16"
    assert Shape.parse(p.spec()) == p
    assert Shape.from_dict(json.loads(json.dumps(p.to_dict()))) == p


def test_one_problem_one_spec():
    """kv_heads = q_heads and seq_k = seq_q are written as their defaults."""
    a = FAMILY.parse("q_heads=8,kv_heads=8,seq_q=512,seq_k=512")
    b = FAMILY.parse("q_heads=8,seq_q=512")
    assert a == b and a.spec() == b.spec() and a.slug() == b.slug() == "b4_h8_s512_d128_bf16"


def test_a_sweep_over_seq_q_keeps_seq_k_tied():
    base = FAMILY.parse("seq_q=1024")
    assert Shape.parse("seq_q=2048", base=base).keys == 2048
    assert Shape.parse("seq_q=2048", base=FAMILY.parse("seq_q=1024,seq_k=4096")).keys == 4096


@pytest.mark.parametrize("text, says", [
    ("q_heads=32,kv_heads=6", "q_heads (32) must be a multiple of kv_heads (6)"),
    ("causal=true,seq_q=1024,seq_k=512", "seq_k (512) must be at least seq_q (1024)"),
    ("head_dim=96", "head_dim must be one of 64, 128, got 96"),
    ("dtype=fp8", "dtype must be one of fp32, fp16, bf16"),
    ("seq_q=0", "seq_q must be at least 1"),
    ("causal=maybe", "causal must be true or false"),
    ("batch=64,q_heads=1024,seq_q=65536", "GiB; at most 64 GiB"),
    ("window=3", "unknown parameter 'window'"),
])
def test_bad_parameters_are_one_line(text, says):
    with pytest.raises(ShapeError, match=None) as err:
        FAMILY.parse(text)
    assert says in str(err.value) and "\n" not in str(err.value)


# -- the work model ----------------------------------------------------------------------


def brute_pairs(seq_q: int, seq_k: int, causal: bool) -> int:
    return sum(1 for i in range(seq_q) for j in range(seq_k) if not causal or j <= i + seq_k - seq_q)


@pytest.mark.parametrize("seq_q, seq_k", [(1, 1), (1, 7), (5, 5), (7, 19), (64, 64), (65, 130), (100, 100)])
@pytest.mark.parametrize("causal", [False, True])
def test_attended_pairs_are_exact(seq_q, seq_k, causal):
    assert problem.attended_pairs(seq_q, seq_k, causal) == brute_pairs(seq_q, seq_k, causal)


def test_work_counts_bytes_and_flops():
    p = FAMILY.parse("batch=2,q_heads=8,kv_heads=2,seq_q=100,seq_k=300,head_dim=64,causal=true,dtype=fp16")
    work = FAMILY.work(p)
    assert work.bytes == 2 * (2 * 2 * 8 * 100 * 64 + 2 * 2 * 2 * 300 * 64)  # Q, O and K, V
    assert work.flops == 4 * 2 * 8 * 64 * brute_pairs(100, 300, True)
    assert work.flop_kind == "tensor"
    full = FAMILY.work(FAMILY.parse("seq_q=8192"))
    assert full.flops == 4 * 4 * 32 * 8192 * 8192 * 128 and full.bytes == 4 * 4 * 32 * 8192 * 128 * 2
    half = FAMILY.work(FAMILY.parse("seq_q=8192,causal=true"))
    assert half.flops == 4 * 4 * 32 * 128 * (8192 * 8193 // 2)  # the diagonal counted once
    assert FAMILY.work(FAMILY.parse("dtype=fp32,seq_q=64")).flop_kind == "fp32"


# -- inputs and the reference ------------------------------------------------------------


def plain_attention(p: Shape, inputs: dict) -> np.ndarray:
    """Every row of every head, a loop per query row, no code shared with reference()."""
    q, k, v = (problem.from_storage(np, inputs[n], p.dtype) for n in ("q", "k", "v"))
    out = np.zeros((p.batch * p.q_heads, p.seq_q, p.head_dim))
    for b, h, i in itertools.product(range(p.batch), range(p.q_heads), range(p.seq_q)):
        kvh = b * p.kv + h // (p.q_heads // p.kv)
        last = i + p.keys - p.seq_q if p.causal else p.keys - 1
        s = k[kvh, : last + 1] @ q[b * p.q_heads + h, i] / math.sqrt(p.head_dim)
        w = np.exp(s - s.max())
        out[b * p.q_heads + h, i] = (w / w.sum()) @ v[kvh, : last + 1]
    return out


@pytest.mark.parametrize("text", [
    "batch=2,q_heads=4,kv_heads=2,seq_q=70,seq_k=90,head_dim=64,causal=true,dtype=bf16",
    "batch=1,q_heads=2,seq_q=130,head_dim=64,causal=false,dtype=fp16",
    "batch=1,q_heads=1,seq_q=65,seq_k=200,head_dim=64,causal=false,dtype=fp32",
])
def test_the_sampled_reference_is_attention(text):
    p = FAMILY.parse(text)
    inputs = FAMILY.inputs(p, 5, np)
    ref = FAMILY.reference(p, inputs, np)
    assert isinstance(ref, Sample)
    full = plain_attention(p, inputs)
    np.testing.assert_allclose(ref.values, full[ref.index], rtol=1e-10, atol=1e-12)
    # the float output holding exactly the rounded full answer passes; it is checked as stored
    stored = problem.to_storage(np, full.astype(np.float32), p.dtype)
    assert harness.compare(stored, ref, FAMILY.tolerance_for(p), np).passed


def test_inputs_are_random_never_zero_and_bf16_is_int16_bits():
    p = FAMILY.parse("batch=1,q_heads=2,seq_q=64,head_dim=64,dtype=bf16")
    a, b = FAMILY.inputs(p, 1, np), FAMILY.inputs(p, 2, np)
    assert a["q"].dtype == np.int16 and a["q"].shape == (2, 64, 64) and a["k"].shape == (2, 64, 64)
    values = problem.from_storage(np, a["q"], "bf16")
    assert np.count_nonzero(values) == values.size and 0.8 < values.std() < 1.2
    assert not np.array_equal(a["q"], b["q"])
    x = np.array([1.0, -2.5, 3.14159, 1e-3], dtype=np.float32)
    back = problem.from_storage(np, problem.to_storage(np, x, "bf16"), "bf16")
    assert np.allclose(back, x, rtol=2**-8) and back[1] == -2.5
    assert FAMILY.output(p, np).dtype == np.int16
    assert FAMILY.output(FAMILY.parse("dtype=fp32,seq_q=8,q_heads=1,batch=1"), np).dtype == np.float32


@pytest.mark.parametrize("seq_q", [1, 63, 64, 65, 1000, 1024, 8192, 131072])
def test_the_sample_covers_every_tile_class(seq_q):
    p = FAMILY.parse(f"seq_q={seq_q},causal=true")
    rows = problem.sample_rows(p)
    tiles = -(-seq_q // 64)
    last = (tiles - 1) * 64
    assert set(range(min(64, seq_q))) <= set(rows)                 # the first tile, whole
    assert set(range(last, seq_q)) <= set(rows)                    # the last (partial) tile
    mid = (tiles // 2) * 64
    assert set(range(mid, min(seq_q, mid + 64))) <= set(rows)      # a middle tile's diagonal
    assert {r % 64 for r in rows} == set(range(min(64, seq_q)))    # every row position in a tile
    if seq_q <= 64 * problem.MAX_SAMPLE_ROWS // 2:
        assert {r // 64 for r in rows} == set(range(tiles))        # every tile
    assert len(rows) <= problem.MAX_SAMPLE_ROWS and rows == sorted(set(rows))
    assert all(0 <= r < seq_q for r in rows)


def test_the_sample_covers_first_last_and_gqa_heads():
    p = FAMILY.parse("batch=3,q_heads=8,kv_heads=2")
    heads = problem.sample_heads(p)
    assert {0, 7, 16, 23, 3, 4, 12} <= set(heads)  # first/last of both ends, group edge 3|4, middle
    kv_heads = {(bh // 8) * 2 + (bh % 8) // 4 for bh in heads}
    assert {0, 1, 4, 5} <= kv_heads
    assert problem.sample_heads(FAMILY.parse("batch=1,q_heads=1")) == [0]


def test_a_wrong_row_or_an_unwritten_element_fails_the_check():
    p = FAMILY.parse("batch=2,q_heads=2,seq_q=200,head_dim=64,dtype=fp16")
    inputs = FAMILY.inputs(p, 3, np)
    ref = FAMILY.reference(p, inputs, np)
    good = problem.to_storage(np, plain_attention(p, inputs).astype(np.float32), "fp16")
    tol = FAMILY.tolerance_for(p)
    assert harness.compare(good, ref, tol, np).passed
    one_row = good.copy()
    one_row[0, 129] = one_row[0, 130]  # one sampled row (a middle tile's) swapped for its neighbour
    check = harness.compare(one_row, ref, tol, np)
    assert not check.passed and check.rel_error > 0.3
    unwritten = good.copy()
    unwritten[1, 77, 5] = np.nan  # row 77 is not sampled: the finiteness check still sees it
    assert 77 not in problem.sample_rows(p)
    check = harness.compare(unwritten, ref, tol, np)
    assert not check.passed and check.rel_error == math.inf


def test_bf16_nan_bits_are_not_finite():
    p = FAMILY.parse("batch=1,q_heads=1,seq_q=64,head_dim=64,dtype=bf16")
    inputs = FAMILY.inputs(p, 3, np)
    ref = FAMILY.reference(p, inputs, np)
    out = problem.to_storage(np, plain_attention(p, inputs).astype(np.float32), "bf16")
    assert harness.compare(out, ref, FAMILY.tolerance_for(p), np).passed
    out[0, 3, 3] = -1  # 0xFFFF, what the poison fill writes: a NaN
    assert not harness.compare(out, ref, FAMILY.tolerance_for(p), np).passed


def test_tolerances_are_per_dtype():
    assert [FAMILY.tolerance_for(FAMILY.parse(f"dtype={d}")) for d in ("fp32", "fp16", "bf16")] == [
        TOLERANCE["fp32"], TOLERANCE["fp16"], TOLERANCE["bf16"]]


# -- the variants ------------------------------------------------------------------------


def test_the_cuda_variants_and_the_shapes_they_take():
    ids = [v.id for v in FAMILY.variants]
    assert ids[:3] == ["handbook", "mma", "mma128"]
    m128 = FAMILY.variant("mma128")
    m128.check(FAMILY.parse("dtype=fp16,head_dim=64,q_heads=8,kv_heads=2,seq_q=1000,seq_k=1500,causal=true"))
    with pytest.raises(ShapeError, match="mma128 runs on the tensor cores"):
        m128.check(FAMILY.parse("dtype=fp32"))
    with pytest.raises(ShapeError, match="mma128 runs a grid row"):
        m128.check(FAMILY.parse("batch=1024,q_heads=128,seq_q=64"))
    assert m128.kernel_regex == "^flash_fwd_mma128$" and m128.block(FAMILY.parse("dtype=bf16")) == (128,)
    hb, mma = FAMILY.variant("handbook"), FAMILY.variant("mma")
    hb.check(FAMILY.parse("dtype=fp32"))
    mma.check(FAMILY.parse("dtype=fp16"))
    mma.check(FAMILY.parse("dtype=bf16,head_dim=64"))
    with pytest.raises(ShapeError, match="fp32 teaching kernel"):
        hb.check(FAMILY.parse("dtype=bf16"))
    with pytest.raises(ShapeError, match="fp16 or bf16"):
        mma.check(FAMILY.parse("dtype=fp32"))
    with pytest.raises(ShapeError, match="batch x q_heads must be at most 65535"):
        mma.check(FAMILY.parse("batch=1024,q_heads=128,seq_q=64"))
    assert hb.kernel_regex == "^flash_fwd_handbook$" and mma.kernel_regex == "^flash_fwd_mma$"


@pytest.mark.parametrize("d", [64, 128])
def test_launch_values(d):
    p = FAMILY.parse(f"batch=3,q_heads=8,kv_heads=2,seq_q=1000,head_dim={d},causal=true,dtype=bf16")
    assert catalog.grid(p) == (16, 24)
    assert catalog.mma_smem(p) == (64 + 4 * 64) * d * 2 <= 227 * 1024
    assert catalog.handbook_smem(p) == 4 * (64 * (d + 4) + 2 * 32 * d + 32 * 64) <= 227 * 1024
    assert catalog.mma_defines(p) == {"HEAD_DIM": d, "DTYPE": 2, "MIN_BLOCKS": 3 if d == 64 else 2}
    assert catalog.mma128_grid(p) == (8, 24)  # ceil(1000 / 128)
    stages = 2 if d == 128 else 3  # the 4 x 32 layout: two CTAs of 128 threads a SM
    assert catalog.mma128_smem(p) == (128 + 2 * stages * 64) * (d + 8) * 2 <= 113 * 1024
    assert catalog.mma128_block(p) == (128,)
    defines = catalog.mma128_defines(p)
    assert {k: defines[k] for k in ("HEAD_DIM", "DTYPE", "STAGES", "MIN_BLOCKS")} == {
        "HEAD_DIM": d, "DTYPE": 2, "STAGES": stages, "MIN_BLOCKS": 2}
    assert defines["QREG"] == (d == 64) and "PIPELINE" not in defines and "WARPS" not in defines
    args = catalog.kernel_args(p, {"q": "Q", "k": "K", "v": "V"}, "O")
    assert args[:4] == ("Q", "K", "V", "O")
    assert [int(a) for a in args[4:8]] == [1000, 1000, 8, 2] and int(args[9]) == 1
    assert float(args[8]) == pytest.approx(math.log2(math.e) / math.sqrt(d), rel=1e-6)


def test_mma128_knobs_switch_the_layout():
    p = FAMILY.parse("batch=1,q_heads=8,seq_q=1000,head_dim=128,dtype=fp16")
    v = catalog.tuned(FAMILY.variant("mma128"), catalog.parse_knobs("BC=32,STAGES=3"))
    assert v.shared_mem(p) == (128 + 6 * 32) * 136 * 2 and v.defines(p)["BC"] == 32
    assert v.block(p) == (128,) and v.grid(p) == (8, 8)
    # the family's variant is still the shipped build
    shipped = FAMILY.variant("mma128")
    assert shipped.defines(p)["BC"] == 64 and shipped.shared_mem(p) == (128 + 4 * 64) * 136 * 2
    assert catalog.mma128_defines(p) == {"HEAD_DIM": 128, "DTYPE": 1, **catalog.MMA128_4X32[128]}


def test_tuning_is_a_value_not_a_table_to_overwrite():
    """The shipped knobs are read-only tables; a tuning is passed to the build (``tuned``),
    and only mma128 and wgmma2 have one."""
    with pytest.raises(TypeError):
        catalog.WGMMA2_SHIPPED["BC"] = 64
    with pytest.raises(TypeError):
        catalog.MMA128_4X32[128]["STAGES"] = 3
    assert not hasattr(catalog, "MMA128_TUNING") and not hasattr(catalog, "WGMMA2_TUNING")
    with pytest.raises(ValueError, match="no tuning"):
        catalog.tuned(FAMILY.variant("wgmma"), {"BC": 64})


@pytest.mark.parametrize("text", ["STAGES", "STAGES=two", "FOO=1", "WARP_M=1", "PIPELINE=1", "BC=4,,BC:32", "8x16"])
def test_mma128_knobs_refuse_what_they_do_not_know(text):
    with pytest.raises(ValueError, match="mma128 knobs: expected NAME=INT"):
        catalog.parse_knobs(text)


@pytest.mark.parametrize("vid, text, says", [
    ("sdpa_flash", "dtype=fp32", "takes fp16/bf16, not fp32"),
    ("sdpa_cudnn", "q_heads=8,kv_heads=2", "only the flash backend takes GQA"),
    ("sdpa_efficient", "q_heads=8,kv_heads=2", "only the flash backend takes GQA"),
    ("sdpa_flash", "causal=true,seq_q=512,seq_k=1024", "agree only for seq_k == seq_q"),
])
def test_the_sdpa_peers_refuse_what_they_cannot_match(vid, text, says):
    with pytest.raises(ShapeError, match=says):
        catalog._sdpa_check(vid)(FAMILY.parse(text))


def test_the_sdpa_peers_take_the_issue_shapes():
    for vid in catalog.SDPA:
        for text in ("", "causal=true", "head_dim=64", "seq_q=1024"):
            catalog._sdpa_check(vid)(FAMILY.parse(text))
    catalog._sdpa_check("sdpa_efficient")(FAMILY.parse("dtype=fp32"))
    catalog._sdpa_check("sdpa_flash")(FAMILY.parse("q_heads=8,kv_heads=2"))


def test_the_peers_are_listed_only_with_pytorch(monkeypatch):
    ids = [v.id for v in catalog._sdpa_variants()]
    assert ids == ["sdpa_flash", "sdpa_cudnn", "sdpa_efficient"]
    assert all(v.kind == "callable" and v.arrays == "torch" for v in catalog._sdpa_variants())
    assert all(v.fn_ref.startswith("paprof_kernels.flash_fwd.sdpa:") for v in catalog._sdpa_variants())
    present = [v.id for v in FAMILY.variants]
    assert (present[2:] == ids) == catalog.torch_present()


def test_the_family_module_imports_without_torch_or_cupy():
    import subprocess
    import sys

    code = ("import sys; import paprof_kernels.flash_fwd as f; "
            "assert not {'torch', 'cupy'} & set(sys.modules), sorted({'torch', 'cupy'} & set(sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


# -- ceilings ----------------------------------------------------------------------------


def test_flash_fwd_is_held_to_the_gemm_ceiling_on_tensor_cores_only():
    assert FAMILY.ceiling == "gemm" and registry.family("paged_decode").ceiling == "read"
    assert FAMILY.holds_to_gemm(FAMILY.work(FAMILY.parse("dtype=bf16")))
    assert not FAMILY.holds_to_gemm(FAMILY.work(FAMILY.parse("dtype=fp32")))
    assert not registry.family("paged_decode").holds_to_gemm(Work(10, 10, "tensor"))


def test_a_family_ceiling_must_be_known():
    from paprof.family import Family

    with pytest.raises(ValueError, match="ceiling must be one of read, gemm"):
        Family(name="x", params=Shape, variants=[], inputs=None, output=None, reference=None,
               work=None, ceiling="roofline")


def test_bench_rows_give_the_share_of_the_gemm_ceiling():
    from paprof.measure.kernels.bench import BenchResult, BenchRow

    p = FAMILY.parse("")
    work = FAMILY.work(p)
    gemm = {"dtype": "bf16", "method": "cublas.gemmEx", "n": 8192, "tflops": 700.0}
    row = BenchRow("mma", "cuda", medians_us=[work.flops / 350e6])  # 350 TFLOP/s
    data = BenchResult("flash_fwd", p, work, "NVIDIA H200", 4.5, 100, 1, [row], "gemm", gemm).to_dict()
    (got,) = data["rows"]
    assert got["tflops"] == pytest.approx(350.0) and got["pct_of_gemm_ceiling"] == pytest.approx(50.0)
    assert data["ceiling"] == "gemm" and data["gemm_ceiling_tflops"] == 700.0
    plain = BenchResult("paged_decode", p, work, "NVIDIA H200", 4.5, 100, 1, [row]).to_dict()
    assert plain["gemm_ceiling_tflops"] is None and plain["rows"][0]["pct_of_gemm_ceiling"] is None


def test_bench_prints_tflops_and_the_share_of_the_gemm_ceiling(monkeypatch):
    from click.testing import CliRunner

    from paprof.cli import main
    from paprof.measure.kernels import bench as kbench

    p = FAMILY.parse("seq_q=1024")
    work = FAMILY.work(p)
    gemm = {"dtype": "bf16", "method": "cublas.gemmEx", "n": 8192, "tflops": 700.0}
    rows = [kbench.BenchRow("mma", "cuda", kernels=["flash_fwd_mma"], medians_us=[work.flops / 350e6] * 2,
                            rel_error=2e-3, passed=True),
            kbench.BenchRow("sdpa_cudnn", "callable", skipped="PyTorch's cudnn SDPA backend has no kernel")]

    def fake_bench(fam, chosen, params, *args, **kw):
        return kbench.BenchResult(fam.name, params, work, "NVIDIA H200", 4.5, 100, 1, rows, "gemm", gemm)

    monkeypatch.setattr(kbench, "run_bench", fake_bench)
    result = CliRunner().invoke(main, ["bench", "--family", "flash_fwd", "--variant", "mma",
                                       "--shape", "seq_q=1024"])
    assert result.exit_code == 0, result.output
    assert "GEMM ceiling 700 TFLOP/s (bf16 8192^3, cublas.gemmEx, measured now)" in result.output
    assert "% GEMM" in result.output and "TFLOP/s" in result.output
    line = next(x for x in result.output.splitlines() if x.startswith("mma "))
    assert "350.00" in line and " 50.0 " in line
    assert "sdpa_cudnn skipped: PyTorch's cudnn" in result.output


# -- the launcher's skip -----------------------------------------------------------------


def test_a_variant_that_turns_the_shape_down_at_run_time_is_skipped(tmp_path, monkeypatch):
    """The launcher writes {"skipped": why} and exits 2; paprof run records a skip."""
    from paprof.measure import profile
    from paprof.measure.argv import NcuSettings

    def launcher(argv, env):
        argv = list(argv)
        result = argv[argv.index("--result") + 1]
        with open(result, "w") as fh:
            json.dump({"skipped": "PyTorch's cudnn SDPA backend has no kernel for ..."}, fh)
        return profile.LauncherOutcome(2, "paprof launch: error: PyTorch's cudnn SDPA backend has no kernel")

    monkeypatch.setattr(profile, "run_launcher", launcher)
    variant = catalog._sdpa_variants()[1]
    variant = type(variant)(**{**variant.__dict__, "family": "flash_fwd"})
    with pytest.raises(ShapeError, match="has no kernel"):
        profile.verify(variant, FAMILY.parse(""), NcuSettings(ncu="ncu"), tmp_path / "r.json", {})


def test_the_launcher_writes_the_skip(tmp_path, monkeypatch):
    from paprof.measure.kernels import launch

    def refuse(args):
        raise ShapeError("no kernel for these")

    monkeypatch.setattr(launch, "run", refuse)
    result = tmp_path / "r.json"
    assert launch.main(["--variant", "mma", "--family", "flash_fwd", "--result", str(result)]) == 2
    assert json.loads(result.read_text()) == {"skipped": "no kernel for these"}


def test_wgmma2_refuses_overlap_off_with_q_in_registers():
    """OVERLAP 0 with Q's fragments in registers computed garbage on the H200 (ptxas gives the
    fragments away in that loop: kernels/NOTES.md item 86), so the knob pair is refused in one
    line; with Q from shared memory it builds."""
    from paprof_kernels.flash_fwd import catalog

    w2 = FAMILY.variant("wgmma2")
    shape = FAMILY.parse("dtype=bf16,head_dim=128,seq_q=1000")
    w2.check(shape)
    with pytest.raises(ShapeError, match="OVERLAP=0 needs QSMEM=1") as err:
        catalog.tuned(w2, {"OVERLAP": 0}).check(shape)
    assert "\n" not in str(err.value)
    catalog.tuned(w2, {"OVERLAP": 0, "QSMEM": 1}).check(shape)
