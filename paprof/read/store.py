"""The run store: ``<runs>/<gpu-slug>/<family>/<variant>/<shape-slug>.ncu-rep`` + ``.json``.

A run is written in a private folder (ncu writes its report there by path) and moved
into its own folder at the end, so an interrupted or failed run leaves no half-written
report or sidecar, and a folder swapped for a link meanwhile receives nothing.
Existing runs are kept unless the caller asks to replace them.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import stat
from dataclasses import dataclass, field
from datetime import datetime, timezone
from collections.abc import Mapping
from pathlib import Path
from typing import Iterator

from paprof import interrupts, jsonsafe
from paprof.read import record, store_files, summary
from paprof.errors import UserError
from paprof.read.record import RunRecord
from paprof.names import slug
from paprof.progress import tick
from paprof.safetext import shown
from paprof import outputs

SIDECAR_SUFFIX = ".json"
DEFAULT_ROOT = "runs"
"""The run store every command uses unless told otherwise (relative to the working folder)."""
SHIPPED_RUNS = "examples/h200"
"""Where a clone of paprof holds the real H200 runs it ships (relative to the clone)."""
LOG_SUFFIX = ".ncu.log"
TEMP_MARK = ".tmp-"
SCHEMA = record.SCHEMA
REPORT_BYTES = record.REPORT_BYTES


REPORT_SUFFIX = ".ncu-rep"
"""The report's suffix ncu writes (the reader also takes ``.ncu-repz``)."""
COMMAND_SLUG = "command"
"""The parameter slug of a run of an external command (it has no parameters)."""


@dataclass(frozen=True)
class RunPaths:
    """Where one run's files live."""

    report: Path
    sidecar: Path
    log: Path
    """ncu's console output of the last attempt at this run (kept on failure too)."""

    @property
    def folder(self) -> Path:
        return self.report.parent

    @property
    def root(self) -> Path:
        """The store (``<root>/<gpu>/<family>/<variant>/``)."""
        return self.report.parents[3]


def run_paths(
    runs_dir: Path | str, gpu_slug: str, family: str, variant: str, shape_slug: str
) -> RunPaths:
    """The final paths of a run in the store."""
    folder = Path(runs_dir) / gpu_slug / family / variant
    return RunPaths(
        report=folder / f"{shape_slug}{REPORT_SUFFIX}",
        sidecar=folder / f"{shape_slug}{SIDECAR_SUFFIX}",
        log=folder / f"{shape_slug}{LOG_SUFFIX}",
    )


@dataclass(frozen=True)
class Run:
    """A stored report and its run record (None for a report paprof did not write)."""

    report: Path
    sidecar: RunRecord | None
    layout: dict = field(default_factory=dict)
    """gpu_slug, family and variant read from the store's folder layout (no sidecar)."""

    def _field(self, key: str, fallback):
        for source in (self.sidecar or {}, self.layout):
            if source.get(key) is not None:
                return source[key]
        return fallback

    @property
    def variant(self) -> str:
        """The variant id; a foreign report's file stem."""
        return self._field("variant", self.report.name[: -len(REPORT_SUFFIX)])

    @property
    def family(self) -> str | None:
        return self._field("family", None)

    @property
    def name(self) -> str:
        return f"{self.family}/{self.variant}" if self.family else self.variant

    @property
    def shape_slug(self) -> str:
        return self._field("shape_slug", self.report.name[: -len(REPORT_SUFFIX)])

    @property
    def gpu_slug(self) -> str | None:
        return self._field("gpu_slug", None)

    @property
    def created(self) -> str:
        """The sidecar's ``created``, else the report's modification time (UTC ISO)."""
        if self.sidecar and self.sidecar.get("created"):
            return self.sidecar["created"]
        mtime = datetime.fromtimestamp(self.report.stat().st_mtime, timezone.utc)
        return mtime.isoformat(timespec="seconds")


def _is_temp(path: Path) -> bool:
    return path.name.startswith(".") or TEMP_MARK in path.name


def sidecar_path(report):
    """The provenance sidecar beside ``report`` (``x.ncu-rep`` -> ``x.json``): its text for
    a report's text (the loader's: no Path made and parsed a run), else a Path."""
    if isinstance(report, str) and report.endswith(REPORT_SUFFIX):
        return report[: -len(REPORT_SUFFIX)] + SIDECAR_SUFFIX
    report = Path(report)
    return report.with_name(report.name[: -len(REPORT_SUFFIX)] + SIDECAR_SUFFIX)


