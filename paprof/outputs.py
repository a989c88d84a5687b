"""Writing paprof's output files: never partial, never over something that is not ours.

Every file a command writes (the HTML and Markdown reports, ``table --out``, the
baseline, ``check --junit/--markdown``) goes through this module:

- ``check_target`` runs before the work, so that a bad ``--out`` fails fast. Only a
  regular file may be replaced: a folder, a symbolic link, a device, a FIFO or a socket
  is refused (without opening it, so a FIFO cannot block). An existing file is replaced
  when it is empty, when it carries ``mark`` (paprof's own earlier output of the same
  kind) or with ``force``; never when it is one of the command's ``inputs``.
- ``write`` puts the data in a temporary file in the same folder (a name unique to the
  call, so concurrent commands cannot collide), then renames it over the target with
  ``os.replace``. A failure (read-only file system, permission denied, disk full) or an
  exception removes the temporary file and leaves the target as it was; failures become
  a one-line ``UserError`` (exit 2). Ctrl-C during a write takes effect when the write is
  done (the file is then whole), so no moment of it leaves a temporary file behind.
- The string ``"-"`` (``STDOUT``) is stdout, for both: nothing to check, the data printed
  (a file named "-" is ``"./-"`` or a ``Path``).
"""

from __future__ import annotations

import os
import signal
import stat
import tempfile
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterable, Union

from paprof.errors import UserError
from paprof.errors import UsageError
from paprof.interrupts import check_interrupted

Data = Union[str, bytes, Callable[[Path], None]]
"""Text (written as UTF-8), bytes, or a function that writes the file at the path given."""

STDOUT = "-"
"""The output option's value for stdout (``paprof.commands.STDOUT``)."""


def is_stdout(path) -> bool:
    """Whether ``path`` is the string ``"-"``: stdout."""
    return isinstance(path, str) and path == STDOUT


def one_on_stdout(*options: tuple[str, object]) -> None:
    """``UsageError`` (one line, exit 2) when more than one of ``options`` ((option name,
    value) pairs) is ``"-"``: stdout holds one output."""
    printed = [name for name, value in options if is_stdout(value)]
    if len(printed) > 1:
        raise UsageError(f"{' and '.join(printed)} cannot both print on stdout ('-'): "
                         "give all but one a FILE")


def _why(err: OSError) -> str:
    return err.strerror or str(err)


def _not_regular(path: Path, st: os.stat_result) -> str | None:
    """Why ``path`` may not be replaced, or None for a regular file."""
    if stat.S_ISLNK(st.st_mode):
        return "it is a symbolic link (paprof replaces only regular files)"
    if stat.S_ISDIR(st.st_mode):
        return "it is a folder"
    if not stat.S_ISREG(st.st_mode):
        return "it is not a regular file (a device, FIFO or socket; paprof replaces only regular files)"
    return None


def _same_file(st: os.stat_result, inputs: Iterable) -> bool:
    for item in inputs:
        try:
            other = os.stat(item)
        except (OSError, ValueError, TypeError):
            continue
        if (other.st_dev, other.st_ino) == (st.st_dev, st.st_ino):
            return True
    return False


def _holds(path: Path, mark: str) -> bool:
    try:
        with open(path, "rb") as fh:
            head = fh.read(4096).decode("utf-8", "replace")
    except OSError as err:
        raise UserError(f"cannot read {path}: {_why(err)}") from None
    return mark in head


def check_target(path, *, what: str | None = None, mark: str | None = None,
                 force: bool = False, inputs: Iterable = (), parents: bool = False) -> bool:
    """Whether writing ``path`` replaces an existing file (True) or makes a new one.

    ``UserError`` when it may not be written: not a regular file, one of ``inputs``, its
    folder missing (unless ``parents``: it will be made), or an existing non-empty file
    without ``mark`` (``what`` names its kind, e.g. "a paprof report") and without ``force``.
    """
    if is_stdout(path):
        return False
    path = Path(path)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        if not parents and not path.parent.is_dir():
            raise UserError(f"cannot write {path}: folder {path.parent} does not exist") from None
        return False
    except OSError as err:
        raise UserError(f"cannot write {path}: {_why(err)}") from None
    reason = _not_regular(path, st)
    if reason:
        raise UserError(f"cannot write {path}: {reason}")
    if _same_file(st, inputs):
        raise UserError(f"cannot write {path}: it is one of this command's inputs")
    if force or st.st_size == 0 or (mark is not None and _holds(path, mark)):
        return True
    kind = f" and is not {what}" if what else ""
    raise UserError(f"{path} exists{kind}; choose another file or pass --force")


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@contextmanager
def _interrupt_after():
    """Hold SIGINT until the block is done, then deliver it (main thread only: Python
    runs signal handlers there and nowhere else)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: caught.append(frame))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if caught and callable(previous):
            previous(signal.SIGINT, caught[0])
        elif caught and previous == signal.SIG_DFL:
            signal.raise_signal(signal.SIGINT)


def write(path, data: Data, *, parents: bool = False) -> Path:
    """Write ``data`` to ``path`` atomically (see the module docstring); ``path``
    (``"-"``: printed on stdout). After a Ctrl-C that was swallowed on its way
    (``paprof.interrupts``), nothing: the interrupt."""
    check_interrupted()
    if is_stdout(path):
        _print(data)
        return Path(STDOUT)
    with _interrupt_after():
        return _write(Path(path), data, parents)


def text_for_stdout(target, render: Callable[[], str]) -> str | None:
    """An output asked for as ``target`` (an option's value): ``render()``'s text written
    to the file ``target`` (None returned), or returned for the caller to print when
    ``target`` is "-"; None, without rendering, when ``target`` is None."""
    if target is None:
        return None
    text = render()
    if is_stdout(target):
        return text
    write(target, text)
    return None


def _print(data: Data) -> None:
    import sys

    if callable(data):
        with tempfile.TemporaryDirectory(prefix="paprof-") as folder:
            tmp = Path(folder) / "out"
            data(tmp)
            data = tmp.read_bytes()
    sys.stdout.flush()
    if isinstance(data, bytes):
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
    else:
        sys.stdout.write(data)
        sys.stdout.flush()


def _write(path: Path, data: Data, parents: bool) -> Path:
    try:
        if parents:
            path.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as err:
        raise UserError(f"cannot write {path}: {_why(err)}") from None
    tmp = Path(name)
    try:
        if callable(data):
            os.close(fd)
            data(tmp)
        else:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data.encode("utf-8") if isinstance(data, str) else data)
                fh.flush()
                os.fsync(fh.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        try:
            reason = _not_regular(path, os.lstat(path))
        except FileNotFoundError:
            reason = None
        if reason:  # it changed since check_target
            raise UserError(f"cannot write {path}: {reason}")
        os.replace(tmp, path)
    except OSError as err:
        tmp.unlink(missing_ok=True)
        raise UserError(f"cannot write {path}: {_why(err)}") from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path
