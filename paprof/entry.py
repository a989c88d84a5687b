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

from paprof.interrupts import (INTERRUPTED, TERMINATED, Terminated, install, interrupted, on_sigterm,
                               seen, terminated)


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
    install()
    try:
        signal.signal(signal.SIGTERM, on_sigterm)
        from paprof.cli import main as cli

        code = cli.main(args=argv, prog_name="paprof")
        if seen():  # a Ctrl-C swallowed on its way and never raised again: still one
            _exit_interrupted(said=False)
        return code
    except KeyboardInterrupt as err:
        _exit_interrupted(said=False, code=_code_of(err))
    except SystemExit as done:
        if done.code in (INTERRUPTED, TERMINATED):  # paprof.cli said so already
            _exit_interrupted(said=True, code=done.code)
        if seen():  # a Ctrl-C swallowed on its way, the command then ended on its own
            _exit_interrupted(said=done.code not in (0, None))  # (an error said one line)
        raise
    except Exception as err:
        cause = _interrupt_in(err)
        if cause is not None:  # an import the Ctrl-C broke: an interrupt, not a bug
            _exit_interrupted(said=False, code=_code_of(cause))
        if seen():
            _exit_interrupted(said=False)
        raise
    finally:
        # The command is over (its files written or cleaned up): a Ctrl-C from now on
        # has nothing left to stop, and during the interpreter's shutdown it would kill
        # the process (exit -2, no line) with the real exit code lost.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