def input_files(paths, scan: "Scan | None" = None) -> list[Path]:
    """The files a command reading ``paths`` (reports, or folders searched for them) reads:
    each report and its sidecar. Outputs must never be written over one of them.
    ``scan``: the command's ``Scan``, whose runs are taken where it has them (no sidecar
    is read here)."""
    found: list[Path] = []
    for path in map(Path, paths):
        if not path.is_dir():
            reports = [path]
        elif scan is not None and scan.scanned(path):
            reports = [r.report for r in scan.find_runs(path)]
        else:  # the paths alone: no sidecar read for them (the loader reads each once)
            reports = report_paths(path)
        for report in reports:
            found.append(report)
            if report.name.endswith(REPORT_SUFFIX):
                found.append(sidecar_path(report))
    return found


def check_record(data: dict, path) -> dict:
    """``data`` (a run sidecar or a bench record) when each key paprof reads has its
    type, else a one-line ``UserError`` (``paprof.read.record.check``)."""
    return record.check(data, path)


def _read_sidecar(report: Path) -> RunRecord | None:
    return RunRecord.read(sidecar_path(os.fspath(report)))


def load_run(report: Path, root: Path) -> Run:
    """A run of the folder ``root`` (its sidecar read); without a sidecar, gpu/family/
    variant come from the store layout if it fits."""
    sidecar = _read_sidecar(report)
    if sidecar is not None and REPORT_BYTES in sidecar and not belongs(report, sidecar):
        sidecar = None  # another report's sidecar (a torn or mixed record): not this one's
    layout = {}
    if sidecar is None:
        parts = report.relative_to(root).parts if report.is_relative_to(root) else ()
        if len(parts) == 4:
            layout = {"gpu_slug": parts[0], "family": parts[1], "variant": parts[2]}
    return Run(report, sidecar, layout)


@contextlib.contextmanager
def gc_paused():
    """The cyclic garbage collector paused while thousands of plain objects are made
    (sidecar dicts, report rows): they form no cycles, and the collector's passes over
    the growing heap took 2.3 of 7.7 s loading 10,000 runs. Nests; it resumes as it was."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def find_runs(root: Path | str) -> list[Run]:
    """Every report under ``root`` (or ``root`` itself if it is a report), sorted by path."""
    root = Path(root)
    if root.is_file():
        return [load_run(root, root.parent)]

    reports = report_paths(root)
    runs = []
    with gc_paused():
        for p in reports:
            runs.append(load_run(p, root))
            tick("reading the store's records", len(runs), len(reports))
    return runs


def missing_store(root) -> UserError:
    """The one error for a run store (or report) that is not there, whichever command
    named it; the default store's names the shipped runs."""
    hint = (" (the default run store, which 'paprof run' fills; the H200 runs shipped "
            f"with paprof: --runs {SHIPPED_RUNS})") if Path(root) == Path(DEFAULT_ROOT) else ""
    return UserError(f"no such run store or report: {root}{hint}")


def refuse_inside(path, root, what: str = "an output") -> None:
    """``UserError`` (one line) when ``path`` would be written inside a folder of the run
    store ``root`` (``sweeps/``, a run's folder): the store's readers would read it back
    as one of its records (a second regime file in ``sweeps/`` made every later
    sweep-report of that store fail). Beside the store, or at its top, is fine."""
    if path is None or not Path(root).is_dir():
        return
    top = Path(root).resolve()
    where = Path(path).resolve()
    if where.is_relative_to(top) and len(where.relative_to(top).parts) > 1:
        raise UserError(f"{what} {shown(path)} is inside the run store {shown(root)}'s folders, "
                        f"where its readers would take it for a record; write it elsewhere")


def report_paths(root: Path) -> list[Path]:
    """The reports of the folder ``root`` and below (temporary ones left out), sorted by
    path: what ``find_runs`` makes runs of, before any sidecar is read. UserError when
    ``root`` is not a folder."""
    if not root.is_dir():
        raise missing_store(root)
    return [p for p in store_files.files(root, REPORT_SUFFIX) if not _is_temp(p)]


class Scan:
    """``find_runs`` for the length of one command: each folder is scanned once (its
    sidecars read once), and a report of a scanned folder asked for by itself is the
    run ``find_runs`` would make of it (its sidecar, no folder layout) without reading
    it again. Made per command, never shared: the store may change between commands."""

    def __init__(self):
        self._found: dict[str, list[Run]] = {}
        self._sidecars: dict[str, dict | None] = {}

    def scanned(self, root: Path | str) -> bool:
        """Whether ``root``'s runs were found already (their sidecars read)."""
        return str(root) in self._found

    def find_runs(self, root: Path | str) -> list[Run]:
        """``find_runs(root)``, read once per path."""
        key = str(root)
        runs = self._found.get(key)
        if runs is None:
            if key in self._sidecars and Path(root).is_file():
                runs = [Run(Path(root), self._sidecars[key], {})]
            else:
                runs = find_runs(root)
                for run in runs:
                    self._sidecars.setdefault(str(run.report), run.sidecar)
            self._found[key] = runs
        return runs


