"""Files inside a run store, never through a symbolic link.

A store may have been written by someone else (a shard a CI matrix job uploaded, the
runs folder of a shared GPU machine), and paprof may run as root. So nothing inside a
store is read or written through a link: the store's own root may be one (the user
named it), nothing below it.

- Readers: ``files`` walks a store without entering a linked folder; a link it meets
  (a folder, or a file of the kinds asked for) is skipped with one warning line
  (``warn``, once per path). ``read`` and ``open_read`` open with ``O_NOFOLLOW`` and
  take only regular files (a FIFO cannot block them); ``regular`` says whether a path is
  a regular file that is no link.
- Writers: ``open_folder`` makes the folders a record goes into and opens the last,
  each a real folder of the store, opened inside the one before with ``O_NOFOLLOW |
  O_DIRECTORY`` (a link is refused, one line naming it), so that the check and the use
  are one: the writer then works in that descriptor (``dir_fd``), and a folder swapped
  for a link after it was checked is never written through; ``folder`` only checks.
  ``temp_at`` makes a temporary file in such a folder (``O_CREAT | O_EXCL |
  O_NOFOLLOW``, a random name), so a link planted at a predictable name is never
  followed; ``remove_temps_at`` removes a writer's temporary files whatever moment it
  was stopped at, ``remove_stale`` those of a writer killed with SIGKILL (its process
  gone); ``open_write`` opens a file of the store for writing without following or
  truncating what was planted there. ``private_folder`` is where a program paprof runs
  writes by path (ncu's report), ``move_in`` moves its files into the store by
  descriptor.
- ``copy`` copies a regular file holes and all (``SEEK_DATA``/``SEEK_HOLE``, and a block
  of zeros is never written): a sparse report stays sparse.
"""

from __future__ import annotations

import errno
import functools
import os
import re
import stat
import sys
from pathlib import Path

from paprof.errors import UserError
from paprof.names import TEMP_MARK
from paprof.safetext import shown

NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_READ = os.O_RDONLY | NOFOLLOW | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
BLOCK = 1 << 20
LINK = "a symbolic link inside a run store (paprof never follows links in a store)"

_warned: set[str] = set()


def warn(path, why: str = LINK) -> None:
    """One line on stderr, once per path in a process: ``path`` was skipped and why."""
    key = str(path)
    if key in _warned:
        return
    _warned.add(key)
    try:
        sys.stderr.write(f"paprof: warning: skipped {shown(path)}: {why}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def skipped(path) -> bool:
    """Whether ``path`` is a link (and so skipped, with its warning)."""
    if os.path.islink(path):
        warn(path)
        return True
    return False


def regular(path) -> bool:
    """Whether ``path`` is a regular file and no link (a link is warned about)."""
    try:
        st = os.lstat(path)
    except (OSError, ValueError):
        return False
    if stat.S_ISLNK(st.st_mode):
        warn(path)
        return False
    return stat.S_ISREG(st.st_mode)


def files(root, suffixes) -> list[Path]:
    """The regular files below the folder ``root`` whose names end with ``suffixes`` (a
    string or a tuple), sorted by path. Linked folders are not entered and linked files
    not taken: each is warned about once. A subfolder that cannot be read is passed over."""
    suffixes = (suffixes,) if isinstance(suffixes, str) else tuple(suffixes)
    found: list[str] = []
    stack = [os.fspath(root)]
    while stack:
        try:
            with os.scandir(stack.pop()) as entries:
                entries = list(entries)
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.is_symlink():
                    if entry.name.endswith(suffixes) or entry.is_dir():
                        warn(entry.path)
                elif entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                elif entry.name.endswith(suffixes) and entry.is_file(follow_symlinks=False):
                    found.append(entry.path)
            except OSError:
                continue
    if os.sep != "/" or os.altsep:  # Windows: paths compare case-folded, by either slash
        return sorted(map(Path, found))
    # As ``sorted(map(Path, found))``, without a Python comparison of two paths a step
    # (10,000 reports: 0.1 s): a POSIX path sorts by its parts, and every path here is
    # the root's text, then the names below it, each after a "/".
    return [Path(p) for p in sorted(found, key=_parts)]


def _parts(path: str) -> list[str]:
    return path.split("/")


def open_read(path) -> int:
    """A file descriptor of the regular file ``path``, opened without following a link
    (``OSError`` ELOOP for one; ``UserError`` for a FIFO, device or folder)."""
    fd = os.open(path, _READ)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UserError(f"{path} is not a regular file (a FIFO, device or folder); "
                            "paprof reads only regular files in a store")
        if hasattr(os, "O_NONBLOCK"):
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _is_link_error(err: OSError, path) -> bool:
    return err.errno in (errno.ELOOP, errno.EMLINK) or os.path.islink(path)


def read(path) -> bytes | None:
    """The bytes of ``path``; None when it is absent, not a regular file, or a link (the
    link warned about). Other errors (permission denied) are raised."""
    try:
        fd = open_read(path)
    except FileNotFoundError:
        return None
    except UserError:
        return None
    except OSError as err:
        if _is_link_error(err, path):
            warn(path)
            return None
        raise
    try:
        return read_all(fd)
    finally:
        os.close(fd)


def read_all(fd: int) -> bytes:
    """Every byte left in the open file ``fd``, to its end: as its size says, then on
    until a read gives nothing (a file that grew meanwhile is read whole, as a file
    object's ``read()`` reads it), without making a file object (10,000 sidecars: 0.1 s)."""
    data = os.read(fd, max(os.fstat(fd).st_size, 0) + 1)
    if not data:
        return data
    parts = [data]
    while True:
        more = os.read(fd, max(len(data), 65536))
        if not more:
            return b"".join(parts) if len(parts) > 1 else data
        parts.append(more)


_DIR = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)


