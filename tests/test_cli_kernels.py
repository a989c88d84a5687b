"""CLI wiring of the kernel side: ``paprof list``, ``paprof bench`` and the launcher's
exit codes on a machine without a GPU (bad input must fail before any GPU is needed)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

from paprof.cli import main
from paprof import registry
from paprof.kernels import gpu


def run(*args):
    return CliRunner().invoke(main, list(args))


def test_list_json_names_every_variant_with_its_idea():
    result = run("list", "--json")
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    assert [f["family"] for f in data] == ["paged_decode", "flash_fwd"]
    fam = data[0]
    assert fam["origin"] == "built-in" and fam["module"] == "paprof.families.paged_decode"
    assert [p["name"] for p in fam["params"]][:3] == ["batch", "q_heads", "kv_heads"]
    variants = fam["variants"]
    assert [d["variant"] for d in variants] == ["baseline", "v1", "v2", "v3", "v4", "handbook", "v5", "v6", "v7"]
    assert all(d["family"] == "paged_decode" and d["idea"] and d["kind"] == "cuda" for d in variants)
    assert all(set(d) >= {"family", "variant", "idea", "kernel_regex", "sources"} for d in variants)
    flash = data[1]
    assert flash["ceiling"] == "gemm" and fam["ceiling"] == "read"
    assert [d["variant"] for d in flash["variants"]][:2] == ["handbook", "mma"]
    assert flash["gate_metrics"] == ["tensor_pipe_pct", "sm_throughput_pct", "duration_us", "work_tflops"]


def test_list_text_groups_by_family():
    result = run("list")
    assert result.exit_code == 0
    assert result.stdout.startswith("paged_decode  (built-in)")
    assert "--shape batch=64,q_heads=32" in result.stdout
    assert "  v3 " in result.stdout and "launch: grid (kv_heads, batch)" in result.stdout


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
    result = run("bench", *args)
    assert result.exit_code == 2
    assert result.stderr.strip() == f"paprof: error: {result.stderr.strip().split('error: ', 1)[1]}"
    assert message in result.stderr
    assert "Traceback" not in result.output + result.stderr


def test_bench_without_cupy_says_what_to_install(monkeypatch):
    def no_cupy():
        raise gpu.UserError("CuPy is not installed: install the GPU extra (pip install 'paprof[gpu]') on a CUDA machine")

    monkeypatch.setattr(gpu, "cupy", no_cupy)
    result = run("bench", "--variant", "v2")
    assert result.exit_code == 2
    assert "CuPy is not installed" in result.stderr


@pytest.mark.parametrize(
    "args, code, message",
    [
        (["--variant", "nope"], 2, "unknown variant 'nope'"),
        (["--variant", "handbook", "--shape", "context=20000"], 2, "exceeds its cap of 12224 tokens"),
        (["--variant", "v2", "--shape", "head_dim=96"], 2, "head_dim must be one of 32, 64, 128, 256"),
        (["--variant", "v5", "--shape", "dtype=fp16,head_dim=48"], 2, "for fp16 head_dim must be one of"),
        (["--variant", "v3", "--shape", "dtype=bf16"], 2, "v3 reads fp32 K/V only"),
    ],
)
def test_launcher_rejects_shapes_before_touching_a_gpu(args, code, message):
    done = subprocess.run([sys.executable, "-m", "paprof.kernels.launch", *args],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == code, done.stderr
    assert message in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_every_variant_declares_sources_that_exist():
    for v in registry.variants():
        for path in v.source_paths():
            assert path.is_file(), path