def _matches(run: Run, variant: str, shape_slug: str | None, gpu: str | None) -> bool:
    family, _, vid = variant.rpartition("/")
    if run.variant != vid or (family and run.family != family):
        return False
    if shape_slug and run.shape_slug != shape_slug:
        return False
    if gpu and run.gpu_slug != slug(gpu):
        return False
    return True


def latest(
    root: Path | str, variant: str, shape_slug: str | None = None, gpu: str | None = None,
    runs: list[Run] | None = None,
) -> Run:
    """The newest run (by sidecar ``created``) of ``variant`` (``v3`` or ``paged_decode/v3``).

    Narrowed by shape slug and GPU (name or slug) when given. ``runs``: ``find_runs(root)``
    already made (a command that looks up several variants scans the store once). Raises ``UserError``
    listing what the store holds when nothing matches.
    """
    runs = find_runs(root) if runs is None else runs
    chosen = [r for r in runs if _matches(r, variant, shape_slug, gpu)]
    if chosen:
        return max(chosen, key=lambda r: (r.created, str(r.report)))
    wanted = variant + (f" at shape {shape_slug}" if shape_slug else "")
    wanted += f" on {gpu}" if gpu else ""
    if not runs:
        raise UserError(
            f"no run of {wanted}: {root} holds no runs "
            f"(make one with: paprof run --variant {variant})"
        )
    def listed(values) -> str:
        values = sorted(set(filter(None, values)))
        more = f" and {len(values) - 12} more" if len(values) > 12 else ""
        return ", ".join(values[:12]) + more

    raise UserError(
        f"no run of {wanted} in {root}; it holds {listed(r.name for r in runs)} "
        f"(shapes: {listed(r.shape_slug for r in runs)}; GPUs: {listed(r.gpu_slug for r in runs)})"
    )


def belongs(report: Path, sidecar: Mapping | None) -> bool:
    """Whether ``sidecar`` was written with ``report`` (True for sidecars from before
    ``REPORT_BYTES``)."""
    if not isinstance(sidecar, Mapping):
        return False
    size = sidecar.get(REPORT_BYTES)
    if size is None:
        return True
    try:
        return report.stat().st_size == size
    except OSError:
        return False


def is_stored(paths: RunPaths) -> bool:
    """Whether the run is whole in the store: its report and a sidecar written with it.
    A sidecar alone, or a report beside a sidecar of another report, is not a run."""
    if not store_files.regular(paths.report):
        return False
    try:
        raw = store_files.read(paths.sidecar)
        sidecar = jsonsafe.parse(raw) if raw is not None else None
    except (OSError, ValueError):
        return False
    return belongs(paths.report, sidecar)


def refuse_existing(paths: RunPaths, replace: bool, option: str = "--force") -> None:
    """Raise ``UserError`` if the run is stored and ``replace`` is False (``option``: the
    command's option that replaces it)."""
    if not replace and is_stored(paths):
        raise UserError(f"a run already exists at {paths.report}; pass {option} to overwrite it")


@dataclass(frozen=True)
class Pending:
    """Where a run being written lives until it is whole: a private folder of this user
    (``store_files.private_folder``), into which ncu, the launcher and paprof write by
    path; ``scratch`` files never get kept, ``log`` is kept whatever happens."""

    report: Path
    sidecar: Path
    token: str
    log: Path

    def scratch(self, name: str) -> Path:
        """A temporary file beside the run (``name`` like ``result.json``), removed at the end."""
        return self.report.with_name(f"{self.report.name[: -len(REPORT_SUFFIX)]}.{name}")


def _temp_names(paths: RunPaths, private: Path, token: str) -> Pending:
    stem = f".{paths.report.name[: -len(REPORT_SUFFIX)]}{TEMP_MARK}{token}"
    return Pending(report=private / f"{stem}{REPORT_SUFFIX}", sidecar=private / f"{stem}{SIDECAR_SUFFIX}",
                   token=token, log=private / f"{stem}{LOG_SUFFIX}")


