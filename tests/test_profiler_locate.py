"""Finding ncu and the ncu_report module, with temporary install folders."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from paprof.errors import UserError
from paprof.read import locate


def make_exe(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


@pytest.fixture
def roots(tmp_path):
    """An empty PATH folder, an install root and a CUDA ncu path, none populated."""
    (tmp_path / "bin").mkdir()
    return {
        "environ": {"PATH": str(tmp_path / "bin")},
        "install_root": tmp_path / "nsight-compute",
        "cuda_ncu": tmp_path / "cuda" / "bin" / "ncu",
    }


def test_ncu_env_wins(tmp_path, roots):
    named = make_exe(tmp_path / "elsewhere" / "ncu")
    make_exe(tmp_path / "bin" / "ncu")
    roots["environ"]["NCU"] = str(named)
    assert locate.find_ncu(**roots) == str(named)


def test_ncu_env_may_name_the_folder(tmp_path, roots):
    make_exe(tmp_path / "inst" / "ncu")
    roots["environ"]["NCU"] = str(tmp_path / "inst")
    assert locate.find_ncu(**roots) == str(tmp_path / "inst" / "ncu")


def test_bad_ncu_env_is_a_user_error(tmp_path, roots):
    roots["environ"]["NCU"] = str(tmp_path / "missing")
    with pytest.raises(UserError, match=r"\$NCU is .*missing.* not an executable"):
        locate.find_ncu(**roots)


def test_path_before_installs(tmp_path, roots):
    on_path = make_exe(tmp_path / "bin" / "ncu")
    make_exe(roots["install_root"] / "2025.3.1" / "ncu")
    assert locate.find_ncu(**roots) == str(on_path)


def test_newest_install_by_version_not_by_name(roots):
    for version in ("2024.1.1", "2025.3.1", "2025.10.0", "2026.1.0-beta"):
        make_exe(roots["install_root"] / version / "ncu")
    (roots["install_root"] / "2027.1.0").mkdir()  # no ncu inside: ignored
    make_exe(roots["cuda_ncu"])
    assert locate.find_ncu(**roots) == str(roots["install_root"] / "2026.1.0-beta" / "ncu")
    (roots["install_root"] / "2026.1.0-beta" / "ncu").unlink()
    assert locate.find_ncu(**roots) == str(roots["install_root"] / "2025.10.0" / "ncu")


def test_cuda_toolkit_last(roots):
    make_exe(roots["cuda_ncu"])
    assert locate.find_ncu(**roots) == str(roots["cuda_ncu"])


def test_absent_ncu_says_what_to_do(roots):
    with pytest.raises(UserError) as err:
        locate.find_ncu(**roots)
    message = str(err.value)
    assert "\n" not in message
    assert "NCU=/path/to/ncu" in message and "PATH" in message


def test_default_environ_is_os_environ(tmp_path, monkeypatch):
    exe = make_exe(tmp_path / "bin" / "ncu")
    monkeypatch.delenv("NCU", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    assert locate.find_ncu(install_root=tmp_path / "none", cuda_ncu=tmp_path / "none") == str(exe)


def test_ncu_report_from_the_wheel():
    module = locate.import_ncu_report()
    assert module.__name__ == "ncu_report"
    assert hasattr(module, "load_report")


@pytest.fixture
def fake_module(monkeypatch):
    """A module name no wheel provides, so the install's extras/python is used."""
    name = "paprof_test_fake_ncu_report"
    monkeypatch.setattr(locate, "MODULE_NAME", name)
    monkeypatch.setattr(sys, "path", list(sys.path))
    yield name
    sys.modules.pop(name, None)


def test_ncu_report_from_the_newest_install(tmp_path, fake_module):
    for version, value in (("2024.1.1", "old"), ("2025.3.1", "new")):
        extras = tmp_path / version / "extras" / "python"
        extras.mkdir(parents=True)
        (extras / f"{fake_module}.py").write_text(f"WHICH = {value!r}\n")
    module = locate.import_ncu_report(install_root=tmp_path)
    assert module.WHICH == "new"
    assert sys.path[0] == str(tmp_path / "2025.3.1" / "extras" / "python")


def test_ncu_report_absent_says_what_to_do(tmp_path, fake_module):
    with pytest.raises(UserError, match="pip install ncu-report"):
        locate.import_ncu_report(install_root=tmp_path)


def test_importing_the_profiler_needs_no_ncu(tmp_path):
    code = "import paprof.measure.profile, paprof.read.store, paprof.commands.run"
    env = {"PATH": str(tmp_path), "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
