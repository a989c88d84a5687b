"""CLI wiring of the kernel side: ``paprof list``, ``paprof bench`` and the launcher's
exit codes on a machine without a GPU (bad input must fail before any GPU is needed)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from paprof.cli import main
from paprof import registry
from paprof.measure.kernels import gpu


def run(*args):
    return CliRunner().invoke(main, list(args))


@pytest.mark.lab
def test_list_json_names_every_variant_with_its_idea():
    result = run("list", "--json")
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    assert [f["family"] for f in data] == ["flash_fwd", "paged_decode"]  # installed: by name
    fam = data[1]
    assert fam["origin"] == "entry point paged_decode of paprof-kernels"
    assert fam["module"] == "paprof_kernels.paged_decode"
    assert [p["name"] for p in fam["params"]][:3] == ["batch", "q_heads", "kv_heads"]
    variants = fam["variants"]
    assert [d["variant"] for d in variants] == ["baseline", "v1", "v2", "v3", "v4", "handbook", "v5", "v6", "v7"]
    assert all(d["family"] == "paged_decode" and d["idea"] and d["kind"] == "cuda" for d in variants)
    assert all(set(d) >= {"family", "variant", "idea", "kernel_regex", "sources"} for d in variants)
    flash = data[0]
    assert flash["ceiling"] == "gemm" and fam["ceiling"] == "read"
    assert [d["variant"] for d in flash["variants"]][:2] == ["handbook", "mma"]
    assert flash["gate_metrics"] == ["tensor_pipe_pct", "sm_throughput_pct", "duration_us", "work_tflops"]


@pytest.mark.lab
def test_list_text_groups_by_family():
    for args in (["--verbose"], ["-v"], ["--family", "paged_decode"]):
        result = run("list", *args)
        assert result.exit_code == 0
        first = "paged_decode" if "--family" in args else "flash_fwd"
        assert result.stdout.startswith(f"{first}  (entry point {first} of paprof-kernels)")
        assert "--shape batch=64,q_heads=32" in result.stdout
        assert "  v3 " in result.stdout and "launch: grid (kv_heads, batch)" in result.stdout
    assert "flash_fwd" not in result.stdout  # --family: that one only


@pytest.mark.lab
def test_list_is_one_line_a_family_and_a_variant():
    from paprof import registry

    result = run("list")
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    fams = list(registry.discover().values())
    assert len(lines) == len(fams) + sum(len(f.variants) for f in fams) + 1
    assert max(len(line) for line in lines) <= 100
    assert lines[0].startswith("flash_fwd  (entry point flash_fwd of paprof-kernels): ")
    paged = lines.index(next(line for line in lines if line.startswith("paged_decode  (")))
    assert re.match(r"  v3 +\[cuda\] GQA reuse", lines[paged + 4])
    assert "--shape" not in result.stdout and "launch:" not in result.stdout
    assert lines[-1].startswith("(paprof list --family F or --verbose: ")


@pytest.mark.lab
def test_list_puts_the_users_families_first(monkeypatch):
    from paprof import registry

    monkeypatch.chdir(Path(__file__).resolve().parents[1] / "examples" / "custom_family")
    registry.clear()
    try:
        short = run("list").stdout.splitlines()
        full = run("list", "--verbose").stdout
        data = json.loads(run("list", "--json").stdout)
    finally:
        registry.clear()
    assert short[0].startswith("softmax  ([tool.paprof] of ")
    assert [l.split()[0] for l in short if not l.startswith(" ")][:3] == [
        "softmax", "flash_fwd", "paged_decode"]
    assert full.startswith("softmax  ([tool.paprof] of ") and "--shape rows=16384" in full
    # --json stays complete: every family, every variant, with its parameters
    assert {f["family"] for f in data} == {"softmax", "paged_decode", "flash_fwd"}
    assert all(f["params"] and f["variants"] for f in data)


@pytest.mark.lab
@pytest.mark.parametrize(
    "args, message",
    [
        (["--shape", "q_heads=30,kv_heads=8"], "q_heads (30) must be a multiple of kv_heads (8)"),
        (["--shape", "batch=0"], "batch must be at least 1, got 0"),
        (["--variant", "v9"], "unknown variant 'v9'"),
        (["--shape", "context=100,page=16,max_pages=2"], "beyond the block table's 2 pages"),
    ],
)
def test_bench_bad_input_is_one_line_and_exit_2(args, message):
    result = run("bench", "--family", "paged_decode", *args)
    assert result.exit_code == 2
    assert result.stderr.strip() == f"paprof: error: {result.stderr.strip().split('error: ', 1)[1]}"
    assert message in result.stderr
    assert "Traceback" not in result.output + result.stderr


@pytest.mark.lab
def test_bench_without_cupy_says_what_to_install(monkeypatch):
    def no_cupy():
        raise gpu.UserError("CuPy is not installed: install the GPU extra (pip install 'paprof[gpu]') on a CUDA machine")

    monkeypatch.setattr(gpu, "cupy", no_cupy)
    result = run("bench", "--variant", "v2")
    assert result.exit_code == 2
    assert "CuPy is not installed" in result.stderr


@pytest.mark.lab
@pytest.mark.parametrize(
    "args, code, message",
    [
        (["--variant", "nope"], 2, "unknown variant 'nope'"),
        (["--variant", "paged_decode/handbook", "--shape", "context=20000"], 2, "exceeds its cap of 12224 tokens"),
        (["--variant", "v2", "--shape", "head_dim=96"], 2, "head_dim must be one of 32, 64, 128, 256"),
        (["--variant", "v5", "--shape", "dtype=fp16,head_dim=48"], 2, "for fp16 head_dim must be one of"),
        (["--variant", "v3", "--shape", "dtype=bf16"], 2, "v3 reads fp32 K/V only"),
    ],
)
def test_launcher_rejects_shapes_before_touching_a_gpu(args, code, message):
    done = subprocess.run([sys.executable, "-m", "paprof.measure.kernels.launch", *args],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == code, done.stderr
    assert message in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_every_variant_declares_sources_that_exist():
    for v in registry.variants():
        for path in v.source_paths():
            assert path.is_file(), path