def write_sidecar(path: Path, data: Mapping) -> None:
    """Write a run record (``RunRecord`` or its dict) as the sidecar JSON (never through
    a link planted at ``path``)."""
    with os.fdopen(store_files.open_write(path), "w") as fh:
        fh.write(json.dumps(dict(data), indent=2) + "\n")


@contextlib.contextmanager
def writing(paths: RunPaths, replace: bool = False, option: str = "--force") -> Iterator[Pending]:
    """Write a run in a private folder (``Pending``); move its files into place on
    success: the log, then the sidecar, then the report last (a sidecar without its
    report is no run).

    ncu writes its report by path, so it writes into a folder only this user may enter,
    made where no one else can rename it (``store_files.private_folder``); the files are
    moved into the run's folder by descriptor, a link planted at a final name refused: a
    run folder swapped for a link while ncu ran receives nothing. Then the report's
    summary (``paprof.read.summary``) is written beside it, so that loading the run
    opens no report. On any exception (ncu
    failure, ``KeyboardInterrupt``) the log is still moved into place (the error names
    it), everything else is removed and the exception continues; the existing run, if
    any, is untouched. What a killed writer left in the run's folder is removed first
    (``store_files.remove_stale_at``).
    """
    refuse_existing(paths, replace, option)
    where = store_files.open_folder(paths.root, paths.folder)  # the moves land in it
    token = store_files.token()  # 64 random bits: no name to plant a link at beforehand
    try:
        store_files.remove_stale_at(where)
        private, inside = store_files.private_folder(paths.root, token)
    except BaseException:
        os.close(where)
        raise
    pending = _temp_names(paths, private, token)
    log_kept = False

    def keep_log() -> None:
        if store_files.regular(pending.log):
            store_files.move_in(inside, pending.log.name, where, paths.log.name, token)

    try:
        yield pending
        if not pending.report.is_file() or not pending.sidecar.is_file():
            raise RuntimeError(f"run incomplete: {pending.report} or {pending.sidecar} is missing")
        sidecar = json.loads(pending.sidecar.read_text())
        if isinstance(sidecar, dict):
            sidecar[REPORT_BYTES] = pending.report.stat().st_size
            write_sidecar(pending.sidecar, sidecar)
        log_kept = True
        keep_log()
        made = summary.make(pending.report)  # the reader's output, kept beside the report
        # Whole or absent, whatever moment a kill comes: the old report goes first (its
        # sidecar alone is no run), then the new sidecar, then the new report, which
        # makes the record. A report is never beside a sidecar that is not its own; two
        # writers of one record take turns (the folder's lock).
        # By the folder's descriptor: a folder swapped for a link since it was opened is
        # not where these land.
        with _folder_locked(where):
            refuse_existing(paths, replace, option)
            store_files.refuse_link_at(where, paths.report.name)
            try:
                os.unlink(paths.report.name, dir_fd=where)
            except FileNotFoundError:
                pass
            store_files.move_in(inside, pending.sidecar.name, where, paths.sidecar.name, token)
            store_files.move_in(inside, pending.report.name, where, paths.report.name, token)
        _still_there(where, paths.folder)
        if made is not None:
            summary.write(paths.report, paths.root, made, dir_fd=where)
    finally:
        try:
            if not log_kept:  # failed or stopped: ncu's log says why
                keep_log()
        except (OSError, UserError) as err:
            store_files.warn(paths.log, str(err))
        finally:
            store_files.remove_temps_at([where], token)
            store_files.remove_private(private, inside)
            os.close(where)


def _still_there(fd: int, folder: Path) -> None:
    """``UserError`` when the folder open as ``fd`` is no longer at ``folder``: it was moved
    and something else (a link) put there while the run was written; the run is stored
    in the folder it began in, and nothing went where the link leads."""
    try:
        here = os.stat(folder, follow_symlinks=False)
        same = stat.S_ISDIR(here.st_mode) and (here.st_dev, here.st_ino) == (
            os.fstat(fd).st_dev, os.fstat(fd).st_ino)
    except OSError:
        same = False
    if not same:
        raise UserError(f"{shown(folder)} was moved or replaced while the run was written (by "
                        f"someone who may write the store?): the run went into the folder that "
                        f"was there when it began, and nothing through what is there now")


