"""Work spread over worker processes, results in the order of the tasks.

``jobs()`` says how many processes a command may use: ``PAPROF_JOBS`` in the environment
(``1``: everything in this process), else the processors this process may run on, at most
``MAX_JOBS``. ``ordered_map(fn, tasks, jobs)`` gives ``fn(task)`` for each task, in order,
from that many workers (in this process when one job is asked for). A task is taken from
``tasks`` only when a worker is free for it, and sent down that worker's own pipe.

The workers ignore Ctrl-C: the interrupt reaches this process, which ends the workers and
raises ``KeyboardInterrupt`` as a serial command would. A worker dies with this process,
even killed with SIGKILL: on Linux the kernel kills it (``PR_SET_PDEATHSIG``), elsewhere
it sees, within ``ORPHAN_CHECK`` seconds of waiting for a task, that its parent is gone. Leaving the map in any way (done,
an exception, an interrupt, early) ends every worker at once, whatever it is doing:
SIGTERM, SIGKILL after ``GRACE`` seconds for one still there, each reaped, none left
behind. An exception raised by ``fn`` is raised here, the first one in task order; a
worker that dies is a ``UserError``, not a wait. ``fn`` and its tasks must be picklable:
a module-level function whose tasks carry everything it needs, so that it runs the same
under ``spawn`` (macOS, Windows) as under ``fork``.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import sys
import threading
from multiprocessing.connection import wait
from typing import Callable, Iterable, Iterator

from paprof.errors import UserError
from paprof.interrupts import terminated

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


GRACE = 1.0
"""Seconds a worker has to die of SIGTERM before it is killed."""

_HELD = {signal.SIGINT, signal.SIGTERM}


def _ignore_interrupts() -> None:
    """A worker's start: Ctrl-C is the parent's to handle, SIGTERM ends the worker
    quietly (both held until now, see ``_interrupts_held``)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _HELD)


@contextlib.contextmanager
def _interrupts_held():
    """Ctrl-C and SIGTERM held back (POSIX) while inside: delivered, as usual, on
    leaving. A worker started inside would otherwise get one before its
    ``_ignore_interrupts`` (and print a traceback), and the workers' ending is not cut
    short by one."""
    blocks = hasattr(signal, "pthread_sigmask")
    before = signal.pthread_sigmask(signal.SIG_BLOCK, _HELD) if blocks else None
    try:
        yield
    finally:
        if blocks:
            signal.pthread_sigmask(signal.SIG_SETMASK, before)


ORPHAN_CHECK = 1.0
"""Seconds between a waiting worker's looks at whether its parent is still there."""


def death_signal(signum: int, parent: int | None = None) -> Callable[[], None] | None:
    """A function that has the kernel send the process calling it ``signum`` when its
    parent (``parent``, by default this process) ends, and ends it at once if that
    happened already: for a child's start (``subprocess``'s ``preexec_fn``: libc is
    looked up here, before the fork). None where there is no such thing (not Linux)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid() if parent is None else parent

    def arm() -> None:
        prctl(1, signum, 0, 0, 0)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # gone before it was armed
            os._exit(1)

    return arm


def _die_with(parent: int) -> None:
    """A worker's start: killed (SIGKILL) by the kernel when its parent ends (Linux)."""
    arm = death_signal(signal.SIGKILL, parent)
    if arm is not None:
        arm()
    elif os.getppid() != parent:
        os._exit(1)


def _next_task(conn, parent: int):
    """The next task down ``conn``; ``EOFError`` when this process's end is closed or the
    parent is gone (this worker then belongs to another process: nobody is waiting)."""
    while not conn.poll(ORPHAN_CHECK):
        if os.getppid() != parent:
            raise EOFError
    return conn.recv()


def _work(conn, fn: Callable, parent: int) -> None:
    """A worker: ``fn`` of each task that comes down ``conn``, its result (or its
    exception, with the worker's traceback as its cause) sent back, until it is ended
    or its parent ``parent`` is gone."""
    _ignore_interrupts()
    _die_with(parent)
    from multiprocessing.pool import ExceptionWithTraceback, MaybeEncodingError

    while True:
        try:
            task = _next_task(conn, parent)
        except EOFError:  # this process's end is closed, or it is gone: nothing will come
            return
        try:
            reply = (True, fn(task))
        except Exception as err:
            reply = (False, ExceptionWithTraceback(err, err.__traceback__))
        try:
            conn.send(reply)
        except Exception as err:  # a result that cannot be pickled: that error instead
            conn.send((False, MaybeEncodingError(err, reply[1])))
        task = reply = None


class _Worker:
    """One worker process, the end of its pipe here, and the task it has (its place in
    the order; None while it waits for one)."""

    def __init__(self, context, fn: Callable):
        self.conn, theirs = context.Pipe()
        self.process = context.Process(target=_work, args=(theirs, fn, os.getpid()), daemon=True)
        self.process.start()
        theirs.close()
        self.task: int | None = None

    def give(self, index: int, task) -> None:
        self.task = index
        try:
            self.conn.send(task)
        except OSError:
            raise self._died() from None

    def reply(self) -> tuple:
        """(ok, result or exception) of its task, once ``conn`` or the process is ready."""
        try:
            if self.conn.poll():
                got = self.conn.recv()
                self.task = None
                return got
        except (EOFError, OSError):
            pass
        raise self._died()

    def _died(self) -> UserError:
        self.process.join(GRACE)
        code = self.process.exitcode
        how = (f"killed by signal {-code}" if code is not None and code < 0
               else f"exit code {code}")
        return UserError(f"a worker process ended before its task was done ({how}); "
                         f"{JOBS_ENV}=1 does the work in this process")


