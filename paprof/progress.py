"""Progress on stderr: the sweeps' bar, and where a long command stands.

``bar(label, console)`` is the one display: a rich bar with done/total, the time so far
and an estimate of the time left, live on a terminal only (transient: it leaves nothing
behind), disabled elsewhere so that logs and pipes get no stray lines. ``paprof sweep``
drives it point by point.

A command that can take long on a large store (``baseline update``, ``check``, ``table``,
``compare``, ``merge``, ``sweep-report``) opens ``shown(name)`` around its work; the loops
beneath it (the store's scan, reading the reports, the gate's entries, a merge's results)
call ``tick(what, done, total)``, which costs a global lookup when no command shows
progress (in the library, in tests, in worker processes). The bar appears only once the
command has run ``DELAY`` seconds, so a quick command prints nothing. Where no bar can
be live (a log, a pipe), ``LogLines`` prints where ``paprof run`` stands now and then.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Iterator

from paprof.safetext import shown as safe

DELAY = 2.0
"""Seconds a command runs before its progress is shown."""

EVERY = 0.1
"""Seconds between two redraws asked by ``tick``."""


def bar(label: str, console, live: bool | None = None, since: float | None = None,
        clock=time.monotonic):
    """The progress bar (``rich.progress.Progress``, not started): ``label``, the bar,
    done/total, the time so far (since ``since``, a ``clock`` stamp; the task's start by
    default) and the estimate of the time left, then the task's description. ``live``
    (default: ``console`` is a terminal): False disables it."""
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, ProgressColumn,
                               TextColumn, TimeRemainingColumn)
    from rich.text import Text

    class Elapsed(ProgressColumn):
        def render(self, task) -> Text:
            seconds = clock() - since if since is not None else task.elapsed or 0
            minutes, secs = divmod(int(seconds), 60)
            return Text(f"{minutes}:{secs:02d} so far", style="progress.elapsed")

    live = console.is_terminal if live is None else live
    columns = (TextColumn(f"[bold]{label}"), BarColumn(bar_width=20), MofNCompleteColumn(),
               Elapsed(), TextColumn("ETA"), TimeRemainingColumn(),
               TextColumn("{task.description}", markup=False))  # names from a store: not markup
    return Progress(*columns, console=console, transient=True, disable=not live)


class _Shown:
    """A command's progress: the bar, started once the command has run ``delay`` s."""

    def __init__(self, name: str, console, delay: float, clock, since: float | None = None):
        self.name, self.console, self.delay, self.clock = name, console, delay, clock
        self.start = clock() if since is None else since
        self.progress = self.task = None
        self.last = -EVERY
        self.what = None
        self.terminal: bool | None = None  # asked once: rich reads the environment each time

    def tick(self, what: str, done: int, total: int | None) -> None:
        now = self.clock()
        if now - self.last < EVERY and (total is None or done < total) and what == self.what:
            return
        self.last = now
        if self.progress is None:
            if now - self.start < self.delay:
                return
            if self.terminal is None:
                self.terminal = self.console.is_terminal
            if not self.terminal:
                return
            self.progress = bar(self.name, self.console, live=True, since=self.start,
                                clock=self.clock)
            self.task = self.progress.add_task(safe(what), total=total, completed=done)
            self.progress.start()
        elif what != self.what:  # a new phase: its own count and estimate
            self.progress.reset(self.task, total=total, completed=done, description=safe(what))
        else:
            self.progress.update(self.task, total=total, completed=done)
        self.what = what

    def close(self) -> None:
        if self.progress is not None:
            self.progress.stop()


_SHOWN: _Shown | None = None


def _console():
    from rich.console import Console

    return Console(stderr=True)


@contextmanager
def shown(name: str, console=None, delay: float | None = None, clock=time.monotonic,
          since: float | None = None) -> Iterator[None]:
    """Show ``tick``'s progress under ``name`` on stderr (``console``), once the command
    has run ``delay`` seconds (``DELAY``; since ``since``, a ``clock`` stamp: now by
    default), and only on a terminal; removed when the block ends."""
    global _SHOWN
    console = console if console is not None else _console()
    delay = DELAY if delay is None else delay
    outer, _SHOWN = _SHOWN, _Shown(name, console, delay, clock, since)
    try:
        yield
    finally:
        _SHOWN.close()
        _SHOWN = outer


def tick(what: str, done: int, total: int | None = None) -> None:
    """Say where a long loop stands (``done`` of ``total``, ``what``: "reading reports"),
    to the command's display if one is shown."""
    if _SHOWN is not None:
        _SHOWN.tick(what, done, total)


class LogLines:
    """Where a long run stands, for a log or a pipe (no live display there): a line
    ``paprof: <what it does now>`` on ``console`` once ``every`` seconds have passed since
    the start or the last line, so a quick run prints none and a long one (a program's
    timing pass, a slow replay) shows it is moving and where."""

    def __init__(self, console, every: float = 10.0, clock=time.monotonic):
        self.console, self.every, self.clock = console, every, clock
        self.last = clock()

    def __call__(self, text: str) -> None:
        now = self.clock()
        if now - self.last >= self.every and text:
            self.last = now
            self.console.print(f"paprof: {safe(text)}", markup=False, highlight=False,
                               soft_wrap=True)
