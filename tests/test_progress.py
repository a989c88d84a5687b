"""Progress on stderr for the long commands (``paprof.progress``): shown once a command
has run ``DELAY`` seconds, on a terminal only, and the same bar the sweeps show."""

from __future__ import annotations

import io
import json
import shutil

import pytest
from rich.console import Console

from paprof import progress
from helpers import recorded


def _terminal(buffer: io.StringIO) -> Console:
    return Console(file=buffer, force_terminal=True, width=120, color_system=None)


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_shown_only_after_the_delay_and_only_on_a_terminal():
    clock, said = Clock(), io.StringIO()
    with progress.shown("baseline update", _terminal(said), delay=2.0, clock=clock):
        progress.tick("reading reports", 1, 10)
        clock.now += 1.5
        progress.tick("reading reports", 2, 10)
        assert said.getvalue() == ""  # a quick command prints nothing
        clock.now += 1.0
        progress.tick("reading reports", 3, 10)
        text = said.getvalue()
    assert "baseline update" in text and "3/10" in text and "reading reports" in text
    assert "0:02 so far" in text and "ETA" in text
    piped = io.StringIO()
    with progress.shown("check", Console(file=piped, force_terminal=False), delay=0.0,
                        clock=clock):
        progress.tick("reading reports", 3, 10)
    assert piped.getvalue() == ""  # a log or a pipe: nothing
    progress.tick("reading reports", 4, 10)  # no command showing: nothing, no error


def test_a_new_phase_has_its_own_count():
    clock, said = Clock(), io.StringIO()
    with progress.shown("check", _terminal(said), delay=0.0, clock=clock):
        progress.tick("reading the store's records", 5, 5)
        progress.tick("reading reports", 1, 7)
        progress._SHOWN.progress.refresh()
        text = said.getvalue()
    assert "5/5" in text and "1/7" in text and text.rindex("1/7") > text.rindex("5/5")


def test_the_sweeps_bar_is_the_same():
    said = io.StringIO()
    with progress.bar("sweep", _terminal(said)) as bar:
        task = bar.add_task("b1_ctx4096", total=4)
        bar.advance(task)
        bar.refresh()
    assert "sweep" in said.getvalue() and "1/4" in said.getvalue()
    quiet = io.StringIO()
    with progress.bar("sweep", Console(file=quiet, force_terminal=False)) as bar:
        bar.advance(bar.add_task("", total=4))
    assert quiet.getvalue() == ""


@pytest.fixture
def shown(monkeypatch):
    """Every command's progress shown at once, on a terminal of its own (returned)."""
    said = io.StringIO()
    monkeypatch.setattr(progress, "DELAY", 0.0)
    monkeypatch.setattr(progress, "EVERY", 0.0)
    monkeypatch.setattr(progress, "_console", lambda: _terminal(said))
    return said


@pytest.mark.parametrize("command", ["baseline update", "check", "table", "compare", "merge"])
def test_every_long_command_shows_where_it_is(invoke, shown, tmp_path, command):
    runs = recorded("h200")
    base = tmp_path / "base.json"
    if command == "check":
        assert invoke("baseline", "update", "--runs", runs, "--out", base).exit_code == 0
        shown.seek(0), shown.truncate()
    args = {"baseline update": ["baseline", "update", "--runs", runs, "--out", base],
            "check": ["check", "--baseline", base, "--runs", runs],
            "table": ["table", runs],
            "compare": ["compare", "v2", "v3", "--runs", runs, "--out", tmp_path / "r.html"],
            "merge": ["merge", runs, "--out", tmp_path / "merged"]}[command]
    result = invoke(*args)
    assert result.exit_code == 0, result.output
    text = shown.getvalue()
    assert command in text, text
    what = "merging" if command == "merge" else "reading reports"
    assert what in text and "so far" in text, text


def test_no_progress_in_a_pipe(invoke, tmp_path, monkeypatch):
    monkeypatch.setattr(progress, "DELAY", 0.0)
    result = invoke("table", recorded("h200"), "--json", tmp_path / "rows.json")
    assert result.exit_code == 0
    assert "reading reports" not in result.output and "so far" not in result.output
    assert len(json.loads((tmp_path / "rows.json").read_text())) > 0
