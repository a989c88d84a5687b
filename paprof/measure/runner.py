"""Running ncu: stream its output to a log file, report progress, diagnose failures.

``run_ncu`` reads ncu's combined stdout/stderr as it arrives (replay progress is
printed without newlines), copies every byte to the log file, and hands each
``==PROF== Profiling`` update to an ``on_kernel`` callback for the progress display.
"""

from __future__ import annotations

import codecs
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from paprof.read import store_files
from paprof.errors import UserError
from paprof.measure.ncu_log import NcuLog, ProfiledKernel, diagnose, parse_profiling

KernelCallback = Callable[[ProfiledKernel], None]


@dataclass
class NcuRun:
    """The outcome of one ncu run that profiled something."""

    argv: list[str]
    log_path: Path
    log: NcuLog

    @property
    def replay_passes(self) -> int | None:
        return self.log.replay_passes


def _stop(proc: subprocess.Popen) -> None:
    """End ncu and the program it runs (they share the session ncu leads)."""
    for sig, wait in ((signal.SIGTERM, 5), (signal.SIGKILL, 5)):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


_WATCH = """
import os, signal, sys, time
signal.signal(signal.SIGINT, signal.SIG_IGN)
group = int(sys.argv[1])
while os.read(0, 512):
    pass
for sig in (signal.SIGTERM, signal.SIGKILL):
    try:
        os.killpg(group, sig)
    except OSError:
        break
    time.sleep(5)
"""
"""The watcher of an ncu session: it waits on a pipe only paprof writes to; at its end
(paprof done, or killed, even with SIGKILL) it ends whatever is left of the session
ncu leads (ncu and the program it profiles): SIGTERM, SIGKILL 5 s later."""


def _watch(proc: subprocess.Popen) -> tuple[int, subprocess.Popen] | None:
    """Start ``proc``'s watcher (its own session: a Ctrl-C is not its): the write end of
    its pipe, for paprof to close when ncu is done, and the watcher; None if it cannot be
    started (ncu then runs unwatched, as before)."""
    read, write = os.pipe()
    try:
        watcher = subprocess.Popen([sys.executable, "-I", "-S", "-c", _WATCH, str(proc.pid)],
                                   stdin=read, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL, start_new_session=True)
    except OSError:
        os.close(write)
        return None
    finally:
        os.close(read)
    return write, watcher


def _unwatch(watch: tuple[int, subprocess.Popen] | None) -> None:
    """ncu is done: its watcher ends what is left of its session and exits (reaped here;
    one that takes longer is left to finish on its own)."""
    if watch is None:
        return
    write, watcher = watch
    os.close(write)
    try:
        watcher.wait(timeout=1)
    except subprocess.TimeoutExpired:
        _LEFT.append(watcher)


_LEFT: list[subprocess.Popen] = []
"""Watchers still ending a session (kept: they are reaped by ``subprocess`` later)."""


def _stream(
    proc: subprocess.Popen, log_file, log: NcuLog, on_kernel: KernelCallback | None
) -> None:
    fd = proc.stdout.fileno()
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    pending = ""
    last_shown = None
    while True:
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        log_file.write(chunk)
        log_file.flush()
        pending += decoder.decode(chunk).replace("\r", "\n")
        *lines, pending = pending.split("\n")
        for line in lines:
            log.add_line(line)
        if on_kernel is None:
            continue
        for line in lines + [pending]:
            current = parse_profiling(line)
            if current is not None and current != last_shown:
                last_shown = current
                on_kernel(current)
    if pending:
        log.add_line(pending)


def run_ncu(
    argv: Sequence[str],
    log_path: Path,
    report: Path,
    on_kernel: KernelCallback | None = None,
    env: dict | None = None,
    cwd: Path | None = None,
    shown_log: Path | None = None,
) -> NcuRun:
    """Run ncu, logging to ``log_path``; raise a clear error unless it profiled into ``report``.
    ``shown_log``: where the errors say the log is (where it is moved to; ``log_path``).

    Raises ``UserError`` (ncu missing, counters not permitted, no GPU, ncu's own
    ``==ERROR==`` lines quoted with the log path) or ``VerificationError`` (the
    launcher's check failed under ncu). ``KeyboardInterrupt`` stops ncu first.
    """
    argv = [str(a) for a in argv]
    log_path = Path(log_path)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log = NcuLog()
    with os.fdopen(store_files.open_write(log_path), "wb") as log_file:  # never through a planted link
        log_file.write(("$ " + " ".join(argv) + "\n").encode())
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=cwd,
                start_new_session=True,
            )
        except FileNotFoundError:
            raise UserError(
                f"ncu not found at {argv[0]}: install Nsight Compute or set NCU=/path/to/ncu"
            ) from None
        except PermissionError:
            raise UserError(f"{argv[0]} is not executable: fix it or set NCU") from None
        watch = _watch(proc)  # ncu dies with paprof, even killed with SIGKILL
        try:
            _stream(proc, log_file, log, on_kernel)
            returncode = proc.wait()
        except BaseException:
            _stop(proc)
            raise
        finally:
            proc.stdout.close()
            _unwatch(watch)
    error = diagnose(log, returncode, shown_log or log_path, Path(report).exists())
    if error is not None:
        raise error
    return NcuRun(argv=argv, log_path=log_path, log=log)
