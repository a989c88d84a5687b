"""The "Your own kernels" family (docs/your-kernels.md), exactly as a newcomer copies it."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from paprof import registry

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("readme_example", ROOT / "scripts" / "readme_example.py")
readme_example = importlib.util.module_from_spec(spec)
spec.loader.exec_module(readme_example)


@pytest.fixture
def newcomer(tmp_path, monkeypatch):
    readme_example.write(tmp_path)
    repo = tmp_path / "my-kernels"
    monkeypatch.chdir(repo)
    registry.clear()
    saved = list(sys.path)
    yield repo
    registry.clear()
    sys.path[:] = saved
    sys.modules.pop("vadd_family", None)


def test_the_readme_shows_three_files_and_the_family_is_short():
    files = readme_example.files()
    assert sorted(files) == ["my-kernels/pyproject.toml", "my-kernels/vadd.cu",
                             "my-kernels/vadd_family.py"]
    code = [line for line in files["my-kernels/vadd_family.py"].splitlines() if line.strip()]
    assert len(code) < 40  # the promise: a family in under 40 lines of Python


def test_the_family_is_found_and_its_reference_is_right(newcomer):
    fam = registry.family("vadd")
    assert [v.id for v in fam.variants] == ["simple", "vec4"]
    p = fam.parse("n=1000")
    inputs = fam.inputs(p, 1, np)
    assert not np.array_equal(inputs["x"], fam.inputs(p, 2, np)["x"])
    np.testing.assert_allclose(fam.reference(p, inputs, np), inputs["x"] + inputs["y"].astype(float))
    assert fam.work(p).bytes == 12_000
    vec4 = fam.variant("vec4")
    assert vec4.grid(p) == (1,) and vec4.args(p, inputs, None)[-1] == 250


def test_cli_on_the_newcomers_family(newcomer, monkeypatch):
    from paprof.cli import main

    listed = CliRunner().invoke(main, ["list"])
    assert listed.exit_code == 0 and "vadd  ([tool.paprof] of " in listed.output
    monkeypatch.setenv("PATH", "/nonexistent")  # no ncu, no GPU: the parameters are checked first
    bad = CliRunner().invoke(main, ["run", "--family", "vadd", "--variant", "vec4", "--shape", "n=6"])
    assert bad.exit_code == 2
    assert bad.output == "paprof: error: vec4 reads float4s: n must be a multiple of 4, got 6\n"


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
def test_the_newcomers_kernels_compile(newcomer):
    done = subprocess.run([shutil.which("nvcc"), "-arch=sm_90", "-c", "-o", "vadd.o", "vadd.cu"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


@pytest.mark.gpu
def test_the_newcomers_variants_verify_on_the_gpu(newcomer):
    from paprof.measure.kernels import harness

    fam = registry.family("vadd")
    for n in (1000, 1 << 24):
        params = fam.parse(f"n={n}")
        for v in fam.variants:
            assert harness.verify(harness.prepare(fam, v, params, seed=n)).passed, (v.id, n)
