"""The static gate: compile units, ptxas / cuobjdump parsing, and ``check --static`` on the
shipped .cu files (paged_decode at its default shape, the softmax example), no GPU."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from paprof import registry
from paprof.measure import static
from paprof.errors import UserError

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "custom_family"
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")

PTXAS = """\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'k_one' for 'sm_90'
ptxas info    : Function properties for k_one
    16 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 96 registers, used 1 barriers, 2048 bytes smem, 400 bytes cmem[0]
ptxas info    : Function properties for helper
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Compiling entry function 'k_two' for 'sm_90'
ptxas info    : Function properties for k_two
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 28 registers, used 1 barriers
"""
RES = """\
 Function k_one:
  REG:96 STACK:16 SHARED:2048 LOCAL:24 CONSTANT[0]:400 TEXTURE:0 SURFACE:0 SAMPLER:0
"""
SASS = """\
\tFunction : k_one
        /*0000*/                   LDC R1, c[0x0][0x28] ;
        /*0010*/              @!P2 LDG.E.128.CONSTANT R4, desc[UR8][R22.64] ;
        /*0020*/                   LDG.E R5, desc[UR8][R2.64] ;
        /*0030*/                   FFMA R3, R4, R5, R3 ;
        /*0040*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;
        /*0050*/                   STL.64 [R1], R4 ;
        /*0060*/                   NOP ;
