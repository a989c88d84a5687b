"""Finding the ``ncu`` executable and the ``ncu_report`` Python module.

Nothing is looked up at import time: a machine without Nsight Compute can still import
paprof and read reports with the ``ncu-report`` wheel. The search roots are parameters
so that tests can point them at temporary folders.
"""

from __future__ import annotations

import importlib
import os
import re
import shutil
import sys
from pathlib import Path
from types import ModuleType

from paprof.errors import UserError

INSTALL_ROOT = Path("/opt/nvidia/nsight-compute")
"""Where Nsight Compute installs itself, one folder per version (``2025.3.1``)."""
CUDA_NCU = Path("/usr/local/cuda/bin/ncu")
"""The ncu the CUDA toolkit ships, a wrapper around its bundled Nsight Compute."""
MODULE_NAME = "ncu_report"
"""The report-reading module's import name (the PyPI wheel and the install's extras)."""


def _version_key(folder: Path) -> tuple:
    """Sort key: ``2025.3.1`` after ``2024.1.1`` after names without a version."""
    numbers = [int(n) for n in re.findall(r"\d+", folder.name)]
    return (len(numbers) > 0, numbers, folder.name)


def _newest(install_root: Path, relative: str) -> Path | None:
    """``install_root/<newest version>/relative`` where it exists."""
    if not install_root.is_dir():
        return None
    candidates = [d for d in install_root.iterdir() if d.is_dir() and (d / relative).exists()]
    if not candidates:
        return None
    return max(candidates, key=_version_key) / relative


def _is_executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def find_ncu(
    install_root: Path | None = None,
    cuda_ncu: Path | None = None,
    environ: dict | None = None,
) -> str:
    """The path of ``ncu``: ``$NCU``, then ``PATH``, then the newest install, then CUDA's.

    ``install_root`` and ``cuda_ncu`` default to ``INSTALL_ROOT`` and ``CUDA_NCU``.
    Raises ``UserError`` saying what to do when there is none, or when ``$NCU`` names
    something that is not an executable.
    """
    install_root = INSTALL_ROOT if install_root is None else install_root
    cuda_ncu = CUDA_NCU if cuda_ncu is None else cuda_ncu
    environ = os.environ if environ is None else environ
    named = environ.get("NCU")
    if named:
        path = Path(named).expanduser()
        if path.is_dir():
            path = path / "ncu"
        if not _is_executable(path):
            raise UserError(f"$NCU is {named!r}, which is not an executable ncu; fix or unset it")
        return str(path)
    on_path = shutil.which("ncu", path=environ.get("PATH", os.defpath))
    if on_path:
        return on_path
    installed = _newest(Path(install_root), "ncu")
    if installed is not None and _is_executable(installed):
        return str(installed)
    if _is_executable(Path(cuda_ncu)):
        return str(cuda_ncu)
    raise UserError(
        "ncu (Nsight Compute) not found: install it, put it on PATH or set NCU=/path/to/ncu "
        f"(also searched {install_root}/*/ncu and {cuda_ncu})"
    )


def import_ncu_report(install_root: Path | None = None) -> ModuleType:
    """The ``ncu_report`` module: the ``ncu-report`` wheel, else the newest install's copy.

    The install's ``extras/python`` folder (under ``install_root``, default
    ``INSTALL_ROOT``) is put first on ``sys.path`` when used. Raises ``UserError`` when
    neither is there.
    """
    install_root = INSTALL_ROOT if install_root is None else install_root
    try:
        return importlib.import_module(MODULE_NAME)
    except ImportError:
        pass
    extras = _newest(Path(install_root), "extras/python")
    if extras is not None and (
        (extras / f"{MODULE_NAME}.py").exists() or (extras / MODULE_NAME).is_dir()
    ):
        if str(extras) not in sys.path:
            sys.path.insert(0, str(extras))
        importlib.invalidate_caches()
        try:
            return importlib.import_module(MODULE_NAME)
        except ImportError as err:
            raise UserError(f"cannot import {MODULE_NAME} from {extras}: {err}") from None
    raise UserError(
        f"the {MODULE_NAME} module is missing: pip install ncu-report (reads reports without "
        f"a GPU), or install Nsight Compute (its extras/python under {install_root})"
    )