def open_folder(root, target) -> int:
    """A file descriptor of the folder ``target`` (``root`` or a folder below it), made
    where missing, reached from ``root`` one folder at a time, each opened with
    ``O_NOFOLLOW | O_DIRECTORY`` inside the one before: the check that no folder below
    ``root`` is a link and the use are one, so a folder swapped for a link after it was
    checked is never written through (``root`` itself may be a link: the user named it).
    A link or a file on the way is a one-line ``UserError`` naming it."""
    root, target = Path(root), Path(target)
    try:
        root.mkdir(parents=True, exist_ok=True)
        fd = os.open(root, _DIR)
    except OSError as err:
        raise UserError(f"cannot write {target}: {err.strerror or err}") from None
    here = root
    try:
        for part in target.relative_to(root).parts:
            here = here / part
            try:
                os.mkdir(part, dir_fd=fd)
            except FileExistsError:
                pass
            try:
                inner = os.open(part, _DIR | NOFOLLOW, dir_fd=fd)
            except OSError as err:
                if err.errno in (errno.ELOOP, errno.EMLINK) or _is_link_at(part, fd):
                    raise UserError(f"{here} is a symbolic link: paprof writes only into the run "
                                    f"store's own folders, never through a link (remove it)") from None
                if err.errno == errno.ENOTDIR:
                    raise UserError(f"cannot write into {here}: it is not a folder") from None
                raise
            os.close(fd)
            fd = inner
    except OSError as err:
        os.close(fd)
        raise UserError(f"cannot write {target}: {err.strerror or err}") from None
    except BaseException:
        os.close(fd)
        raise
    return fd


def _is_link_at(name: str, dir_fd: int) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def folder(root, target) -> Path:
    """Make ``target`` (``root`` or a folder below it) and each folder between, and check
    that each below ``root`` is a real folder: a link or a file there is a one-line
    ``UserError`` naming it (records are never written through a link out of the store).
    Writers that go on to use the folder take ``open_folder``'s descriptor instead."""
    os.close(open_folder(root, target))
    return Path(target)


def temp_at(dir_fd: int, name: str, token: str) -> tuple[int, str]:
    """A new temporary file for the file ``name`` in the folder open as ``dir_fd`` (see
    ``temp``): its descriptor and its name in that folder; created with
    ``O_CREAT | O_EXCL | O_NOFOLLOW`` there, never through a path."""
    import secrets

    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    while True:
        tmp = f".{name}{TEMP_MARK}{token}.{secrets.token_hex(4)}"
        try:
            return os.open(tmp, flags, 0o666, dir_fd=dir_fd), tmp
        except FileExistsError:
            continue


def remove_temps_at(dir_fds, token: str) -> None:
    """Remove the temporary files ``token``'s writer made in the folders open as
    ``dir_fds`` (never raises)."""
    for fd in set(dir_fds):
        try:
            names = os.listdir(fd)
        except OSError:
            continue
        for name in names:
            if name.startswith(".") and f"{TEMP_MARK}{token}" in name:
                try:
                    os.unlink(name, dir_fd=fd)
                except OSError:
                    pass


