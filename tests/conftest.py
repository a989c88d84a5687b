"""Shared test configuration: the gpu marker skips itself where CuPy or a GPU is missing;
the fixtures several test modules use (what they build from is in helpers.py)."""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from helpers import FAKE_DIR, FAKE_VARS, FakeLauncher, recorded, relabelled, shipped


def _hypothesis_home() -> str:
    """Hypothesis's own folder (its example database and constants cache, by default
    ./.hypothesis, written as the test modules are collected) in a temporary folder of
    this process, not in the checkout; removed at the end (``pytest_unconfigure``)."""
    import tempfile

    from hypothesis.configuration import set_hypothesis_home_dir

    folder = tempfile.mkdtemp(prefix="paprof-hypothesis-")
    set_hypothesis_home_dir(folder)
    return folder


_HYPOTHESIS_HOME = _hypothesis_home()

# One process per command (paprof.parallel): pytest-xdist already runs a worker per core,
# and a sweep report's charts drawn by forked workers cost a third more CPU than drawn in
# place. tests/test_parallel.py sets PAPROF_JOBS itself to test the workers; a
# PAPROF_JOBS given outside is kept.
os.environ.setdefault("PAPROF_JOBS", "1")


def pytest_unconfigure(config):
    import shutil

    shutil.rmtree(_HYPOTHESIS_HOME, ignore_errors=True)

@functools.lru_cache(maxsize=None)
def _gpu_reason() -> str | None:
    try:
        import cupy  # noqa: F401
    except ImportError:
        return "CuPy is not installed"
    try:
        if cupy.cuda.runtime.getDeviceCount() == 0:
            return "no CUDA GPU"
    except Exception as err:  # no driver
        return f"no usable CUDA GPU ({type(err).__name__})"
    return None


@functools.lru_cache(maxsize=None)
def _lab_reason() -> str | None:
    """Why the kernel lab's families are not visible (None when they are): the ``lab``
    tests reach them through the ``paprof.families`` entry point, as paprof does."""
    from importlib.metadata import entry_points

    from helpers import LAB_FAMILY

    if LAB_FAMILY not in {ep.name for ep in entry_points(group="paprof.families")}:
        return f"the kernel lab is not installed ({LAB_FAMILY} is no paprof.families entry point): pip install -e ./kernels"
    return None


@pytest.fixture
def lab():
    """For a fixture that needs the lab's families: skips where they are not installed
    (a test marked ``lab`` skips at collection; a fixture cannot carry the marker)."""
    reason = _lab_reason()
    if reason:
        pytest.skip(f"lab test: {reason}")


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "gpu" in item.keywords:
            reason = _gpu_reason()
            if reason:
                item.add_marker(pytest.mark.skip(reason=f"gpu test: {reason}"))
        if "lab" in item.keywords:
            reason = _lab_reason()
            if reason:
                item.add_marker(pytest.mark.skip(reason=f"lab test: {reason}"))


@pytest.fixture(scope="session", autouse=True)
def _cubin_cache(tmp_path_factory):
    """The static gate's cubin cache in a folder of the test session, never the user's
    ``~/.cache`` (``paprof.measure.static.cache_dir``); shared by the session's tests, as a user's
    would be, and by its pytest-xdist workers (the cache takes rival writers: the
    first whole entry wins), so that a kernel is compiled once a run, not once a worker.
    A test that needs its own sets ``PAPROF_CUBIN_CACHE`` itself."""
    saved = os.environ.get("PAPROF_CUBIN_CACHE")
    if os.environ.get("PYTEST_XDIST_WORKER"):  # the workers' folders share the run's
        folder = tmp_path_factory.getbasetemp().parent / "cubins"
        folder.mkdir(exist_ok=True)
    else:
        folder = tmp_path_factory.mktemp("cubins")
    os.environ["PAPROF_CUBIN_CACHE"] = str(folder)
    yield
    if saved is None:
        os.environ.pop("PAPROF_CUBIN_CACHE", None)
    else:
        os.environ["PAPROF_CUBIN_CACHE"] = saved


ROOT = Path(__file__).resolve().parents[1]
"""The checkout the tests run from: no test writes in it (``_checkout_stays_clean``)."""

