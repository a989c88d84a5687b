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
    assert any(p.suffix == ".cu" for p in needed)  # the read ceiling's kernel
    uncovered = [str(p.relative_to(package)) for p in needed
                 if not any(fnmatch.fnmatch(str(p.relative_to(package)), pat.replace("**/", "*"))
                            for pat in patterns)]
    assert uncovered == []


# --- the built wheel -------------------------------------------------------------------------

import importlib.util
import os
import shutil
import subprocess
import sys
import venv
import zipfile

import pytest

import paprof

EXAMPLE_RUNS = ROOT / "examples" / "h200"

#: What a build needs from the tree (the sdist's files, without the tests and examples).
BUILD_INPUTS = ("pyproject.toml", "README.md", "LICENSE", "NOTICE", "paprof")


def _can_build_without_isolation() -> bool:
    """setuptools builds wheels itself from 70.1 on; before that it needs ``wheel``."""
    import setuptools

    major, minor = (int(x) for x in setuptools.__version__.split(".")[:2])
    return (major, minor) >= (70, 1) or importlib.util.find_spec("wheel") is not None


def _tree_files() -> list[str]:
    """Every file of the package in the tree, as the wheel names it."""
    return sorted(str(p.relative_to(ROOT)) for p in (ROOT / "paprof").rglob("*")
                  if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel ``pip wheel`` builds from a copy of the tree (the copy keeps the tree free
    of ``build/`` and ``*.egg-info``). Without build isolation: no network needed."""
    if not _can_build_without_isolation():
        pytest.skip("no wheel package and setuptools < 70.1: cannot build without isolation")
    src = tmp_path_factory.mktemp("src")
    for name in BUILD_INPUTS:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, src / name,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(ROOT / name, src / name)
    dist = tmp_path_factory.mktemp("dist")
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps",
                           "--no-build-isolation", "--no-index", "-q", "-w", str(dist), str(src)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    (built,) = dist.glob("paprof-*.whl")
    return built


def test_wheel_holds_every_file_of_the_package(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    tree = _tree_files()
    assert any(n.endswith(".cu") for n in tree) and "paprof/py.typed" in tree
    assert not any("paprof_kernels" in n or "/families/" in n for n in names)  # no family ships
    assert [f for f in tree if f not in names] == []
    assert [n for n in names if n.startswith("paprof/") and n not in tree] == []


def test_wheel_metadata_version_licence_and_extras(wheel):
    z = zipfile.ZipFile(wheel)
    info = f"paprof-{paprof.__version__}.dist-info"
    assert wheel.name.startswith(f"paprof-{paprof.__version__}-")
    meta = z.read(f"{info}/METADATA").decode()
    assert f"\nVersion: {paprof.__version__}\n" in meta
    assert "License: Apache-2.0" in meta or "License-Expression: Apache-2.0" in meta
    assert {f"{info}/LICENSE", f"{info}/NOTICE"} <= {n.replace("/licenses/", "/")
                                                   for n in z.namelist()}
    requires = [line for line in meta.splitlines() if line.startswith("Requires-Dist: pyarrow")]
    assert requires and all('extra == "parquet"' in r or 'extra == "test"' in r
                            for r in requires)


def _venv_seeing_this_environment(env_dir: Path) -> Path:
    """A fresh venv (its Python) whose path ends with this interpreter's site-packages:
    the dependencies (pandas, click, ...) and pip come from the environment running the
    tests, without network, whether that is a plain venv (the README's), a venv with the
    system's packages or the system itself. Only the folders go on the path (a .pth line),
    not the .pth files in them: this environment's editable paprof stays out of sight, so
    the wheel's paprof, in the venv's own site-packages (first on the path), is the one
    imported."""
    import site
    import sysconfig

    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    own = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         capture_output=True, text=True, check=True).stdout.strip()
    here = dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"],
                          *site.getsitepackages()])
    (Path(own) / "zz-tests-environment.pth").write_text(
        "".join(f"{p}\n" for p in here if Path(p).is_dir()))
    return python


def test_wheel_works_in_a_fresh_venv(wheel, tmp_path):
    """Installed (not editable) into a fresh venv, the wheel tables and compares the shipped
    H200 runs: the templates are in it, and no family is needed to read stored runs.
    About 5 s (the build 3 s more, once for the module): not marked slow."""
    if not EXAMPLE_RUNS.is_dir():
        pytest.skip("no examples/h200 in this checkout")
    env_dir = tmp_path / "venv"
    python = _venv_seeing_this_environment(env_dir)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["PYTHONNOUSERSITE"] = "1"

    def sh(*argv, cwd=tmp_path):
        return subprocess.run([str(a) for a in argv], capture_output=True, text=True,
                              cwd=cwd, env=env, timeout=300)

    done = sh(python, "-m", "pip", "install", "--no-deps", "--no-index", "--force-reinstall",
              "-q", wheel)
    assert done.returncode == 0, done.stdout + done.stderr
    where = sh(python, "-c", "import paprof; print(paprof.__file__, paprof.__version__)")
    assert where.returncode == 0, where.stderr
    path, version = where.stdout.split()
    assert Path(path).is_relative_to(env_dir) and version == paprof.__version__

    cli = env_dir / "bin" / "paprof"
    listed = sh(cli, "list")  # whatever families the system's site-packages hold
    assert listed.returncode in (0, 2) and "Traceback" not in listed.stderr, listed.stderr
    table = sh(cli, "table", EXAMPLE_RUNS)
    assert table.returncode == 0, table.stderr
    assert "paged_decode_v3" in table.stdout
    out = tmp_path / "report.html"
    compared = sh(cli, "compare", "v2", "v3", "--runs", EXAMPLE_RUNS, "--out", out)
    assert compared.returncode == 0, compared.stderr
    assert out.stat().st_size > 10_000 and "v3 is" in compared.stdout
