"""Ctrl-C and SIGTERM, for every layer: the exit codes, the one line said, and the
check a writer makes before it writes (``check_interrupted``). Only the standard library:
``paprof.entry`` installs the handlers before anything else is imported.

An interrupt (SIGINT) at any moment ends paprof with one line on stderr and exit code
130, so that CI can tell it from 1 (a finding) and 2 (bad input). SIGTERM (a CI job
cancelled, ``kill``) is handled the same way (``Terminated``, a kind of
``KeyboardInterrupt``, so every clean-up that an interrupt runs runs), with one line
"paprof: terminated" and exit code 143.
"""

from __future__ import annotations

import signal
import sys

INTERRUPTED = 130
"""The exit code of an interrupted command (128 + SIGINT, as shells report it)."""
TERMINATED = 143
"""The exit code after SIGTERM (128 + 15, as shells report it)."""


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the command is: it ends as a Ctrl-C does (temporary files
    removed, nothing half-written), then with exit code 143."""


def on_sigterm(_signum, _frame):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second one: still one line
    raise Terminated()


def _say(what: str, detail: str) -> None:
    try:
        sys.stderr.write(f"paprof: {what}" + (f" ({detail})" if detail else "") + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def terminated(detail: str = "") -> int:
    """Say so in one line on stderr (with ``detail``: where it stopped); the exit code."""
    _say("terminated", detail)
    return TERMINATED


def interrupted(detail: str = "") -> int:
    """Say so in one line on stderr (with ``detail``: where it stopped); the exit code."""
    _say("interrupted", detail)
    return INTERRUPTED


_SEEN: list = []
"""Set (non-empty) once a Ctrl-C reached paprof's handler (``_on_sigint``)."""
_SWALLOWED: list = []
"""Set while a Ctrl-C that Python swallowed waits to be raised again (``_unraisable``)."""


def _on_sigint(signum, frame):
    """Ctrl-C: remembered, then raised as ``KeyboardInterrupt`` (Python's own handler).
    Remembered because Python swallows an exception raised in a weakref callback or a
    ``__del__`` (the collector runs them at any moment: "Exception ignored in ...
    WeakValueDictionary ... KeyboardInterrupt"), and compare then went on and exited 0.
    SIGALRM is a swallowed one raised again."""
    _SEEN.append(signum)
    if signum == getattr(signal, "SIGALRM", None):
        _SWALLOWED.clear()  # raised now, where it can be caught (a sweep saves its manifest)
    raise KeyboardInterrupt


AGAIN_S = 0.01
"""How long after a swallowed Ctrl-C it is raised again (the callbacks of one collection
are over by then; one that is not gets it swallowed once more, and again)."""


def _unraisable(info) -> None:
    """``sys.unraisablehook``: a swallowed Ctrl-C is said nowhere (it is an interrupt, not
    a bug) and raised again ``AGAIN_S`` later (a one-shot timer's SIGALRM, handled as a
    Ctrl-C), in the code the callback interrupted; anything else as Python says it."""
    if info.exc_type is not None and issubclass(info.exc_type, KeyboardInterrupt) \
            and hasattr(signal, "setitimer"):
        _SWALLOWED.append(True)
        signal.signal(signal.SIGALRM, _on_sigint)
        signal.setitimer(signal.ITIMER_REAL, AGAIN_S)
        return
    sys.__unraisablehook__(info)


def check_interrupted() -> None:
    """``KeyboardInterrupt`` while a Ctrl-C that was swallowed on its way (see
    ``_on_sigint``) waits to be raised again: a writer calls it before it writes, so that
    nothing is written after one. (Once raised, what catches it may write: a sweep saves
    its manifest.)"""
    if _SWALLOWED:
        raise KeyboardInterrupt


def install() -> None:
    """paprof's Ctrl-C handler, where Python's own would be (SIGINT not ignored)."""
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _on_sigint)
        sys.unraisablehook = _unraisable


def seen() -> bool:
    """Whether a Ctrl-C reached paprof's handler (``_on_sigint``), swallowed or not."""
    return bool(_SEEN)
