"""The ``paprof`` console script and ``python -m paprof``: only the standard library is
imported before Ctrl-C is handled.

An interrupt (SIGINT) at any moment, the imports of the command's modules included,
ends paprof with one line on stderr and exit code 130, so that CI can tell it from 1 (a
finding) and 2 (bad input). Output files are written under temporary names and renamed
(``paprof.outputs``), which removes them when interrupted: nothing is left half-written.
"""

from __future__ import annotations

import os
import signal
import sys

INTERRUPTED = 130
"""The exit code of an interrupted command (128 + SIGINT, as shells report it)."""


def interrupted(detail: str = "") -> int:
    """Say so in one line on stderr (with ``detail``: where it stopped); the exit code."""
    try:
        sys.stderr.write("paprof: interrupted" + (f" ({detail})" if detail else "") + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
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


def _install() -> None:
    """paprof's Ctrl-C handler, where Python's own would be (SIGINT not ignored)."""
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _on_sigint)
        sys.unraisablehook = _unraisable


def _exit_interrupted(said: bool):
    """Exit 130 now. A KeyboardInterrupt that went through some C code (an import) marks
    the interpreter, which then kills itself with SIGINT at exit whatever the exit code;
    the files are already whole or cleaned up, so skip the interpreter's shutdown."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C: still one line
    if not said:
        interrupted()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass
    os._exit(INTERRUPTED)


def _from_interrupt(err: BaseException) -> bool:
    """Whether ``err`` was raised because of a Ctrl-C: a C extension interrupted while it
    initialised (matplotlib's ft2font) raises ImportError from the KeyboardInterrupt."""
    seen = set()
    while err is not None and id(err) not in seen:
        if isinstance(err, KeyboardInterrupt):
            return True
        seen.add(id(err))
        err = err.__cause__ or err.__context__
    return False


def main(argv: list[str] | None = None) -> int:
    """Run the ``paprof`` command line; its exit code."""
    _install()
    try:
        from paprof.cli import main as cli

        code = cli.main(args=argv, prog_name="paprof")
        if _SEEN:  # a Ctrl-C swallowed on its way and never raised again: still one
            _exit_interrupted(said=False)
        return code
    except KeyboardInterrupt:
        _exit_interrupted(said=False)
    except SystemExit as done:
        if done.code == INTERRUPTED:  # paprof.cli said so already
            _exit_interrupted(said=True)
        if _SEEN:  # a Ctrl-C swallowed on its way, the command then ended on its own
            _exit_interrupted(said=done.code not in (0, None))  # (an error said one line)
        raise
    except Exception as err:
        if _SEEN or _from_interrupt(err):  # an import the Ctrl-C broke: an interrupt, not a bug
            _exit_interrupted(said=False)
        raise
    finally:
        # The command is over (its files written or cleaned up): a Ctrl-C from now on
        # has nothing left to stop, and during the interpreter's shutdown it would kill
        # the process (exit -2, no line) with the real exit code lost.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