@functools.lru_cache(maxsize=None)
def host() -> str:
    """This machine and process-id namespace, in 8 hex digits (the host name and, on
    Linux, the pid namespace): a temporary file's process id means something only here."""
    import hashlib
    import socket

    try:
        space = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        space = 0
    return hashlib.sha1(f"{socket.gethostname()}/{space}".encode()).hexdigest()[:8]



def token() -> str:
    """A writer's mark for its temporary files: its process id, where that id means
    something (``host``) and 64 random bits: ``PID@HOST-RANDOM``."""
    import secrets

    return f"{os.getpid()}@{host()}-{secrets.token_hex(8)}"


_TOKEN = re.compile(re.escape(TEMP_MARK) + r"(\d+)@([0-9a-f]{8})-[0-9a-f]{16}")


def _stale(name: str, st: os.stat_result) -> bool:
    """Whether ``name`` (its ``lstat`` ``st``) is a temporary file or private folder a
    writer of this user left behind, killed before it could remove it: a hidden name
    with a token of this machine whose process is gone, a regular file or a real folder
    (never a link), this user's. A process id of another machine or container, of a
    process still alive, or another user's file: not stale."""
    found = _TOKEN.search(name)
    if not name.startswith(".") or found is None or found.group(2) != host():
        return False
    if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
        return False
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        return False
    pid = int(found.group(1))
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except (OSError, OverflowError):
        return False
    return False


def _remove_folder_at(dir_fd: int, name: str) -> None:
    """Remove the real folder ``name`` of the folder open as ``dir_fd`` with the files in
    it (a private folder holds files only), by descriptor: nothing is followed."""
    try:
        inner = os.open(name, _DIR | NOFOLLOW, dir_fd=dir_fd)
    except OSError:
        return
    try:
        for entry in os.listdir(inner):
            try:
                os.unlink(entry, dir_fd=inner)
            except OSError:
                pass
    finally:
        os.close(inner)
    try:
        os.rmdir(name, dir_fd=dir_fd)
    except OSError:
        pass


def remove_stale_at(dir_fd: int) -> int:
    """Remove what a killed writer left in the folder open as ``dir_fd`` (``_stale``:
    this user's hidden temporary files and private folders whose process is gone), by
    descriptor, never through a link; how many. Never raises."""
    removed = 0
    try:
        names = os.listdir(dir_fd)
    except OSError:
        return 0
    for name in names:
        try:
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            if not _stale(name, st):
                continue
            if stat.S_ISDIR(st.st_mode):
                _remove_folder_at(dir_fd, name)
            else:
                os.unlink(name, dir_fd=dir_fd)
            removed += 1
        except OSError:
            continue
    return removed


def remove_stale(root) -> int:
    """``remove_stale_at`` in the folder ``root`` and every real folder below it (links
    are not entered); how many were removed. Never raises."""
    removed = 0
    try:
        top = os.open(root, _DIR)
    except OSError:
        return 0
    stack = [top]
    while stack:
        fd = stack.pop()
        try:
            removed += remove_stale_at(fd)
            for name in os.listdir(fd):
                try:
                    stack.append(os.open(name, _DIR | NOFOLLOW, dir_fd=fd))
                except OSError:  # a file, a link, no permission
                    continue
        except OSError:
            pass
        finally:
            os.close(fd)
    return removed


def _safe_chain(folder) -> Path | None:
    """``folder``'s real path when no one but this user and root can rename or replace
    it or any folder above it (each owned by this user or root, and writable by group
    or others only with the sticky bit); None when someone else could."""
    real = Path(os.path.realpath(folder))
    if not hasattr(os, "getuid"):
        return real
    for here in (real, *real.parents):
        try:
            st = os.stat(here)
        except OSError:
            return None
        if st.st_uid not in (os.getuid(), 0):
            return None
        if st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
            return None
    return real


PRIVATE = "paprof-run"
"""The start of a private folder's name (``private_folder``)."""


def private_folder(near, mark: str) -> tuple[Path, int]:
    """A new folder only this user may enter (mode 0700), for files a program paprof runs
    writes by path (ncu's report, its log, the launcher's result): its real path and an
    open descriptor. Made in ``near`` (the store, so that moving a file from it into the
    store is a rename) when no one else can rename or replace ``near`` or a folder
    above it, else in the system's temporary folder under the same condition; the path
    handed out leads through no link. ``UserError`` when neither place is safe."""
    import tempfile

    for place in (near, tempfile.gettempdir()):
        real = _safe_chain(place)
        if real is None:
            continue
        try:
            parent = os.open(real, _DIR)
        except OSError:
            continue
        try:
            remove_stale_at(parent)  # what killed writers left here
        finally:
            os.close(parent)
        try:
            made = tempfile.mkdtemp(prefix=f".{PRIVATE}{TEMP_MARK}{mark}.", dir=real)
            fd = os.open(made, _DIR | NOFOLLOW)
        except OSError:
            continue
        return Path(made), fd
    raise UserError(f"no safe place for ncu's report: others may rename or replace {near} or a "
                    f"folder above it, and the temporary folder too (set TMPDIR to a folder "
                    f"only you may write)")