"""


def test_ptxas_log_is_read_per_entry_function():
    got = static.parse_ptxas(PTXAS)
    assert set(got) == {"k_one", "k_two"}
    assert got["k_one"] == {"registers_per_thread": 96, "stack_frame_bytes": 16,
                            "spill_stores_bytes": 8, "spill_loads_bytes": 4,
                            "shared_mem_static_bytes": 2048, "const_mem_bytes": 400}
    assert got["k_two"]["registers_per_thread"] == 28 and got["k_two"]["spill_stores_bytes"] == 0


def test_res_usage_and_sass_mix():
    # local memory: the stack frame (16) and the other local data (24)
    assert static.parse_res_usage(RES) == {"k_one": {"local_mem_bytes": 40,
                                                     "const_mem_bytes": 400}}
    mix = static.parse_sass(SASS)["k_one"]
    assert (mix["sass_total"], mix["sass_ldg"], mix["sass_ldg_128"], mix["sass_ffma"],
            mix["sass_bar"], mix["sass_stl"], mix["sass_hmma"]) == (6, 2, 1, 1, 1, 1, 0)


def test_instruction_classes_come_from_the_metric_catalogue():
    from paprof.read.metrics import BY_COLUMN, INSTRUCTION_CLASSES

    assert gate.SASS_CLASSES == tuple(c.name for c in INSTRUCTION_CLASSES)
    for c in INSTRUCTION_CLASSES:
        assert gate.rule(c.column).label == c.label and gate.unit(c.column) == "inst"
        assert c.column in gate.STATIC_METRICS and c.column not in BY_COLUMN  # no report column
    text = SASS.replace("LDC R1", "STS.128 [R2], R4").replace("NOP", "LDS.U16 R3, [R2]")
    mix = static.parse_sass(text)["k_one"]
    assert set(mix) == {c.column for c in INSTRUCTION_CLASSES}
    assert (mix["sass_total"], mix["sass_sts"], mix["sass_sts_128"], mix["sass_lds"],
            mix["sass_lds_128"]) == (7, 1, 1, 1, 0)


@pytest.mark.lab
def test_compile_units_of_both_forms():
    pd = registry.family("paged_decode")
    (unit,) = static.compile_units(pd.variant("v5"), pd.parse(""))
    assert unit.sources[0].name == "v5_fast.cu" and unit.defines["KERNEL_NAME"] == "paged_decode_v5"
    assert len(static.compile_units(pd.variant("v6"), pd.parse(""))) == 2


def test_missing_nvcc_is_one_line(monkeypatch):
    monkeypatch.setattr(static, "_tools", lambda name, wheel=False: None)
    with pytest.raises(UserError, match="nvcc not found"):
        static.find_nvcc()


@pytest.mark.lab
@needs_nvcc
def test_paged_decode_static_gate_passes_on_itself(invoke, tmp_path):
    path = tmp_path / "static.json"
    result = invoke("baseline", "update", "--static", "--variant", "v3", "--variant", "v6",
                    "--out", path)
    assert result.exit_code == 0, result.output
    data = json.loads(path.read_text())
    assert data["gate"] == "static" and data["schema"] == 3
    names = [e["variant"] for e in data["entries"]]
    assert names == ["v3", "v6:paged_decode_v6_nosplit", "v6:paged_decode_v6_split"]
    assert all(e["metrics"]["spill_stores_bytes"]["value"] == 0 for e in data["entries"])
    result = invoke("check", "--static", "--baseline", path)
    assert result.exit_code == 0, result.output
    assert "PASS" in result.stdout
    result = invoke("check", "--baseline", path)  # a static baseline needs --static
    assert result.exit_code == 2 and "--static" in result.stderr


@pytest.fixture
def softmax_copy(tmp_path, monkeypatch):
    folder = tmp_path / "softmax"
    shutil.copytree(EXAMPLE, folder, ignore=shutil.ignore_patterns("runs", "__pycache__"))
    monkeypatch.chdir(folder)
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.delitem(sys.modules, "softmax_family", raising=False)  # the copy's, not the example's
    return folder


@needs_nvcc
def test_a_variant_edited_to_use_more_registers_fails(invoke, softmax_copy):
    result = invoke("baseline", "update", "--static", "--family", "softmax", "--variant", "fused",
                    "--variant", "naive", "--out", "static.json")
    assert result.exit_code == 0, result.output
    assert invoke("check", "--static", "--baseline", "static.json").exit_code == 0
    source = softmax_copy / "softmax_fused.cu"
    # twice the row in registers: 16 float4s a thread instead of 8
    source.write_text(source.read_text().replace(
        "#define UNROLL 4", "#undef VPT\n#define VPT 16\n#define UNROLL 4"))
    for extra in ((), ("--ratchet",)):
        result = invoke("check", "--static", "--baseline", "static.json", *extra)
        assert result.exit_code == 1, result.output
        assert "REGRESSION softmax/fused registers_per_thread" in result.stdout
        assert "softmax/naive" not in "".join(
            line for line in result.stdout.splitlines() if line.startswith("REGRESSION"))


def test_static_option_errors_are_exit_2(invoke, tmp_path):
    result = invoke("check", "--static", "--profile", "--baseline", tmp_path / "b.json")
    assert result.exit_code == 2 and "--static" in result.stderr
    profile_baseline = tmp_path / "p.json"
    profile_baseline.write_text(json.dumps({"kind": "paprof-baseline", "schema": 1, "entries": [
        {"family": "paged_decode", "variant": "v3", "shape": "",
         "metrics": {"duration_us": {"value": 3.0, "spread": 0.0, "n": 1}}}]}))
    result = invoke("check", "--static", "--baseline", profile_baseline)
    assert result.exit_code == 2 and "without --static" in result.stderr


# --- issue 29: what the static gate catches, and only that ---------------------------------

import importlib.util

from paprof import gate

SPILL = """\
extern "C" __global__ void __launch_bounds__(1024, 2) spill(const float* x, float* out, int n) {
  float v[48];
  int t = blockIdx.x * blockDim.x + threadIdx.x;
#pragma unroll
  for (int i = 0; i < 48; ++i) v[i] = x[t + i * n];
  float s = 0.f;
#pragma unroll
  for (int r = 0; r < 4; ++r)
#pragma unroll
    for (int i = 0; i < 48; ++i) s += v[i] * v[(i + r + 1) % 48];
  out[t] = s;
}
"""


def test_a_spilling_kernels_stack_is_its_local_memory():
    """cuobjdump says LOCAL:0 for a kernel that spills; its STACK is the local memory."""
    got = static.parse_res_usage(
        " Function spill:\n  REG:32 STACK:176 SHARED:0 LOCAL:0 CONSTANT[0]:548 TEXTURE:0\n")
    assert got == {"spill": {"local_mem_bytes": 176, "const_mem_bytes": 548}}


@needs_nvcc
@pytest.mark.parametrize("with_cuobjdump", [True, False], ids=["cuobjdump", "ptxas-only"])
def test_a_kernel_that_spills_shows_its_local_memory(tmp_path, with_cuobjdump):
    source = tmp_path / "spill.cu"
    source.write_text(SPILL)
    cuobjdump = static.find_cuobjdump() if with_cuobjdump else None
    if with_cuobjdump and cuobjdump is None:
        pytest.skip("no cuobjdump")
    counts = static.kernel_counts(static.CompileUnit((source,), arch="sm_90"), static.find_nvcc(),
                                  cuobjdump)["spill"]
    assert counts["spill_stores_bytes"] > 0 and counts["stack_frame_bytes"] > 0
    assert counts["local_mem_bytes"] >= counts["stack_frame_bytes"]


# kernel_regex: the README's vadd family has 2 variants and 2 kernels, not 3 entries


@pytest.fixture
def newcomer(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("readme_example",
                                                  ROOT / "scripts" / "readme_example.py")
    readme_example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(readme_example)
    readme_example.write(tmp_path)
    monkeypatch.chdir(tmp_path / "my-kernels")
    registry.clear()
    saved = list(sys.path)
    yield tmp_path / "my-kernels"
    registry.clear()
    sys.path[:] = saved
    sys.modules.pop("vadd_family", None)


@needs_nvcc
def test_the_readme_vadd_gate_has_one_kernel_a_variant(invoke, newcomer):
    result = invoke("baseline", "update", "--static", "--family", "vadd", "--arch", "sm_90", "--out", "s.json")
    assert result.exit_code == 0, result.output
    names = [e["variant"] for e in json.loads((newcomer / "s.json").read_text())["entries"]]
    assert names == ["simple", "vec4"]  # 'vadd' no longer picks up vadd4 too


# instruction counts with an unchanged picture: reported, not failed


def _static_baseline(**metrics) -> gate.Baseline:
    values = {"registers_per_thread": 40, "spill_stores_bytes": 0, "spill_loads_bytes": 0,
              "stack_frame_bytes": 0, "local_mem_bytes": 0, "shared_mem_static_bytes": 1024,
              "const_mem_bytes": 400, "sass_total": 600, "sass_ffma": 30, "sass_bra": 20}
    values.update(metrics)
    entry = gate.Entry("toy", "v2", "n=1", {k: gate.Stat(float(v), 0.0, 1)
                                               for k, v in values.items()},
                          gate.Provenance(compiler="nvcc 13.0.88 sm_90"))
    return gate.Baseline(entries=[entry], gate="static")


def test_unrolled_counts_with_the_same_picture_are_reported():
    before = _static_baseline()
    now = _static_baseline(sass_total=900, sass_ffma=187, sass_bra=4).entries  # ffma +523 %
    verdict = gate.compare_to_baseline(before, now)
    assert verdict.passed and verdict.exit_code == 0
    moved = {r.metric: r.outcome for r in verdict.results if r.outcome != "same"}
    assert moved == {"sass_total": "reported", "sass_ffma": "reported", "sass_bra": "reported"}
    assert any("instruction counts changed (sass_total +300 (+50 %), sass_ffma +157 (+523.3 %)"
               in n and "--exact-counts" in n for n in verdict.notes)
    assert verdict.summary.endswith("3 instruction counts changed (reported, not failed)")
    exact = gate.compare_to_baseline(before, now, gate.Settings(exact_counts=True))
    assert not exact.passed and {r.metric for r in exact.regressions} == {
        "sass_total", "sass_ffma", "sass_bra"}


@pytest.mark.parametrize("moved", [{"registers_per_thread": 48}, {"spill_stores_bytes": 8},
                                   {"local_mem_bytes": 8}, {"shared_mem_static_bytes": 2048}])
def test_counts_that_come_with_a_picture_change_still_fail(moved):
    now = _static_baseline(sass_ffma=187, **moved).entries
    verdict = gate.compare_to_baseline(_static_baseline(), now)
    assert not verdict.passed
    assert "sass_ffma" in {r.metric for r in verdict.regressions}


def test_a_profile_baseline_keeps_its_exact_counts():
    before = _static_baseline()
    before.gate = "profile"
    verdict = gate.compare_to_baseline(before, _static_baseline(sass_ffma=187).entries)
    assert [r.metric for r in verdict.regressions] == ["sass_ffma"]


@pytest.fixture
def fake_static(monkeypatch, tmp_path):
    """``check --static`` against entries given by the test (no nvcc)."""
    path = tmp_path / "static.json"
    gate.save_baseline(_static_baseline(), path)
    now: list = []
    monkeypatch.setattr(static, "current_for", lambda baseline: (list(now), []))
    return path, now


def test_check_static_passing_is_one_line_not_an_empty_table(invoke, fake_static):
    path, now = fake_static
    now += _static_baseline().entries
    result = invoke("check", "--static", "--baseline", path)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == ("all 1 kernels unchanged (10 metrics each, as in the baseline; "
                        "--markdown and --junit list every one)")
    assert "┏" not in result.stdout and "variant" not in lines[0]
    assert any(l == f"note: {static.REACH_NOTE}" for l in lines)
    assert "launch-time settings (dynamic shared memory, grid" in static.REACH_NOTE


def test_check_static_reports_an_unroll_and_fails_it_with_exact_counts(invoke, fake_static):
    path, now = fake_static
    now += _static_baseline(sass_ffma=187).entries
    result = invoke("check", "--static", "--baseline", path)
    assert result.exit_code == 0, result.output
    assert "sass_ffma" in result.stdout and "reported" in result.stdout
    assert "registers_per_thread" not in result.stdout  # only what changed is listed
    result = invoke("check", "--static", "--baseline", path, "--exact-counts")
    assert result.exit_code == 1
    assert "REGRESSION toy/v2 sass_ffma" in result.stdout


@needs_nvcc
def test_a_deliberate_unroll_is_reported_not_failed(invoke, softmax_copy):
    result = invoke("baseline", "update", "--static", "--family", "softmax", "--variant", "naive",
                    "--out", "static.json")
    assert result.exit_code == 0, result.output
    assert f"note: {static.REACH_NOTE}" in result.stdout
    source = softmax_copy / "softmax_naive.cu"
    text = source.read_text()
    loop = "    for (int j = 0; j < cols; ++j) yr[j]"
    assert loop in text
    source.write_text(text.replace(loop, "#pragma unroll 8\n" + loop))
    result = invoke("check", "--static", "--baseline", "static.json")
    if "registers_per_thread" in result.stdout:  # this nvcc also moved a register
        pytest.skip("this nvcc changes the register count with the unroll")
    assert result.exit_code == 0, result.output
    assert "reported" in result.stdout and "instruction counts changed" in result.stdout
    assert invoke("check", "--static", "--baseline", "static.json",
                  "--exact-counts").exit_code == 1


# the cubin cache


def test_cache_dir_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.delenv(static.CACHE_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert static.cache_dir() == tmp_path / "xdg" / "paprof" / "cubins"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert static.cache_dir() == tmp_path / "home" / ".cache" / "paprof" / "cubins"
    monkeypatch.setenv(static.CACHE_ENV, str(tmp_path / "mine"))
    assert static.cache_dir() == tmp_path / "mine"
    monkeypatch.setenv(static.CACHE_ENV, "off")
    assert static.cache_dir() is None


def test_cache_key_follows_sources_headers_defines_arch_and_nvcc(monkeypatch, tmp_path):
    monkeypatch.setattr(static, "_nvcc_identity", lambda nvcc: f"release of {nvcc}")
    (tmp_path / "common.cuh").write_text("#define W 4\n")
    (tmp_path / "k.cu").write_text('#include "common.cuh"\nextern "C" __global__ void k() {}\n')
    unit = static.CompileUnit((tmp_path / "k.cu",), {"X": 1}, "sm_90")
    key = static.cache_key(unit, "nvcc")
    assert key == static.cache_key(static.CompileUnit((tmp_path / "k.cu",), {"X": 1}, "sm_90"), "nvcc")
    assert len(key) == 64
    others = {
        static.cache_key(static.CompileUnit(unit.sources, {"X": 2}, "sm_90"), "nvcc"),
        static.cache_key(static.CompileUnit(unit.sources, {"X": 1}, "sm_90a"), "nvcc"),
        static.cache_key(unit, "other-nvcc"),
    }
    (tmp_path / "common.cuh").write_text("#define W 8\n")  # only the header changes
    others.add(static.cache_key(unit, "nvcc"))
    (tmp_path / "k.cu").write_text('#include "common.cuh"\nextern "C" __global__ void k2() {}\n')
    others.add(static.cache_key(unit, "nvcc"))
    assert key not in others and len(others) == 5


@needs_nvcc
def test_a_second_gate_compiles_nothing(monkeypatch, tmp_path):
    monkeypatch.setenv(static.CACHE_ENV, str(tmp_path / "cache"))
    source = tmp_path / "spill.cu"
    source.write_text(SPILL)
    unit = static.CompileUnit((source,), arch="sm_90")
    nvcc, cuobjdump = static.find_nvcc(), static.find_cuobjdump()
    first = static.kernel_counts(unit, nvcc, cuobjdump)
    assert len(list((tmp_path / "cache").iterdir())) == 1

    def no_compile(*args):
        raise AssertionError("compiled again")

    monkeypatch.setattr(static, "compile_cubin", no_compile)
    monkeypatch.setattr(static, "_cuobjdump", no_compile)
    assert static.kernel_counts(unit, nvcc, cuobjdump) == first
    source.write_text(SPILL.replace("48", "40"))  # changed sources: compiled again
    with pytest.raises(AssertionError, match="compiled again"):
        static.kernel_counts(unit, nvcc, cuobjdump)


def test_a_broken_or_unwritable_cache_is_no_cache(monkeypatch, tmp_path):
    monkeypatch.setattr(static, "_nvcc_identity", lambda nvcc: "v")
    source = tmp_path / "k.cu"
    source.write_text("x")
    unit = static.CompileUnit((source,), arch="sm_90")
    calls = []

    def fake_compile(unit, folder, nvcc):
        calls.append(1)
        (folder / "unit.cubin").write_bytes(b"cubin")
        return "log", folder / "unit.cubin"

    monkeypatch.setattr(static, "compile_cubin", fake_compile)
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    monkeypatch.setenv(static.CACHE_ENV, str(blocked / "cache"))
    log, cubin, entry = static.cached_cubin(unit, "nvcc", tmp_path)
    assert (log, entry) == ("log", None) and calls == [1]
    monkeypatch.setenv(static.CACHE_ENV, str(tmp_path / "cache"))
    static.cached_cubin(unit, "nvcc", tmp_path)
    entry = tmp_path / "cache" / static.cache_key(unit, "nvcc")
    (entry / "unit.cubin").write_bytes(b"")  # broken: compiled again, then whole
    static.cached_cubin(unit, "nvcc", tmp_path)
    assert calls == [1, 1, 1] and (entry / "unit.cubin").read_bytes() == b"cubin"
    static.cached_cubin(unit, "nvcc", tmp_path)
    assert calls == [1, 1, 1]
