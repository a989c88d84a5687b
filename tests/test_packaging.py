"""Every non-Python file the package needs at run time is in its package data, so a
wheel (not only an editable install) has the kernels and the templates."""

from __future__ import annotations

import fnmatch
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_package_data_covers_every_kernel_and_template():
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-data"]["paprof"]
    package = ROOT / "paprof"
    needed = [p for p in package.rglob("*") if p.is_file() and p.suffix in (".cu", ".cuh", ".j2")]
    assert any(p.suffix == ".cu" and "families" in p.parts for p in needed)
    uncovered = [str(p.relative_to(package)) for p in needed
                 if not any(fnmatch.fnmatch(str(p.relative_to(package)), pat.replace("**/", "*"))
                            for pat in patterns)]
    assert uncovered == []
