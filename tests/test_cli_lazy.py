"""``paprof --help`` lists every command without importing any (nor pandas, numpy,
matplotlib): the command table in ``paprof/cli.py`` names each command's module."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from paprof import cli


def test_the_table_names_every_command_of_every_module_once():
    names = []
    for module in sorted({m for m, _ in cli.COMMANDS.values()}):
        names += [c.name for c in importlib.import_module(f"paprof.commands.{module}").COMMANDS]
    assert sorted(names) == sorted(cli.COMMANDS)
    assert all(summary.endswith(".") for _, summary in cli.COMMANDS.values())


def _heavy_after(command: str, *heavy: str) -> str:
    """The output of ``paprof COMMAND`` in a fresh process, then ``HEAVY [...]``: which
    of ``heavy`` it imported."""
    code = (f"import sys, runpy; sys.argv = ['paprof', {command!r}]\n"
            "try:\n    runpy.run_module('paprof', run_name='__main__')\n"
            "except SystemExit:\n    pass\n"
            f"heavy = [m for m in {heavy!r} if m in sys.modules]\n"
            "print('HEAVY', heavy)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    return done.stdout + done.stderr


def test_help_imports_no_command_and_no_heavy_library():
    said = _heavy_after("--help", "pandas", "numpy", "matplotlib", "paprof.commands.table",
                        "paprof.model.load")
    assert "HEAVY []" in said, said
    assert "sweep-report" in said and "Commands:" in said


def test_an_unknown_command_is_one_line():
    from click.testing import CliRunner

    result = CliRunner().invoke(cli.main, ["frobnicate"])
    assert result.exit_code == 2 and len(result.output.splitlines()) == 1


@pytest.mark.lab
def test_list_imports_no_heavy_library():
    # 'paprof list' imports every family's catalogue: numpy there cost the listing
    # 0.15 s of its 0.25 s budget (benchmarks/README.md)
    said = _heavy_after("list", "pandas", "numpy", "matplotlib", "paprof.model.load")
    assert "HEAVY []" in said and "paged_decode" in said, said
