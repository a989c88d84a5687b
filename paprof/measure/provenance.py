"""Where a run came from: GPU, driver, ncu version, git state, time, paprof version.

Every probe tolerates a missing tool (no nvidia-smi, no git, not a repository) and
records None instead.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
from datetime import datetime, timezone
from pathlib import Path

from paprof._version import __version__
from paprof.names import slug
from paprof.read.record import Origin

REPO_ROOT = Path(__file__).resolve().parents[2]
"""The folder holding the ``paprof`` package (a git checkout when developing)."""


_ASKED: dict | None = None
"""Inside ``probed_once``: each probe's answer, by its command line and folder."""


@contextlib.contextmanager
def probed_once():
    """Within the block each probe (nvidia-smi, ``ncu --version``, git) runs once and its
    answer is reused: a command that profiles several variants asks for the GPU, the
    driver, ncu's version and the checkout once, not a few times a variant (nvidia-smi
    and ncu take a good part of a second each to answer)."""
    global _ASKED
    outer = _ASKED
    _ASKED = {} if outer is None else outer
    try:
        yield
    finally:
        _ASKED = outer


def _output(argv: list[str], cwd: Path | None = None, timeout: float = 20) -> str | None:
    """A command's stdout, or None when it is missing, fails or hangs (asked once inside
    ``probed_once``)."""
    if _ASKED is not None:
        key = (tuple(argv), str(cwd))
        if key not in _ASKED:
            _ASKED[key] = _run(argv, cwd, timeout)
        return _ASKED[key]
    return _run(argv, cwd, timeout)


def _run(argv: list[str], cwd: Path | None, timeout: float) -> str | None:
    try:
        done = subprocess.run(
            argv, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def query_gpus(nvidia_smi: str = "nvidia-smi") -> list[tuple[str, str]]:
    """(name, driver version) per GPU from nvidia-smi; empty when it is absent or fails."""
    text = _output([nvidia_smi, "--query-gpu=name,driver_version", "--format=csv,noheader"])
    gpus = []
    for line in (text or "").splitlines():
        if "," in line:
            name, driver = (s.strip() for s in line.rsplit(",", 1))
            gpus.append((name, driver))
    return gpus


def ncu_version(ncu: str) -> str | None:
    """``2025.3.1.0`` from ``ncu --version`` (its ``Version 2025.3.1.0 (build ...)`` line)."""
    match = re.search(r"Version\s+(\S+)", _output([ncu, "--version"]) or "")
    return match[1] if match else None


def git_state(repo: Path = REPO_ROOT, environ=None) -> tuple[str | None, bool | None]:
    """(short commit, dirty) of the checkout at ``repo``. ``$PAPROF_GIT_COMMIT``, when set,
    names the commit and wins (dirty unknown): a copy of the tree sent to a GPU machine may
    carry no ``.git``, or an older one than the tree it runs. Else git's answer, or
    (None, None) outside a checkout."""
    given = (os.environ if environ is None else environ).get("PAPROF_GIT_COMMIT", "").strip()
    if given:
        return given, None
    commit = _output(["git", "rev-parse", "--short", "HEAD"], cwd=repo)
    if commit is None:
        return None, None
    status = _output(["git", "status", "--porcelain"], cwd=repo)
    return commit.strip(), (bool(status.strip()) if status is not None else None)


def git_toplevel(folder: Path) -> Path | None:
    """The root of the git checkout holding ``folder``, or None outside one."""
    top = _output(["git", "rev-parse", "--show-toplevel"], cwd=folder)
    return Path(top.strip()) if top else None


def now() -> str:
    """The current UTC time, ISO 8601 with offset (sortable as text)."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def collect(
    ncu: str,
    gpu: str | None = None,
    nvidia_smi: str = "nvidia-smi",
    repo: Path = REPO_ROOT,
) -> Origin:
    """Probe everything (the run record's ``Origin``). ``gpu`` (the launcher's device name) wins over nvidia-smi's first GPU."""
    gpus = query_gpus(nvidia_smi)
    driver = None
    if gpus:
        chosen = next((g for g in gpus if g[0] == gpu), gpus[0])
        gpu = gpu or chosen[0]
        driver = chosen[1]
    gpu = gpu or "unknown GPU"
    commit, dirty = git_state(repo)
    return Origin(
        gpu=gpu,
        gpu_slug=slug(gpu),
        driver=driver,
        ncu_version=ncu_version(ncu),
        git_commit=commit,
        git_dirty=dirty,
        created=now(),
        paprof_version=__version__,
    )
