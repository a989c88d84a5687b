"""``paprof --help`` lists every command without importing any (nor pandas, numpy,
matplotlib): the command table in ``paprof/cli.py`` names each command's module."""

from __future__ import annotations

import importlib
import subprocess
import sys

from paprof import cli


def test_the_table_names_every_command_of_every_module_once():
    names = []
    for module in sorted({m for m, _ in cli.COMMANDS.values()}):
        names += [c.name for c in importlib.import_module(f"paprof.commands.{module}").COMMANDS]
    assert sorted(names) == sorted(cli.COMMANDS)
    assert all(summary.endswith(".") for _, summary in cli.COMMANDS.values())


def test_help_imports_no_command_and_no_heavy_library():
    code = ("import sys, runpy; sys.argv = ['paprof', '--help']\n"
            "try:\n    runpy.run_module('paprof', run_name='__main__')\n"
            "except SystemExit:\n    pass\n"
            "heavy = [m for m in ('pandas', 'numpy', 'matplotlib', 'paprof.commands.table', "
            "'paprof.model.load') if m in sys.modules]\n"
            "print('HEAVY', heavy)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert "HEAVY []" in done.stdout, done.stdout + done.stderr
    assert "sweep-report" in done.stdout and "Commands:" in done.stdout


def test_an_unknown_command_is_one_line():
    from click.testing import CliRunner

    result = CliRunner().invoke(cli.main, ["frobnicate"])
    assert result.exit_code == 2 and len(result.output.splitlines()) == 1
