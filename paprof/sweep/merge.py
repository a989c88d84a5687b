"""``paprof merge STORE... --out STORE``: join run stores (shards of a sweep, machines).

What is merged: every run (``.ncu-rep`` with its sidecar and ncu log; its parsed summary
made anew for the copy, ``paprof.read.summary``), every bench
record (``.bench.json``) and every sweep manifest (``sweeps/*.json``), at the same
relative paths. A file the target lacks is copied (under a temporary name, then renamed:
a run's sidecar before its report, so a report is never seen without it). The same file
twice (same bytes) is copied once. The same point twice with different contents (two
launches: a re-run, another machine) keeps both: the incoming one under
``<slug>.<digest>`` beside the first, and the readers (compare, check, the sweep report)
take the newest by ``created``. When the two launches' provenance differs (GPU, driver,
ncu version, clocks, preset, paprof commit, launches) that is reported as a conflict.
Manifests of the same sweep are joined point by point (``done`` wins over ``failed``,
``skipped``, ``pending``); two different sweeps of one name are a conflict and the
target's is kept. Nothing in a source is changed.

Nothing is read or written through a link (``paprof.read.store_files``): a link inside a
source (a log linked to ``/proc/self/environ``, a linked report or folder) is skipped
with a warning, a linked folder of ``--out`` is refused, temporary files get random
names made with ``O_EXCL`` (removed whatever moment the merge is stopped at; those of a
merge killed with SIGKILL by the next merge into ``--out``) and a sparse report is copied
with its holes.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path

from paprof import jsonsafe
from paprof.read import store_files
from paprof.errors import UserError
from paprof.read import store, summary
from paprof.progress import tick
from paprof.sweep import manifest as manifests
from paprof.sweep import results

RUN_SUFFIX = ".ncu-rep"


@dataclass
class MergeResult:
    """What ``merge_stores`` did."""

    copied: int = 0
    """Results (runs and bench records) copied into the target."""
    identical: int = 0
    """Results the target already held, byte for byte."""
    kept_both: list[str] = field(default_factory=list)
    """``paged_decode/v5 at b4_...: kept as FILE``: a second launch of a point."""
    conflicts: list[str] = field(default_factory=list)
    """Two launches of one point whose provenance differs (field: a vs b), or two
    different sweeps under one name."""
    manifests: list[str] = field(default_factory=list)
    """Names of the sweeps merged."""


def _digest(path: Path) -> str:
    h = hashlib.sha1()
    with os.fdopen(store_files.open_read(path), "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _copy_atomic(pairs: list[tuple[Path, Path]], out: Path) -> None:
    """Copy each (source, target) under a temporary name, then rename all in order. Each
    target folder is opened once, without following a link on the way
    (``store_files.open_folder``), and the temporary files are made, renamed and removed
    in it by descriptor: a folder swapped for a link after it was checked leads nowhere."""
    temps = []
    folders: dict[Path, int] = {}
    mark = store_files.token()
    dst = None
    try:
        for src, dst in pairs:
            where = folders.get(dst.parent)
            if where is None:  # open before the file is made: whenever a stop comes, it goes
                where = folders[dst.parent] = store_files.open_folder(out, dst.parent)
            fd, tmp = store_files.temp_at(where, dst.name, mark)
            temps.append((where, tmp, dst))
            try:
                store_files.copy(src, fd)
            finally:
                os.close(fd)
        for where, tmp, dst in temps:
            os.replace(tmp, dst.name, src_dir_fd=where, dst_dir_fd=where)
    except OSError as err:  # a full or read-only disk, a name too long: one line
        raise UserError(f"cannot copy into {dst}: {err.strerror or err}") from None
    finally:
        store_files.remove_temps_at(folders.values(), mark)
        for where in folders.values():
            os.close(where)


def _unit(rec: results.Record) -> list[tuple[Path, str]]:
    """The files of one result: (path, suffix), the main file last."""
    if rec.mode == "bench":
        return [(rec.path, results.BENCH_SUFFIX)]
    stem = rec.path.name[: -len(RUN_SUFFIX)]
    extras = [(rec.path.with_name(stem + s), s) for s in (store.LOG_SUFFIX, store.SIDECAR_SUFFIX)]
    return [(p, s) for p, s in extras if store_files.regular(p)] + [(rec.path, RUN_SUFFIX)]


def _stem(path: Path, suffix: str) -> str:
    return path.name[: -len(suffix)]


def _provenance_diff(a: dict, b: dict) -> list[str]:
    out = []
    for key in results.PROVENANCE_KEYS:
        if key in a and key in b and a[key] != b[key]:
            out.append(f"{key} {a[key]} vs {b[key]}")
    return out


def _existing_data(path: Path, mode: str) -> dict:
    if mode == "bench":
        return results.read_bench(path)
    sidecar = path.with_name(_stem(path, RUN_SUFFIX) + store.SIDECAR_SUFFIX)
    try:
        raw = store_files.read(sidecar)
        return jsonsafe.parse(raw) if raw is not None else {}
    except (OSError, ValueError):
        return {}


def _unit_digest(files: list[tuple[Path, str]]) -> str:
    """One digest over a result's report (or record) and sidecar; the ncu log is not
    part of what a launch measured."""
    return hashlib.sha1("".join(_digest(p) for p, s in files if s != store.LOG_SUFFIX).encode()).hexdigest()


def _merge_result(rec: results.Record, source: Path, out: Path, res: MergeResult) -> None:
    files = _unit(rec)
    main, suffix = files[-1]
    target = out / main.relative_to(source)
    name = f"{rec.data.get('family')}/{rec.data.get('variant')} at {rec.data.get('shape_slug')}"
    if store_files.skipped(target):
        return
    if not target.is_file():
        _copy_atomic([(p, out / p.relative_to(source)) for p, _s in files], out)
        _summarise(rec, target, out)
        res.copied += 1
        return
    digest = _unit_digest(files)
    here = [(target.with_name(_stem(target, suffix) + s), s) for _p, s in files]
    stem = f"{_stem(main, suffix)}.{digest[:8]}"
    again = target.with_name(stem + suffix)
    if all(store_files.regular(p) for p, _s in here) and _unit_digest(here) == digest or again.is_file():
        res.identical += 1
        return
    diff = _provenance_diff(_existing_data(target, rec.mode), rec.data)
    if diff:
        res.conflicts.append(f"{name}: {target} and {main} differ in provenance: " + "; ".join(diff))
    res.kept_both.append(f"{name}: kept the launch from {source} as {again.name}")
    _copy_atomic([(p, again.with_name(stem + s)) for p, s in files], out)
    _summarise(rec, again, out)
    res.copied += 1


def _summarise(rec: results.Record, report: Path, out: Path) -> None:
    """The summary of a run copied into ``out`` (``paprof.read.summary``: read from the
    copy, keyed to it), as ``paprof run`` writes one."""
    if rec.mode == "profile":
        summary.write(report, out)


_RANK = {status: i for i, status in enumerate(manifests.STATUSES)}


def join_manifests(into: dict, other: dict) -> None:
    """Add ``other``'s point statuses, shards and GPUs to ``into`` (the same sweep)."""
    points = {p["index"]: p for p in into["points"]}
    for p in other["points"]:
        mine = points.get(p["index"])
        if mine is None:
            continue
        for vid, state in p["variants"].items():
            old = mine["variants"].get(vid)
            if old is None or _RANK.get(state["status"], 99) < _RANK.get(old["status"], 99):
                mine["variants"][vid] = state
    for s in other.get("shards", []):
        if s not in into["shards"]:
            into["shards"].append(s)
    into["gpus"] = sorted(set(into.get("gpus", [])) | set(other.get("gpus", [])))


