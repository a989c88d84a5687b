"""`paprof table` fits the terminal (issue 39): 80 columns, what tells rows apart kept,
`--wide` for everything."""

from __future__ import annotations

from paprof import commands
from helpers import recorded


def test_the_table_fits_80_columns_and_keeps_what_tells_rows_apart(invoke, monkeypatch):
    monkeypatch.setattr(commands, "_tty_columns", lambda stream: 80)  # a terminal of 80
    result = invoke("table", recorded("h200"))
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert max(map(len, lines)) <= 80, max(lines, key=len)
    header = lines[0].split()
    assert header[:3] == ["variant", "kernel", "time_us"] and header[-1] == "bottleneck"
    rows = lines[1:lines.index("")]  # the table, then a blank line, then the evidence
    kernels = [line.split()[1] for line in rows]
    assert len(set(kernels)) == len(kernels)  # every row still tells its kernel


def test_a_pipe_gets_the_whole_table_whatever_COLUMNS_says(monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")  # CI logs and pipes: not a terminal
    assert commands.terminal_width() is None


def test_wide_keeps_every_key_column(invoke, monkeypatch):
    monkeypatch.setattr(commands, "_tty_columns", lambda stream: 80)
    result = invoke("table", recorded("h200"), "--wide")
    header = result.output.splitlines()[0].split()
    assert {"grid", "block", "regs", "limiter"} <= set(header)
    assert max(map(len, result.output.splitlines())) > 80
