"""paprof knows no kernel family by name (issue 28): its import graph reaches no family
package, no code names one, and the shipped runs are read, tabled and compared with no
family installed; a command that needs a family says how to get one, in one line."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from paprof import registry
from paprof.cli import main

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "paprof"
LAB_FAMILIES = ("paged_decode", "flash_fwd")


def _docstring_nodes(tree) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
    return out


def _imports_the_lab(node) -> bool:
    """``node`` is an ``import`` of ``paprof_kernels`` or of one of its modules."""
    names = ([a.name for a in node.names] if isinstance(node, ast.Import)
             else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
    return any(n.split(".")[0] == "paprof_kernels" for n in names)


def test_no_module_of_paprof_imports_or_names_a_family():
    """No import of the lab, and no string that is a family's name (a default such as
    ``family or "paged_decode"``); examples in help texts ("v3 or paged_decode/v3") are
    words, not names the code acts on."""
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        docs = _docstring_nodes(tree)
        for node in ast.walk(tree):
            where = f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', '?')}"
            if _imports_the_lab(node):
                offenders.append(where)
            elif (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs
                  and (node.value in LAB_FAMILIES or "paprof_kernels" in node.value)):
                offenders.append(f"{where} {node.value!r}")
    assert offenders == []


def test_the_tools_tests_reach_the_lab_only_through_the_registry():
    """The tool's tests use the lab as a plugin (``registry.family``, the ``lab`` marker),
    never by importing it: without the lab they skip, they do not fail to import."""
    offenders = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        offenders += [f"{path.relative_to(ROOT)}:{node.lineno}"
                      for node in ast.walk(ast.parse(path.read_text(), str(path))) if _imports_the_lab(node)]
    assert offenders == []


def test_importing_every_module_of_paprof_loads_no_family():
    code = ("import importlib, pkgutil, sys, paprof\n"
            "for m in pkgutil.walk_packages(paprof.__path__, 'paprof.'):\n"
            "    if m.name in ('paprof.__main__',):\n"
            "        continue\n"
            "    try:\n"
            "        importlib.import_module(m.name)\n"
            "    except ImportError as err:  # an optional dependency (mcp, cupy)\n"
            "        print('skipped', m.name, err, file=sys.stderr)\n"
            "print(sorted(n for n in sys.modules if n.split('.')[0] == 'paprof_kernels'))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


@pytest.fixture
def no_family(monkeypatch, tmp_path):
    """paprof with no installed family and no [tool.paprof] project: the tool alone."""
    monkeypatch.setattr(registry, "_entry_points", lambda: [])
    monkeypatch.chdir(tmp_path)
    registry.clear()
    yield tmp_path
    registry.clear()


def test_the_readmes_first_command_needs_no_family(no_family):
    out = no_family / "report.html"
    result = CliRunner().invoke(main, ["compare", "baseline", "v1", "v2", "v3", "v4", "handbook",
                                       "v5", "v6", "--runs", str(ROOT / "examples" / "h200"),
                                       "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert out.stat().st_size > 10_000 and "v6 is" in result.stdout
    table = CliRunner().invoke(main, ["table", str(ROOT / "examples" / "h200"), "--format", "json"])
    assert table.exit_code == 0, table.output
    assert {row["family"] for row in json.loads(table.stdout)} == {"paged_decode"}


@pytest.mark.parametrize("args", [["list"], ["run", "--variant", "v3"], ["bench"],
                                  ["baseline", "update", "--static", "--out", "s.json"]])
def test_a_command_that_needs_a_family_says_how_to_get_one(no_family, args):
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("paprof: error: no kernel family is visible: install one")
    assert len(result.stderr.strip().splitlines()) == 1
    assert not (no_family / "s.json").exists()
