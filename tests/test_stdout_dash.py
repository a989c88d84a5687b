"""One rule for '-' in every output option of every command: it prints that output on
stdout (the command's own lines go to stderr), never a file named '-'; two outputs on
stdout is a one-line error (exit 2); a command asked only for JSON or Markdown writes no
HTML unless --out is given. Each test runs in an empty folder and checks it stays empty."""

from __future__ import annotations

import io
import json

import pytest
from click.testing import CliRunner

from paprof.cli import main

from helpers import recorded


@pytest.fixture
def here(tmp_path, monkeypatch):
    """An empty working folder: whatever a command writes by default lands here."""
    folder = tmp_path / "cwd"
    folder.mkdir()
    monkeypatch.chdir(folder)
    return folder


def _run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def _one_line_error(result, *options):
    assert result.exit_code == 2, result.output
    (line,) = result.output.splitlines()
    assert line.startswith("paprof: error: ") and "cannot both print on stdout" in line
    assert all(o in line for o in options), line


def test_compare_json_alone_writes_no_html(here):
    result = _run("compare", "v2", "v3", "--runs", recorded("h200"), "--json", "-")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["schema"] == "paprof.explanation/1"
    assert "v3 is" in result.stderr  # the summary, on stderr
    assert list(here.iterdir()) == []


def test_compare_markdown_to_a_file_alone_writes_no_html(here):
    result = _run("compare", "v2", "v3", "--runs", recorded("h200"), "--markdown", "r.md")
    assert result.exit_code == 0, result.output
    assert [p.name for p in here.iterdir()] == ["r.md"]


def test_compare_out_dash_prints_the_html(here):
    result = _run("compare", "v2", "v3", "--runs", recorded("h200"), "--out", "-",
                  "--markdown", "r.md")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("<!doctype html>") and result.stdout.rstrip().endswith("</html>")
    assert "wrote r.md" in result.stderr
    assert [p.name for p in here.iterdir()] == ["r.md"]


@pytest.mark.parametrize("pair", [("--out", "--json"), ("--out", "--markdown"),
                                  ("--markdown", "--json")])
def test_compare_two_outputs_on_stdout_is_one_line(here, pair):
    result = _run("compare", "v2", "v3", "--runs", recorded("h200"), pair[0], "-", pair[1], "-")
    _one_line_error(result, *pair)
    assert list(here.iterdir()) == []


def test_table_out_dash_is_stdout_parquet_too(here):
    text = _run("table", recorded("h200"), "--format", "csv", "--out", "-")
    assert text.exit_code == 0, text.output
    assert text.stdout.startswith("variant,") and "wrote" not in text.output
    pytest.importorskip("pyarrow")
    import pandas as pd

    binary = _run("table", recorded("h200"), "--format", "parquet", "--out", "-")
    assert binary.exit_code == 0, binary.output
    assert len(pd.read_parquet(io.BytesIO(binary.stdout_bytes))) >= 8
    _one_line_error(_run("table", recorded("h200"), "--out", "-", "--json", "-"), "--out", "--json")
    assert list(here.iterdir()) == []


def test_baseline_update_out_dash_prints_the_baseline(here):
    result = _run("baseline", "update", "--runs", recorded("h200"), "--variant", "v3", "--out", "-")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert [e["variant"] for e in data["entries"]] == ["v3"]
    assert "v3 at " in result.stderr
    assert list(here.iterdir()) == []


@pytest.fixture
def v3_base(tmp_path):
    out = tmp_path / "base.json"
    made = _run("baseline", "update", "--runs", recorded("h200"), "--variant", "v3", "--out", out)
    assert made.exit_code == 0, made.output
    return out


@pytest.mark.parametrize("option, start", [("--junit", "<?xml"), ("--markdown", "## paprof check"),
                                           ("--json", "{")])
def test_check_outputs_on_stdout(here, v3_base, option, start):
    result = _run("check", "--baseline", v3_base, "--runs", recorded("h200"), "--no-cause",
                  option, "-")
    assert result.exit_code == 0, result.output
    assert result.stdout.lstrip().startswith(start), result.stdout[:200]
    assert "unchanged" in result.stderr or "paprof check" in result.stderr  # the table
    assert list(here.iterdir()) == []


def test_check_two_outputs_on_stdout_is_one_line(here, v3_base):
    result = _run("check", "--baseline", v3_base, "--runs", recorded("h200"), "--junit", "-",
                  "--markdown", "-")
    _one_line_error(result, "--junit", "--markdown")


def test_a_file_named_dash_is_dot_slash_dash(here):
    result = _run("table", recorded("h200"), "--format", "csv", "--out", "./-")
    assert result.exit_code == 0, result.output
    assert (here / "-").read_text().startswith("variant,") and result.stdout == ""


def test_sweep_report_json_alone_writes_no_html(here, monkeypatch):
    from paprof.sweep import report

    monkeypatch.setattr(report, "MAX_CHARTS", 1)  # the charts are the cost, not the point
    store = recorded("sweeps/h200-profile")
    result = _run("sweep-report", "--runs", store, "--json", "-")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["kind"] == "paprof-regime"
    assert list(here.iterdir()) == []
    _one_line_error(_run("sweep-report", "--runs", store, "--out", "-", "--markdown", "-"),
                    "--out", "--markdown")
    html = _run("sweep-report", "--runs", store, "--out", "-")
    assert html.exit_code == 0, html.output
    assert html.stdout.startswith("<!doctype html>")
    assert list(here.iterdir()) == []  # no regime JSON beside a printed report