_NOT_OURS = ("__pycache__", ".pytest_cache", ".git")
"""Folders Python, pytest and git write in the checkout themselves (a virtual environment
inside it, such as the README's .venv, is left out too: ``_venvs``)."""


def _venvs() -> list[str]:
    return sorted(p.parent.name for p in ROOT.glob("*/pyvenv.cfg"))


def _checkout_state() -> dict[str, tuple]:
    """Every file of the checkout that git reports (changed, untracked or ignored, each on
    its own), with its size and modification time; tracked files git finds unchanged are
    left out, as are the folders of ``_NOT_OURS`` and virtual environments. Without git
    (not a clone): the files at the top of the checkout and of tests/."""
    import subprocess

    skip = set(_NOT_OURS) | set(_venvs())
    try:
        done = subprocess.run(
            ["git", "-C", str(ROOT), "status", "--porcelain", "-z", "--ignored",
             "--untracked-files=all", "--", ".", *(f":(exclude,glob)**/{d}/**" for d in skip)],
            capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        done = None
    if done is not None and done.returncode == 0:
        entries = [(e[:2], e[3:]) for e in done.stdout.split("\0") if len(e) > 3]
    else:
        entries = [("", str(p.relative_to(ROOT))) for d in (ROOT, ROOT / "tests")
                   for p in d.iterdir() if p.is_file()]
    state = {}
    for status, name in entries:
        if skip & set(Path(name).parts):
            continue
        try:
            st = os.stat(ROOT / name)
            state[name] = (status, st.st_size, st.st_mtime_ns)
        except OSError:
            state[name] = (status, None, None)
    return state


@pytest.fixture(scope="session", autouse=True)
def _checkout_stays_clean(request):
    """No test writes in the checkout (only in its temporary folders): the files git
    reports changed, new or ignored are the same after the session (each xdist worker's)
    as before it, or the session fails here, naming them. Under pytest-xdist each worker
    looks before its first test, so the worker whose test wrote a file always sees it."""
    before = _checkout_state()
    yield
    after = _checkout_state()
    changed = sorted(n for n in before.keys() | after.keys() if before.get(n) != after.get(n))
    if changed:
        shown = ", ".join(changed[:10]) + (f" and {len(changed) - 10} more" if len(changed) > 10 else "")
        pytest.fail(f"tests wrote in the checkout {ROOT} (write only under tmp_path): {shown}",
                    pytrace=False)


@pytest.fixture
def paprof_cli():
    """The ``paprof`` click group, with the CLI's one-line error handling."""
    from paprof.cli import main

    return main


@pytest.fixture
def invoke(paprof_cli):
    """Run ``paprof ARGS...`` in-process; the click ``Result``."""

    def run(*args):
        return CliRunner().invoke(paprof_cli, [str(a) for a in args], catch_exceptions=False)

    return run


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


@pytest.fixture
def fake_launcher(monkeypatch) -> FakeLauncher:
    """``profile.run_launcher`` (the GPU step) replaced by a ``FakeLauncher``."""
    from paprof.measure import profile

    fake = FakeLauncher()
    monkeypatch.setattr(profile, "run_launcher", fake)
    return fake


@pytest.fixture
def v3_baseline(invoke, tmp_path):
    """A baseline of the recorded H200 v3 run, written by ``paprof baseline update``."""
    shipped("v3")
    out = tmp_path / "h200.json"
    result = invoke("baseline", "update", "--runs", recorded("h200"), "--variant", "v3", "--out", out)
    assert result.exit_code == 0, result.output
    return out


@pytest.fixture
def v2_as_v3(tmp_path):
    """A run store where v3's run is v2's report: as if v3's code had regressed to v2."""
    return relabelled(shipped("v2"), tmp_path / "runs", "v3")


@pytest.fixture
def clean_registry(monkeypatch):
    """Discovery from scratch, no ``PAPROF_TRUST``; afterwards ``sys.path`` as it was and
    the test's family modules (``planted*``, ``fam_*``) forgotten."""
    from paprof import registry

    registry.clear()
    saved = list(sys.path)
    monkeypatch.delenv(registry.TRUST_ENV, raising=False)
    yield
    registry.clear()
    sys.path[:] = saved
    for name in [m for m in sys.modules if m.startswith(("planted", "fam_"))]:
        del sys.modules[name]
