"""The worked example ``examples/custom_family/``: a user's repository with its own family.

Discovery through ``[tool.paprof]``, the parameters, the float64 reference, the work
model, the CUDA sources (nvcc, where it is on PATH) and the declarative launch values run
anywhere; the check of every variant against the reference needs the GPU (``gpu``).
"""

from __future__ import annotations

import ast
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from paprof import registry
from paprof.cli import main
from paprof.errors import ShapeError
from paprof.family import CallableVariant, CudaVariant, Work

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "custom_family"
IDS = ["naive", "block", "fused", "torch", "triton"]
CUDA_IDS = ["naive", "block", "fused"]
NVCC = shutil.which("nvcc")


def _ours(module) -> bool:
    file = getattr(module, "__file__", None) or ""
    return file.startswith(str(EXAMPLE))


@pytest.fixture
def fam(monkeypatch):
    """The ``softmax`` family as paprof discovers it from inside the example folder; the
    folder leaves ``sys.path`` and its modules leave ``sys.modules`` afterwards."""
    registry.clear()
    monkeypatch.chdir(EXAMPLE)
    monkeypatch.setattr(sys, "path", list(sys.path))  # discovery inserts the folder
    try:
        yield registry.discover()["softmax"]
    finally:
        registry.clear()
        for name in [n for n, m in list(sys.modules.items()) if _ours(m)]:
            del sys.modules[name]


def _value(x, params):
    return x(params) if callable(x) else x


# -- discovery -----------------------------------------------------------------------------


@pytest.mark.lab
def test_discovered_through_tool_paprof(fam):
    assert "[tool.paprof]" in fam.origin
    assert str(EXAMPLE / "pyproject.toml") in fam.origin
    assert fam.module == "softmax_family"
    assert fam.folder == EXAMPLE
    assert "paged_decode" in registry.discover()  # the built-in family is still there


def test_list_json_shows_the_family(fam):
    result = CliRunner().invoke(main, ["list", "--json"])
    assert result.exit_code == 0, result.output
    data = {f["family"]: f for f in json.loads(result.output)}
    soft = data["softmax"]
    assert "[tool.paprof]" in soft["origin"]
    assert [(p["name"], p["kind"], p["default"]) for p in soft["params"]] == [
        ("rows", "int", 16384), ("cols", "int", 4096)]
    assert soft["default_shape"] == "rows=16384,cols=4096"
    assert [v["variant"] for v in soft["variants"]] == IDS
    assert [v["kind"] for v in soft["variants"]] == ["cuda", "cuda", "cuda", "callable", "callable"]
    for v in soft["variants"]:
        assert v["idea"] and "\n" not in v["idea"] and v["launch"]
    by_id = {v["variant"]: v for v in soft["variants"]}
    assert by_id["fused"]["kernel_regex"] == "^softmax_fused$"
    assert re.search(by_id["torch"]["kernel_regex"], "cunn_SoftMaxForwardReg")  # torch 2.11's names
    assert re.search(by_id["torch"]["kernel_regex"], "softmax_warp_forward")
    assert by_id["triton"]["kernel_regex"] == "softmax_triton_kernel"
    assert by_id["torch"]["fn"] == "softmax_torch:softmax" and by_id["torch"]["arrays"] == "torch"


def test_list_text_names_the_variants(fam):
    result = CliRunner().invoke(main, ["list", "--family", "softmax"])
    assert result.exit_code == 0, result.output
    assert "--shape rows=16384,cols=4096" in result.output
    for vid in IDS:
        assert re.search(rf"^  {vid}\s+\[(cuda|callable)\]", result.output, re.M)


def test_resolve_keeps_story_order(fam):
    assert [v.id for v in registry.resolve(["all"], "softmax")] == IDS
    assert [v.id for v in registry.resolve(["fused", "naive", "fused"], "softmax")] == ["fused", "naive"]
    assert registry.get("softmax/triton").family == "softmax"


def test_family_module_imports_with_numpy_only(monkeypatch):
    for name in ("cupy", "torch", "triton"):
        monkeypatch.setitem(sys.modules, name, None)  # importing any of them now fails
    registry.clear()
    monkeypatch.chdir(EXAMPLE)
    monkeypatch.setattr(sys, "path", list(sys.path))
    try:
        fam = registry.discover()["softmax"]
        assert [v.id for v in fam.variants] == IDS
    finally:
        registry.clear()
        for name in [n for n, m in list(sys.modules.items()) if _ours(m)]:
            del sys.modules[name]


