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
    try:
        from paprof.cli import main as cli

        return cli.main(args=argv, prog_name="paprof")
    except KeyboardInterrupt:
        _exit_interrupted(said=False)
    except SystemExit as done:
        if done.code == INTERRUPTED:  # paprof.cli said so already
            _exit_interrupted(said=True)
        raise
    except Exception as err:
        if _from_interrupt(err):  # an import the Ctrl-C broke: an interrupt, not a bug
            _exit_interrupted(said=False)
        raise
    finally:
        # The command is over (its files written or cleaned up): a Ctrl-C from now on
        # has nothing left to stop, and during the interpreter's shutdown it would kill
        # the process (exit -2, no line) with the real exit code lost.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
