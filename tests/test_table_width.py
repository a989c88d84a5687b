"""`paprof table` fits the terminal (issue 39): 80 columns, what tells rows apart kept,
`--wide` for everything."""

from __future__ import annotations

from helpers import recorded


def test_the_table_fits_80_columns_and_keeps_what_tells_rows_apart(invoke, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    result = invoke("table", recorded("h200"))
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert max(map(len, lines)) <= 80, max(lines, key=len)
    header = lines[0].split()
    assert header[:3] == ["variant", "kernel", "time_us"] and header[-1] == "bottleneck"
    rows = lines[1:lines.index("")]  # the table, then a blank line, then the evidence
    kernels = [line.split()[1] for line in rows]
    assert len(set(kernels)) == len(kernels)  # every row still tells its kernel


def test_wide_keeps_every_key_column(invoke, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    result = invoke("table", recorded("h200"), "--wide")
    header = result.output.splitlines()[0].split()
    assert {"grid", "block", "regs", "limiter"} <= set(header)
    assert max(map(len, result.output.splitlines())) > 80
