"""Work spread over worker processes, results in the order of the tasks.

``jobs()`` says how many processes a command may use: ``PAPROF_JOBS`` in the environment
(``1``: everything in this process), else the processors this process may run on, at most
``MAX_JOBS``. ``ordered_map(fn, tasks, jobs)`` gives ``fn(task)`` for each task, in order,
from a pool of that many workers (in this process when one job is asked for).

The workers ignore Ctrl-C: the interrupt reaches this process, which ends the workers
(terminated and reaped, none left behind) and raises ``KeyboardInterrupt`` as a serial
command would; an exception raised by ``fn`` ends the pool the same way and is raised
here, the first one in task order. ``fn`` and its tasks must be picklable: a module-level
function whose tasks carry everything it needs, so that it runs the same under ``spawn``
(macOS, Windows) as under ``fork``.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
from typing import Callable, Iterable, Iterator

from paprof.errors import UserError

JOBS_ENV = "PAPROF_JOBS"
MAX_JOBS = 8
"""The default's cap: past a few processes, reading a store is bound by the disk and the
parent's merging, and each worker costs its memory."""


def jobs(environ=None) -> int:
    """Worker processes to use: ``$PAPROF_JOBS`` (a whole number, 1 or more), else the
    processors available to this process, at most ``MAX_JOBS``."""
    given = (os.environ if environ is None else environ).get(JOBS_ENV, "").strip()
    if given:
        try:
            count = int(given)
        except ValueError:
            count = 0
        if count < 1:
            raise UserError(f"{JOBS_ENV} must be a whole number of processes, 1 or more; "
                            f"got {given!r}")
        return count
    try:
        available = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # macOS, Windows
        available = os.cpu_count() or 1
    return max(1, min(available, MAX_JOBS))


def chunk_size(count: int, jobs: int, most: int) -> int:
    """Items a task for ``count`` items over ``jobs`` workers: about four tasks a worker
    (so that they finish together), at most ``most``."""
    return max(1, min(most, -(-count // (4 * max(1, jobs)))))


def drain(items: list, size: int) -> Iterator[list]:
    """``items`` in order, ``size`` at a time, each piece taken out of the list as it is
    given: what was handed on to a worker is not held here as well."""
    while items:
        piece = items[:size]
        del items[:size]
        yield piece


def _ignore_interrupts() -> None:
    """A worker's start: Ctrl-C is the parent's to handle (held until now, see
    ``_pool``)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # pool.terminate's signal ends it quietly
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


@contextlib.contextmanager
def _interrupts_held():
    """Ctrl-C held back (POSIX) while inside: delivered, as usual, on leaving."""
    blocks = hasattr(signal, "pthread_sigmask")
    before = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT}) if blocks else None
    try:
        yield
    finally:
        if blocks:
            signal.pthread_sigmask(signal.SIG_SETMASK, before)


def _pool(jobs: int):
    """A pool of ``jobs`` workers, made with Ctrl-C held: a worker that got it before its
    ``_ignore_interrupts`` would print a traceback."""
    with _interrupts_held():
        return multiprocessing.get_context().Pool(jobs, initializer=_ignore_interrupts)


@contextlib.contextmanager
def ordered_map(fn: Callable, tasks: Iterable, jobs: int) -> Iterator[Iterator]:
    """``fn(task)`` for each task, in task order, from ``jobs`` worker processes (in this
    process for one job); ``tasks`` are taken as the workers need them. A context
    manager: leaving it by an exception, an interrupt or early ends the workers, so none
    outlives it.

        with ordered_map(fn, tasks, 2) as results:
            for result in results: ...
    """
    if jobs <= 1:
        yield map(fn, tasks)
        return
    pool = _pool(jobs)
    before = _terminate_quietly()
    try:
        yield pool.imap(fn, tasks)
    finally:  # done, failed, interrupted or left early: the workers end here, reaped
        with _interrupts_held():  # a second Ctrl-C waits until they are
            pool.terminate()
            pool.join()
        if before is not None:
            signal.signal(signal.SIGTERM, before)


TERMINATED = 143
"""The exit code after SIGTERM (128 + 15, as shells report it)."""


def _terminated(_signum, _frame):
    """SIGTERM while workers run: one line, then ``SystemExit`` so that the workers are
    ended and reaped (not left writing to a closed pipe, with tracebacks)."""
    import sys

    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second one: still one line
    try:
        sys.stderr.write("paprof: terminated\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    raise SystemExit(TERMINATED)


def _terminate_quietly():
    """Install ``_terminated`` for SIGTERM (main thread only); the handler it replaced,
    or None when it could not be installed."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        return None
    try:
        return signal.signal(signal.SIGTERM, _terminated)
    except (ValueError, OSError):
        return None
