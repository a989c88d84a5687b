"""The ``paprof`` console script and ``python -m paprof``: only the standard library is
imported before Ctrl-C is handled.

An interrupt (SIGINT) at any moment, the imports of the command's modules included,
ends paprof with one line on stderr and exit code 130, so that CI can tell it from 1 (a
finding) and 2 (bad input). Output files are written under temporary names and renamed
(``paprof.outputs``), which removes them when interrupted: nothing is left half-written.
SIGTERM (a CI job cancelled, ``kill``) is handled the same way (``Terminated``, a kind of
``KeyboardInterrupt``, so every clean-up that an interrupt runs runs), with one line
"paprof: terminated" and exit code 143.
"""

from __future__ import annotations

import os
import signal
import sys

INTERRUPTED = 130
"""The exit code of an interrupted command (128 + SIGINT, as shells report it)."""
TERMINATED = 143
"""The exit code after SIGTERM (128 + 15, as shells report it)."""


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the command is: it ends as a Ctrl-C does (temporary files
    removed, nothing half-written), then with exit code 143."""


def _on_sigterm(_signum, _frame):
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


def _install() -> None:
    """paprof's Ctrl-C handler, where Python's own would be (SIGINT not ignored)."""
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _on_sigint)
        sys.unraisablehook = _unraisable


def _exit_interrupted(said: bool, code: int = INTERRUPTED):
    """Exit 130 (143 after SIGTERM) now. A KeyboardInterrupt that went through some C
    code (an import) marks the interpreter, which then kills itself with SIGINT at exit
    whatever the exit code; the files are already whole or cleaned up, so skip the
    interpreter's shutdown."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C: still one line
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if not said:
        terminated() if code == TERMINATED else interrupted()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass
    os._exit(code)


def _interrupt_in(err: BaseException) -> KeyboardInterrupt | None:
    """The Ctrl-C (or SIGTERM) ``err`` was raised because of, if any: a C extension
    interrupted while it initialised (matplotlib's ft2font) raises ImportError from the
    KeyboardInterrupt."""
    seen = set()
    while err is not None and id(err) not in seen:
        if isinstance(err, KeyboardInterrupt):
            return err
        seen.add(id(err))
        err = err.__cause__ or err.__context__
    return None


def _code_of(err: BaseException | None) -> int:
    return TERMINATED if isinstance(err, Terminated) else INTERRUPTED


def main(argv: list[str] | None = None) -> int:
    """Run the ``paprof`` command line; its exit code."""
    _install()
    try:
        signal.signal(signal.SIGTERM, _on_sigterm)
        from paprof.cli import main as cli

        code = cli.main(args=argv, prog_name="paprof")
        if _SEEN:  # a Ctrl-C swallowed on its way and never raised again: still one
            _exit_interrupted(said=False)
        return code
    except KeyboardInterrupt as err:
        _exit_interrupted(said=False, code=_code_of(err))
    except SystemExit as done:
        if done.code in (INTERRUPTED, TERMINATED):  # paprof.cli said so already
            _exit_interrupted(said=True, code=done.code)
        if _SEEN:  # a Ctrl-C swallowed on its way, the command then ended on its own
            _exit_interrupted(said=done.code not in (0, None))  # (an error said one line)
        raise
    except Exception as err:
        cause = _interrupt_in(err)
        if cause is not None:  # an import the Ctrl-C broke: an interrupt, not a bug
            _exit_interrupted(said=False, code=_code_of(cause))
        if _SEEN:
            _exit_interrupted(said=False)
        raise
    finally:
        # The command is over (its files written or cleaned up): a Ctrl-C from now on
        # has nothing left to stop, and during the interpreter's shutdown it would kill
        # the process (exit -2, no line) with the real exit code lost.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