def test_callable_modules_define_softmax():
    for module, needs in (("softmax_torch", "torch"), ("softmax_triton", "triton")):
        tree = ast.parse((EXAMPLE / f"{module}.py").read_text())
        funcs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
        assert [a.arg for a in funcs["softmax"].args.args] == ["inputs", "out", "params"]
        imports = {a.name for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))
                   for a in getattr(n, "names", [])}
        assert needs in imports or f"{needs}.language" in imports


# -- parameters ----------------------------------------------------------------------------


def test_param_defaults_and_round_trip(fam):
    size = fam.params()
    assert (size.rows, size.cols) == (16384, 4096)
    p = fam.parse("rows=4096,cols=1000")
    assert (p.rows, p.cols) == (4096, 1000)
    assert p.spec() == "rows=4096,cols=1000"
    assert fam.parse(p.spec()) == p
    assert p.slug() == "rows4096_cols1000"
    assert fam.params.from_dict(p.to_dict()) == p
    assert fam.parse("n=7,m=3") == fam.parse("rows=3,cols=7")  # aliases
    assert fam.parse("cols=65536,rows=1").cols == 65536  # the bounds are inclusive


@pytest.mark.parametrize("text, says", [
    ("cols=0", "cols must be at least 1"),
    ("cols=70000", "cols must be at most 65536"),
    ("rows=0", "rows must be at least 1"),
    ("rows=2000000", "rows must be at most 1048576"),
    ("rows=abc", "rows must be an integer"),
    ("rows=4,rows=8", "given twice"),
    ("rows=4,m=8", "given twice"),
    ("depth=3", "unknown parameter 'depth'"),
    ("rows=1048576,cols=65536", "at most 2**31"),
])
def test_param_errors_are_one_line(fam, text, says):
    with pytest.raises(ShapeError) as err:
        fam.parse(text)
    assert says in str(err.value)
    assert "\n" not in str(err.value)


# -- problem: inputs, reference, work --------------------------------------------------------


def _softmax_by_logsumexp(x):
    x = x.astype(np.float64)
    return np.exp(x - np.logaddexp.reduce(x, axis=1, keepdims=True))


