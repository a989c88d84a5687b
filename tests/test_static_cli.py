"""``baseline update --static`` at several shapes of a family in one baseline file, and
``check --static`` checking each of them (issue 29)."""

from __future__ import annotations

import json
import shutil

import pytest
from click.testing import CliRunner

from paprof import gate
from paprof.measure import static
from paprof.cli import main

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")


def _invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture
def fake_compiler(monkeypatch):
    """``static_entries`` without nvcc: the registers of v3 follow head_dim, so each
    shape has its own numbers; ``calls`` records the shapes compiled."""
    calls: list[str] = []
    registers = {"head_dim": 0}

    def entries(family, params, variants, arch=None):
        calls.append(params.spec())
        value = float(params.head_dim // 2 + registers["head_dim"])
        metrics = {"registers_per_thread": gate.Stat(value, 0.0, 1),
                   "spill_stores_bytes": gate.Stat(0.0, 0.0, 1),
                   "shared_mem_static_bytes": gate.Stat(0.0, 0.0, 1)}
        return [gate.Entry(family.name, "v3", params.spec(), metrics,
                           gate.Provenance(compiler="nvcc fake sm_90"))], []

    monkeypatch.setattr(static, "static_entries", entries)
    return calls, registers


@pytest.mark.lab
def test_one_baseline_holds_every_shape_and_check_checks_each(tmp_path, fake_compiler):
    calls, registers = fake_compiler
    out = tmp_path / "static.json"
    made = _invoke("baseline", "update", "--static", "--variant", "v3", "--shape", "head_dim=64",
                   "--shape", "head_dim=128", "--shape", "head_dim=64", "--out", out)
    assert made.exit_code == 0, made.output
    shapes = [e["shape"] for e in json.loads(out.read_text())["entries"]]
    assert len(shapes) == 2 and "head_dim=64" in shapes[0] and "head_dim=128" in shapes[1]
    assert "wrote" in made.stdout and "(2 kernels" in made.stdout
    calls.clear()
    passed = _invoke("check", "--static", "--baseline", out)
    assert passed.exit_code == 0, passed.output
    assert sorted(calls) == sorted(shapes)  # each shape compiled again and checked
    assert "all 2 kernels unchanged" in passed.stdout
    registers["head_dim"] = 8  # every shape's kernel now uses 8 more registers
    failed = _invoke("check", "--static", "--baseline", out)
    assert failed.exit_code == 1
    regressions = [l for l in failed.stdout.splitlines() if l.startswith("REGRESSION")]
    assert len(regressions) == 2 and all("registers_per_thread" in l for l in regressions)


def test_shapes_go_with_static_only(tmp_path):
    result = _invoke("baseline", "update", "--runs", tmp_path, "--shape", "batch=8",
                     "--out", tmp_path / "b.json")
    assert result.exit_code == 2 and "--static" in result.stderr


@pytest.mark.lab
@needs_nvcc
def test_two_shapes_compiled_by_nvcc(tmp_path):
    out = tmp_path / "static.json"
    made = _invoke("baseline", "update", "--static", "--variant", "v3", "--shape", "head_dim=64",
                   "--shape", "head_dim=128", "--out", out)
    assert made.exit_code == 0, made.output
    entries = json.loads(out.read_text())["entries"]
    assert [e["variant"] for e in entries] == ["v3", "v3"]
    assert len({e["shape"] for e in entries}) == 2
    result = _invoke("check", "--static", "--baseline", out, "--variant", "v3")
    assert result.exit_code == 0, result.output
    assert "all 2 kernels unchanged" in result.stdout