def _merge_manifest(file: Path, out: Path, res: MergeResult) -> None:
    with store.locked(out):  # another merge into --out, or a sweep's writer, waits
        _merge_manifest_locked(file, out, res)


def _merge_manifest_locked(file: Path, out: Path, res: MergeResult) -> None:
    incoming = manifests.load(file)
    target = manifests.path(out, incoming.get("name"), f"the sweep manifest {file}: its name")
    if target.is_file():
        have = manifests.load(target)
        if not manifests.same_sweep(have, incoming):
            res.conflicts.append(f"sweep {incoming['name']}: {file} and {target} are different "
                                 f"sweeps under one name; kept {target}")
            return
        join_manifests(have, incoming)
        incoming = have
    manifests.save(out, incoming)
    if incoming["name"] not in res.manifests:
        res.manifests.append(incoming["name"])


def merge_stores(sources, out) -> MergeResult:
    """Merge each store of ``sources`` into ``out`` (created if needed)."""
    out = Path(out)
    sources = [Path(s) for s in sources]
    if not sources:
        raise UserError("name at least one store to merge: paprof merge STORE... --out STORE")
    for s in sources:
        if not s.is_dir():
            raise store.missing_store(s)
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out} is a file, not a run store folder")
    for source in sources:  # every source checked before anything is copied
        if source.resolve() == out.resolve():
            continue
        if out.resolve().is_relative_to(source.resolve()):
            raise UserError(f"--out {out} lies inside the store {source}; merge into a folder outside it")
        if source.resolve().is_relative_to(out.resolve()):
            raise UserError(f"the store {source} lies inside --out {out}; its records would be "
                            "merged twice: move it out first")
    out.mkdir(parents=True, exist_ok=True)
    store_files.remove_stale(out)  # what a merge killed with SIGKILL left in --out
    res = MergeResult()
    for source in sources:
        if source.resolve() == out.resolve():
            continue
        records = results.find_records(source)
        for done, rec in enumerate(records, 1):
            _merge_result(rec, source, out, res)
            tick(f"merging {source}", done, len(records))
        for file in manifests.stored(source / manifests.FOLDER):
            _merge_manifest(file, out, res)
    return res
