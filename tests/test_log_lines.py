"""`paprof run` in a log or a pipe (no live display): a line now and then on where it
stands, none for a quick run (paprof/progress.py ``LogLines``)."""

from __future__ import annotations

import io

from rich.console import Console

from paprof.progress import LogLines


def test_a_line_once_every_interval_and_none_for_a_quick_run():
    now = [100.0]
    out = io.StringIO()
    lines = LogLines(Console(file=out, width=60), every=10.0, clock=lambda: now[0])
    lines("timing every launch in the range (ncu, duration only): 1 so far")
    now[0] = 109.9
    lines("timing every launch in the range (ncu, duration only): 80 so far")
    assert out.getvalue() == ""  # under ten seconds: nothing
    now[0] = 110.0
    lines("timing every launch in the range (ncu, duration only): 120 so far")
    now[0] = 115.0
    lines("ncu: gemm launch 3: 50%")
    now[0] = 121.0
    lines("[bold]ncu: \x1b[31mgemm[/bold] launch 4: 100% - 35 passes " + "x" * 80)
    got = out.getvalue().splitlines()
    assert got[0] == "paprof: timing every launch in the range (ncu, duration only): 120 so far"
    # one line each (not wrapped), markup and control characters shown, not obeyed
    assert len(got) == 2 and got[1].startswith("paprof: [bold]ncu: ") and "\x1b" not in got[1]
