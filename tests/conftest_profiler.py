"""Fixtures for the profiler tests: a fake ncu/nvidia-smi on PATH, a fake launcher.

Import the fixtures you use into the test module (``from conftest_profiler import
fake_bin``); pytest finds them there.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from paprof.profiler import profile

FAKE_DIR = Path(__file__).resolve().parent / "fake_ncu"
REPO = Path(__file__).resolve().parents[1]
REPORT_ENV = "PAPROF_TEST_NCU_REP"
"""A real .ncu-rep for the end-to-end test; default: the first under examples/h200/."""
FAKE_VARS = ("FAKE_NCU_MODE", "FAKE_NCU_REPORT", "FAKE_NCU_ARGV", "FAKE_NCU_PASSES", "FAKE_NVIDIA_SMI")


def real_report() -> Path | None:
    """A report ncu 2025.3 wrote on the H200, or None while there is none yet."""
    named = os.environ.get(REPORT_ENV)
    if named:
        return Path(named)
    found = sorted((REPO / "examples" / "h200").rglob("*.ncu-rep"))
    return found[0] if found else None


@pytest.fixture
def fake_bin(tmp_path, monkeypatch) -> Path:
    """tests/fake_ncu/{ncu,nvidia-smi} first on PATH (run by this Python); $NCU unset."""
    folder = tmp_path / "fake-bin"
    folder.mkdir()
    for script in ("ncu", "nvidia-smi"):
        text = (FAKE_DIR / script).read_text().split("\n", 1)[1]
        target = folder / script
        target.write_text(f"#!{sys.executable}\n{text}")
        target.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.delenv("NCU", raising=False)
    for var in FAKE_VARS:
        monkeypatch.delenv(var, raising=False)
    return folder


def _arg(argv, name):
    return argv[argv.index(name) + 1]


@dataclass
class FakeLauncher:
    """Replaces ``profile.run_launcher`` (the GPU step): records argv, writes ``--result``."""

    returncode: int = 0
    output: str = ""
    result: dict = field(default_factory=dict)
    calls: list = field(default_factory=list)
    envs: list = field(default_factory=list)

    def __call__(self, argv, env):
        argv = list(argv)
        self.calls.append(argv)
        self.envs.append(dict(env))
        data = {
            "family": _arg(argv, "--family"),
            "variant": _arg(argv, "--variant"),
            "shape": _arg(argv, "--shape"),
            "gpu": "NVIDIA H200",
            "kernels": [f"{_arg(argv, '--family')}_{_arg(argv, '--variant')}"],
            "check": {"passed": True, "rel_error": 1.2e-7, "max_abs_error": 3.0e-7, "tolerance": 1e-5},
            "duration_us_median": 3350.0,
            "work": {"bytes": 2147483648, "flops": 4294967296, "flop_kind": "fp32"},
            "bandwidth_tbs": 4.1,
        }
        data.update(self.result)
        if self.returncode == 0:
            Path(_arg(argv, "--result")).write_text(json.dumps(data))
        return profile.LauncherOutcome(self.returncode, self.output)


@pytest.fixture
def fake_launcher(monkeypatch) -> FakeLauncher:
    fake = FakeLauncher()
    monkeypatch.setattr(profile, "run_launcher", fake)
    return fake


@pytest.fixture
def paprof_cli():
    """The ``paprof`` click group, with the CLI's one-line error handling."""
    from paprof.cli import main

    return main
