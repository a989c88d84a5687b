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
    (["check", "--baseline", "b.json", "--profiled-launches", "3"], "--profiled-launches needs --profile", "check"),
    (["check", "--baseline", "b.json", "--profile", "--profiled-launches", "0"], "--profiled-launches", "check"),
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


def test_the_compare_example_in_help_works_on_a_fresh_clone(tmp_path, monkeypatch):
    help_text = CliRunner().invoke(main, ["--help"]).stdout
    (line,) = [l.strip() for l in help_text.splitlines() if l.strip().startswith("paprof compare")]
    assert line == "paprof compare v2 v3 --runs examples/h200"
    monkeypatch.chdir(ROOT)  # a clone's root
    out = tmp_path / "r.html"
    result = CliRunner().invoke(main, [*line.split()[1:], "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert out.read_text().startswith("<!doctype html>")


def test_a_missing_default_run_store_points_at_the_shipped_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["compare", "v2", "v3"])
    assert result.exit_code == 2
    (line,) = result.stderr.splitlines()
    assert line.startswith("paprof: error: no such run store or report: runs")
    assert "--runs examples/h200" in line
    other = CliRunner().invoke(main, ["compare", "v2", "v3", "--runs", "elsewhere"])
    assert "examples/h200" not in other.stderr  # only the default store gets the hint
