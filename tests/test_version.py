"""One version: ``paprof.__version__``, ``paprof --version``, the package metadata and every
``paprof_version`` paprof writes (runs' sidecars, bench records, baselines, reports) all
come from ``paprof/_version.py``."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import paprof
from paprof import _version

ROOT = Path(__file__).resolve().parents[1]


def test_the_package_version_is_the_one_in_version_py():
    assert paprof.__version__ == _version.__version__
    assert re.fullmatch(r"\d+\.\d+\.\d+([abc]|rc|\.dev|\.post)?\d*", paprof.__version__)


def test_pyproject_reads_the_version_from_version_py():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in project["project"]
    assert "version" in project["project"]["dynamic"]
    attr = project["tool"]["setuptools"]["dynamic"]["version"]["attr"]
    module, name = attr.rsplit(".", 1)
    assert getattr(importlib.import_module(module), name) == paprof.__version__


def test_no_second_version_literal_in_the_package():
    literal = re.compile(r"""(__version__|paprof_version)\s*[:=][^=\n]*["']\d+\.\d+""")
    found = [str(p.relative_to(ROOT)) for p in (ROOT / "paprof").rglob("*.py")
             if p.name != "_version.py" and literal.search(p.read_text())]
    assert found == []


def test_cli_version_option():
    done = subprocess.run([sys.executable, "-m", "paprof", "--version"], capture_output=True,
                          text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"paprof, version {paprof.__version__}"


def test_every_writer_of_paprof_version_uses_the_package_version():
    from paprof import gate
    from paprof.gate import baseline
    from paprof.measure import provenance
    from paprof.render import context
    from paprof.sweep import report, results

    for module in (provenance, results, report, context, baseline):
        assert module.__version__ is paprof.__version__, module.__name__
    assert gate.Baseline(entries=[]).to_dict()["paprof_version"] == paprof.__version__
