"""The static gate: compile units, ptxas / cuobjdump parsing, and ``check --static`` on the
shipped .cu files (paged_decode at its default shape, the softmax example), no GPU."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest_profiler import paprof_cli  # noqa: F401 (fixture)
from paprof import registry, static
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
    assert static.parse_res_usage(RES) == {"k_one": {"local_mem_bytes": 24,
                                                     "const_mem_bytes": 400}}
    mix = static.parse_sass(SASS)["k_one"]
    assert (mix["sass_total"], mix["sass_ldg"], mix["sass_ldg_128"], mix["sass_ffma"],
            mix["sass_bar"], mix["sass_stl"], mix["sass_hmma"]) == (6, 2, 1, 1, 1, 1, 0)


def test_compile_units_of_both_forms():
    pd = registry.family("paged_decode")
    (unit,) = static.compile_units(pd.variant("v5"), pd.parse(""))
    assert unit.sources[0].name == "v5_fast.cu" and unit.defines["KERNEL_NAME"] == "paged_decode_v5"
    assert len(static.compile_units(pd.variant("v6"), pd.parse(""))) == 2


def test_missing_nvcc_is_one_line(monkeypatch):
    monkeypatch.setattr(static, "_tools", lambda name, wheel=False: None)
    with pytest.raises(UserError, match="nvcc not found"):
        static.find_nvcc()


@pytest.fixture
def invoke(paprof_cli):
    def run(*args):
        return CliRunner().invoke(paprof_cli, [str(a) for a in args], catch_exceptions=False)

    return run


@needs_nvcc
def test_paged_decode_static_gate_passes_on_itself(invoke, tmp_path):
    path = tmp_path / "static.json"
    result = invoke("baseline", "update", "--static", "--variant", "v3", "--variant", "v6",
                    "--out", path)
    assert result.exit_code == 0, result.output
    data = json.loads(path.read_text())
    assert data["gate"] == "static" and data["schema"] == 2
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