def write_json_atomic(path: Path, data, replace: bool = True, root=None) -> None:
    """Write ``data`` as JSON at ``path`` atomically (``paprof.outputs.write``): a reader
    sees the old file or the whole new one. With ``replace`` False an existing file is a
    ``UserError``. ``root``: the store ``path`` lies in; the folders between are made,
    and a link among them refused (``store_files.folder``)."""
    path = Path(path)
    if not replace and path.exists():
        raise UserError(f"{path} exists; pass --force to overwrite it")
    text = json.dumps(data, indent=2) + "\n"
    if root is None:
        outputs.write(path, text, parents=True)
        return
    interrupts.check_interrupted()
    where = store_files.open_folder(root, path.parent)  # written and renamed in it, by descriptor
    token = store_files.token()
    try:
        store_files.remove_stale_at(where)  # what a writer killed with SIGKILL left here
        with outputs._interrupt_after():  # a Ctrl-C lets the file be finished first
            fd, tmp = store_files.temp_at(where, path.name, token)
            with os.fdopen(fd, "w") as fh:
                fh.write(text)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path.name, src_dir_fd=where, dst_dir_fd=where)
    except OSError as err:
        raise UserError(f"cannot write {path}: {err.strerror or err}") from None
    finally:
        store_files.remove_temps_at([where], token)
        os.close(where)


LOCK_NAME = ".paprof.lock"
"""The lock file of a store (hidden: the readers pass over it)."""
_HELD: dict[str, list] = {}
"""Locks this process holds: store path -> [file object, depth] (the lock is reentrant)."""


@contextlib.contextmanager
def locked(runs: Path | str) -> Iterator[None]:
    """Hold the store's writer lock (``fcntl.flock`` on ``<runs>/.paprof.lock``): writers
    of one store (two sweep shards, two merges into one --out) take turns at each
    read-modify-write of shared files, so no writer's statuses are lost. Reentrant within
    a process. flock works between processes of one machine and, on Linux NFS clients
    (v4, or v3 with lockd), between machines; on a file system without locks it only
    serialises the writers of one machine. Without ``fcntl`` (Windows): ``msvcrt``'s
    lock on the file's first byte (``_acquire``), the same turns."""
    folder = Path(runs)
    key = str(folder.resolve())
    held = _HELD.get(key)
    if held is not None:
        held[1] += 1
        try:
            yield
        finally:
            held[1] -= 1
        return
    folder.mkdir(parents=True, exist_ok=True)
    handle = _lock_file(folder / LOCK_NAME)
    try:
        _acquire(handle)
        _HELD[key] = [handle, 1]
        try:
            yield
        finally:
            del _HELD[key]
            _release(handle)
    finally:
        handle.close()


def _acquire(handle) -> None:
    """Wait for the exclusive lock of the open lock file ``handle``: ``fcntl.flock``, or
    where there is no ``fcntl`` (Windows) ``msvcrt.locking`` of its first byte, which
    gives up after 10 tries a second apart: tried again while another writer holds it."""
    try:
        import fcntl
    except ImportError:
        import errno
        import msvcrt

        while True:
            handle.seek(0)
            try:
                msvcrt.locking(handle.fileno(), msvcrt.LK_LOCK, 1)
                return
            except OSError as err:
                if err.errno not in (errno.EDEADLK, errno.EACCES):  # held: wait on
                    raise
    fcntl.flock(handle.fileno(), fcntl.LOCK_EX)


def _release(handle) -> None:
    """Give the lock of ``_acquire`` back."""
    try:
        import fcntl
    except ImportError:
        import msvcrt

        handle.seek(0)
        msvcrt.locking(handle.fileno(), msvcrt.LK_UNLCK, 1)
        return
    fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _lock_file(path: Path):
    """The lock file, opened (made if needed) without following a link planted at its
    name, and only if it is a regular file: nothing outside the store is made or opened."""
    flags = os.O_RDWR | os.O_CREAT | store_files.NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags | getattr(os, "O_NONBLOCK", 0), 0o644)
    except OSError as err:
        why = ("it is a symbolic link (remove it)" if os.path.islink(path)
               else err.strerror or str(err))
        raise UserError(f"cannot lock the run store with {path}: {why}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise UserError(f"cannot lock the run store with {path}: it is not a regular file")
    return os.fdopen(fd, "r+b")


@contextlib.contextmanager
def _folder_locked(folder: int) -> Iterator[None]:
    """``flock`` on the folder itself, open as ``folder`` (no file left in it): the writers
    of one record take turns at its renames. Where a folder cannot be locked (no
    ``fcntl``, a file system without locks) the renames' order alone keeps a record whole
    or absent."""
    try:
        import fcntl
    except ImportError:
        yield
        return
    try:
        fcntl.flock(folder, fcntl.LOCK_EX)
    except OSError:
        pass
    try:
        yield
    finally:
        try:
            fcntl.flock(folder, fcntl.LOCK_UN)
        except OSError:
            pass