def _pool(fn: Callable, jobs: int, workers: list) -> None:
    """Start ``jobs`` workers for ``fn``, each added to ``workers`` as it starts (so that
    an error or interrupt part way leaves none that cannot be ended)."""
    context = multiprocessing.get_context()
    for _ in range(jobs):
        workers.append(_Worker(context, fn))


def _end(workers: list) -> None:
    """SIGTERM to every worker, SIGKILL to one still alive ``GRACE`` seconds later; each
    reaped and its pipe closed. Nothing a worker is doing is waited for."""
    for worker in workers:
        worker.process.terminate()
    for worker in workers:
        worker.process.join(GRACE)
        if worker.process.exitcode is None:
            worker.process.kill()
            worker.process.join()
        worker.conn.close()
    workers.clear()


class _Wakeup:
    """A pipe that the C signal handler writes to (``signal.set_wakeup_fd``), waited on
    with the workers: a signal that comes just before the wait blocks, or that is handed
    to another thread, still wakes it, and its handler runs (Ctrl-C raises here rather
    than after a worker's next result). POSIX, main thread only; elsewhere ``fd`` is
    None."""

    def __init__(self):
        self.fd = self._write = self._before = None
        if os.name != "posix" or threading.current_thread() is not threading.main_thread():
            return
        self.fd, self._write = os.pipe()
        for fd in (self.fd, self._write):
            os.set_blocking(fd, False)
        self._before = signal.set_wakeup_fd(self._write, warn_on_full_buffer=False)

    def drain(self) -> None:
        with contextlib.suppress(BlockingIOError):
            while os.read(self.fd, 512):
                pass

    def close(self) -> None:
        if self.fd is not None:
            signal.set_wakeup_fd(self._before)
            os.close(self.fd)
            os.close(self._write)
            self.fd = None


class _Map:
    """``ordered_map``'s context manager (for more than one job)."""

    def __init__(self, fn: Callable, tasks: Iterable, jobs: int):
        self.fn, self.tasks, self.jobs = fn, tasks, jobs
        self.workers: list[_Worker] = []
        self.wakeup = self.sigterm = None

    def __enter__(self) -> Iterator:
        try:
            with _interrupts_held():
                _pool(self.fn, self.jobs, self.workers)
                self.sigterm = _terminate_quietly()
                self.wakeup = _Wakeup()
        except BaseException:  # a Ctrl-C or SIGTERM that came while they started, too
            self.__exit__()
            raise
        return self._results(iter(self.tasks))

    def __exit__(self, *_exc) -> None:
        try:
            with _interrupts_held():  # a second Ctrl-C waits until they are ended
                _end(self.workers)
                if self.wakeup is not None:
                    self.wakeup.close()
        finally:
            if self.sigterm is not None:
                signal.signal(signal.SIGTERM, self.sigterm)

    def _results(self, tasks: Iterator) -> Iterator:
        done: dict = {}  # place in the order: (ok, result or exception), before its turn
        given = wanted = 0
        taking = True  # until the tasks run out or one fails
        ahead: list = []  # the next task, made while the workers work (its making may cost)

        def take() -> None:
            nonlocal taking
            try:
                ahead.append(next(tasks))
            except StopIteration:
                taking = False
            except Exception as err:  # the tasks' own error: raised in its turn
                done[given], taking = (False, err), False

        while True:
            idle = [w for w in self.workers if w.task is None]
            while idle and (ahead or taking):
                if not ahead:
                    take()
                    if not ahead:
                        break
                idle.pop().give(given, ahead.pop())
                given += 1
            while wanted in done:
                ok, value = done.pop(wanted)
                wanted += 1
                if not ok:
                    raise value
                yield value
            busy = [w for w in self.workers if w.task is not None]
            if not busy:
                return
            if taking and not ahead:  # the next task, for the first worker to be free
                take()
                if not taking and given in done:
                    continue  # it failed: raised in its turn, once those before are done
            waits = [w.conn for w in busy] + [w.process.sentinel for w in busy]
            if self.wakeup.fd is not None:
                waits.append(self.wakeup.fd)
            ready = wait(waits)
            if self.wakeup.fd in ready:
                self.wakeup.drain()  # (a signal's handler runs now: Ctrl-C raises here)
            for worker in busy:
                if worker.conn in ready or worker.process.sentinel in ready:
                    index = worker.task
                    done[index] = worker.reply()
                    taking = taking and done[index][0]


def ordered_map(fn: Callable, tasks: Iterable, jobs: int):
    """``fn(task)`` for each task, in task order, from ``jobs`` worker processes (in this
    process for one job); ``tasks`` are taken as the workers need them. A context
    manager: leaving it in any way ends the workers, so none outlives it.

        with ordered_map(fn, tasks, 2) as results:
            for result in results: ...
    """
    if jobs <= 1:
        return contextlib.nullcontext(map(fn, tasks))
    return _Map(fn, tasks, jobs)


def _terminated(_signum, _frame):
    """SIGTERM while workers run: one line, then ``SystemExit`` so that the workers are
    ended and reaped (not left writing to a closed pipe, with tracebacks)."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second one: still one line
    raise SystemExit(terminated())


def _terminate_quietly():
    """Install ``_terminated`` for SIGTERM (main thread only); the handler it replaced,
    or None when it could not be installed."""
    if threading.current_thread() is not threading.main_thread():
        return None
    try:
        return signal.signal(signal.SIGTERM, _terminated)
    except (ValueError, OSError):
        return None
