"""Shipped archives of runs (``examples/*/runs.tar.xz``, ``tests/data/*.tar.xz``) for tests."""

from __future__ import annotations

import tarfile
from pathlib import Path


def extract(archive: Path, where: Path) -> Path:
    """Extract ``archive`` into ``where`` (data only: no links out, no devices); ``where``."""
    with tarfile.open(archive) as tar:
        tar.extractall(where, filter="data")
    return where