@pytest.mark.parametrize("rows, cols", [(1, 1), (7, 3), (33, 1000), (4, 4097)])
def test_reference_is_a_row_softmax(fam, rows, cols):
    p = fam.params(rows=rows, cols=cols)
    inputs = fam.inputs(p, 123, np)
    ref = fam.reference(p, inputs, np)
    assert ref.shape == (rows, cols) and ref.dtype == np.float64
    np.testing.assert_allclose(ref, _softmax_by_logsumexp(inputs["x"]), rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(ref.sum(axis=1), 1.0, rtol=1e-12)
    assert (ref > 0).all()


def test_reference_is_stable_for_large_values(fam):
    p = fam.params(rows=2, cols=3)
    x = np.array([[1000.0, 1001.0, 1002.0], [-1000.0, -1000.0, -1000.0]], np.float32)
    ref = fam.reference(p, {"x": x}, np)
    assert np.isfinite(ref).all()
    np.testing.assert_allclose(ref[1], 1 / 3)
    np.testing.assert_allclose(ref[0], _softmax_by_logsumexp(x)[0])


def test_inputs_are_random_and_not_zeros(fam):
    p = fam.params(rows=64, cols=512)
    a, b, again = (fam.inputs(p, s, np)["x"] for s in (1, 2, 1))
    assert a.shape == (64, 512) and a.dtype == np.float32
    assert np.count_nonzero(a) == a.size
    assert 0.9 < float(a.std()) < 1.1 and abs(float(a.mean())) < 0.05
    assert not np.array_equal(a, b)
    assert np.array_equal(a, again)
    out = fam.output(p, np)
    assert out.shape == (64, 512) and out.dtype == np.float32


def test_tolerance_and_work(fam):
    p = fam.params()
    assert fam.tolerance_for(p) == 1e-5
    work = fam.work(p)
    assert isinstance(work, Work)
    assert work.bytes == 2 * 4 * 16384 * 4096 == 536870912
    assert work.flops == 5 * 16384 * 4096
    assert work.flop_kind == "fp32"
    assert work.intensity == pytest.approx(0.625)


# -- the CUDA variants: sources and launch values --------------------------------------------

SHAPES = [(4096, 1000), (16384, 4096), (1024, 32768), (4, 65536), (3, 1001), (5, 3), (2**20, 1)]


@pytest.mark.parametrize("rows, cols", SHAPES)
def test_declarative_launch_values(fam, rows, cols):
    p = fam.params(rows=rows, cols=cols)
    fake = {"x": np.zeros((1, 1), np.float32)}
    out = np.zeros((1, 1), np.float32)
    for vid in CUDA_IDS:
        v = fam.variant(vid)
        assert isinstance(v, CudaVariant) and v.build is None
        v.check(p)
        grid, block = tuple(_value(v.grid, p)), tuple(_value(v.block, p))
        smem = int(_value(v.shared_mem, p) or 0)
        assert len(grid) == 3 and len(block) == 3
        assert 1 <= grid[0] <= 2**31 - 1 and grid[1:] == (1, 1)
        assert block[0] % 32 == 0 and 32 <= block[0] <= 1024 and block[1:] == (1, 1)
        assert 0 <= smem <= 48 * 1024
        args = v.args(p, fake, out)
        assert args[0] is fake["x"] and args[1] is out
        assert all(isinstance(a, np.int32) for a in args[2:])
        if vid == "naive":  # a thread per row
            assert grid[0] * block[0] >= rows > (grid[0] - 1) * block[0]
            assert [int(a) for a in args[2:]] == [rows, cols]
        else:  # a CTA per row
            assert grid[0] == rows
            assert [int(a) for a in args[2:]] == [cols]
    fused = fam.variant("fused")
    threads = _value(fused.block, p)[0]
    defines = _value(fused.defines, p)
    assert defines["THREADS"] == threads
    assert _value(fused.shared_mem, p) == 2 * (threads // 32) * 4
    if defines["VPT"]:  # the row fits in registers: 8 float4s a thread at most
        assert 1 <= defines["VPT"] <= 8 and threads * defines["VPT"] * 4 >= cols
    else:
        assert cols > 1024 * 8 * 4 and threads == 1024


def test_fused_picks_registers_up_to_32k_columns(fam):
    def cfg(cols):
        d = _value(fam.variant("fused").defines, fam.params(rows=1, cols=cols))
        return d["THREADS"], d["VPT"]

    assert cfg(1000) == (128, 2)
    assert cfg(4096) == (128, 8)
    assert cfg(32768) == (1024, 8)
    assert cfg(32769) == (1024, 0)
    assert cfg(65536) == (1024, 0)


def _nvcc(tmp_path, source: Path, defines: dict) -> str:
    cmd = [NVCC, "-arch=sm_90", "-std=c++17", "-c", "-o", str(tmp_path / "k.o"),
           f"-I{source.parent}", "-Xptxas", "-v",
           *[f"-D{k}={v}" for k, v in sorted(defines.items())], str(source)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stderr


@pytest.mark.skipif(NVCC is None, reason="nvcc is not on PATH")
@pytest.mark.parametrize("vid", CUDA_IDS)
def test_sources_compile(fam, tmp_path, vid):
    v = fam.variant(vid)
    for source in v.source_paths():
        assert source.is_file()
        log = _nvcc(tmp_path, source, _value(v.defines, fam.params()) or {})
        assert re.search(rf"Compiling entry function '{v.kernel}'", log), log


@pytest.mark.skipif(NVCC is None, reason="nvcc is not on PATH")
@pytest.mark.parametrize("cols", [1000, 4096, 8192, 32768, 65536])
def test_fused_compiles_without_spills(fam, tmp_path, cols):
    v = fam.variant("fused")
    defines = _value(v.defines, fam.params(rows=1, cols=cols))
    log = _nvcc(tmp_path, v.source_paths()[0], defines)
    props = re.search(r"Function properties for softmax_fused\n\s*\d+ bytes stack frame, "
                      r"(\d+) bytes spill stores", log)
    assert props and int(props[1]) == 0, log


# -- on the GPU: every variant against the float64 reference ---------------------------------

GPU_SHAPES = [(4096, 1000), (16384, 4096), (1024, 32768), (64, 65536), (37, 1001), (300, 3)]


@pytest.mark.gpu
@pytest.mark.parametrize("rows, cols", GPU_SHAPES)
@pytest.mark.parametrize("vid", IDS)
def test_variant_matches_reference(fam, vid, rows, cols):
    from paprof.measure.kernels import harness

    variant = fam.variant(vid)
    if isinstance(variant, CallableVariant):
        pytest.importorskip("torch")
        if vid == "triton":
            pytest.importorskip("triton")
    params = fam.params(rows=rows, cols=cols)
    prep = harness.prepare(fam, variant, params, seed=rows * 7 + cols)
    check = harness.verify(prep)
    assert check.passed, f"{vid} {params.slug()}: rel {check.rel_error} max abs {check.max_abs_error}"
