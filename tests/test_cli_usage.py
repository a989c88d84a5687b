"""click's usage errors as paprof's one line and exit 2 (not click's four lines)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from paprof.cli import main

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("args, words, command", [
    (["table", "--bogus"], "No such option '--bogus'", "table"),
    (["tabel"], "No such command 'tabel'", ""),
    (["table"], "Missing argument 'REPORTS...'", "table"),
    (["table", "x.ncu-rep", "--format", "nope"], "'nope' is not one of", "table"),
    (["check", "--baseline", "b.json", "--repeat", "3"], "--repeat needs --profile", "check"),
    (["check", "--baseline", "b.json", "--profile", "--repeat", "0"], "--repeat", "check"),
    (["baseline", "update"], "Missing option '--out'", "baseline update"),
    (["compare"], "Missing argument", "compare"),
])
def test_usage_errors_are_one_line_and_exit_2(args, words, command):
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith("paprof: error: ") and words in line
    assert line.endswith(f"(see {' '.join(['paprof', *command.split(), '--help'])})")


def test_the_real_process_prints_the_same_one_line():
    done = subprocess.run([sys.executable, "-m", "paprof", "table", "--bogus"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert line.startswith("paprof: error: No such option '--bogus'")
    assert line.endswith("(see paprof table --help)")


@pytest.mark.parametrize("args", [["--help"], ["table", "--help"], ["--version"]])
def test_help_and_version_still_exit_0(args):
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0 and result.stderr == ""
    assert result.stdout


def test_a_bare_group_shows_its_help():
    result = CliRunner().invoke(main, ["baseline"])
    assert result.stdout.startswith("Usage: paprof baseline")