def remove_private(path: Path, fd: int) -> None:
    """Remove the private folder ``path`` (open as ``fd``, closed here) and the files in
    it. Never raises."""
    os.close(fd)
    try:
        parent = os.open(path.parent, _DIR)
    except OSError:
        return
    try:
        _remove_folder_at(parent, path.name)
    finally:
        os.close(parent)


def refuse_link_at(dir_fd: int, name: str) -> None:
    """``UserError`` (one line naming it) when ``name`` in the folder open as ``dir_fd`` is
    a symbolic link: a store's file is never replaced or written through one."""
    if _is_link_at(name, dir_fd):
        raise UserError(f"{shown(name)} in the run's folder is a symbolic link: paprof writes "
                        f"only into the run store's own files, never through a link (remove it)")


def move_in(src_fd: int, name: str, dst_fd: int, final: str, mark: str) -> None:
    """Move the file ``name`` of the folder open as ``src_fd`` (a private folder) to
    ``final`` in the folder open as ``dst_fd``, by descriptor: a rename where both lie
    on one file system, else a copy under a temporary name there (``temp_at``) renamed
    into place. A link at ``final`` is refused (``UserError`` naming it); nothing is
    followed."""
    refuse_link_at(dst_fd, final)
    try:
        os.replace(name, final, src_dir_fd=src_fd, dst_dir_fd=dst_fd)
        return
    except OSError as err:
        if err.errno != errno.EXDEV:
            raise
    fd, tmp = temp_at(dst_fd, final, mark)
    try:
        source = os.open(name, _READ, dir_fd=src_fd)
        try:
            _copy_fd(source, fd)
        finally:
            os.close(source)
    finally:
        os.close(fd)
    os.replace(tmp, final, src_dir_fd=dst_fd, dst_dir_fd=dst_fd)



def open_write(path) -> int:
    """A new file at ``path`` for writing, what was there (a link, a hard link to a file
    elsewhere, an old copy) removed first rather than written through; ``UserError`` when
    something is put back in between."""
    path = Path(path)
    try:
        path.unlink()
    except FileNotFoundError:
        pass
    except OSError as err:
        raise UserError(f"cannot write {path}: {err.strerror or err}") from None
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        return os.open(path, flags, 0o666)
    except OSError as err:
        raise UserError(f"cannot write {path}: {err.strerror or err}") from None


def _extents(fd: int, size: int):
    """(start, end) of the parts of the file that hold data: all of it where the file
    system cannot say (no ``SEEK_DATA``)."""
    if not hasattr(os, "SEEK_DATA"):
        yield 0, size
        return
    pos = 0
    while pos < size:
        try:
            start = os.lseek(fd, pos, os.SEEK_DATA)
        except OSError as err:
            if err.errno == errno.ENXIO:  # only a hole from here on
                return
            if pos == 0:  # not supported here: all of it
                yield 0, size
                return
            raise
        end = min(os.lseek(fd, start, os.SEEK_HOLE), size)
        yield start, end
        pos = end


def copy(src, fd_out: int) -> None:
    """Copy the regular file ``src`` (opened without following a link) into the new file
    ``fd_out``: the holes stay holes, and a block of zeros is left a hole too."""
    fd_in = open_read(src)
    try:
        _copy_fd(fd_in, fd_out)
    finally:
        os.close(fd_in)


def _copy_fd(fd_in: int, fd_out: int) -> None:
    """``copy`` between open files."""
    size = os.fstat(fd_in).st_size
    zeros = bytes(BLOCK)
    for start, end in _extents(fd_in, size):
        pos = start
        while pos < end:
            block = os.pread(fd_in, min(BLOCK, end - pos), pos)
            if not block:
                break
            if block != zeros[: len(block)]:
                view = memoryview(block)
                done = 0
                while done < len(view):
                    done += os.pwrite(fd_out, view[done:], pos + done)
            pos += len(block)
    os.ftruncate(fd_out, size)
