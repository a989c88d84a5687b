"""The sweep manifest: ``<runs>/sweeps/<name>.json``, what a sweep is and how far it got.

It records the definition (family, variants, mode, axes, fixed parameters), every point
of the grid (coordinates, spec, slug, the shard that owns it, why the family refuses it
if it does) and, for the points this store ran, each variant's status: ``done`` (its
result is stored), ``failed`` (verification), ``skipped`` (the variant cannot take the
point: the reason), ``invalid`` (the family refuses the point), ``pending``. It is
rewritten atomically after every point, so an interrupted sweep's manifest is whole.
The default name is ``<family>-<mode>-<digest of the definition>``: the same command
on every shard gives the same name, which is how ``paprof merge`` joins their manifests.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from paprof import jsonsafe, names
from paprof.read import store_files
from paprof.errors import UserError
from paprof.measure import provenance
from paprof.read import store

FOLDER = "sweeps"
KIND = "paprof-sweep"
SCHEMA = 1
STATUSES = ("done", "failed", "skipped", "invalid", "pending")
"""In the order a merge prefers them (a point done in one store is done)."""


def _jsonable(value):
    return list(value) if isinstance(value, tuple) else value


def definition(family: str, variants, grid, mode: str) -> dict:
    """What makes two sweeps the same sweep."""
    return {"family": family, "variants": list(variants), "mode": mode,
            "axes": [{"key": a.key, "values": [_jsonable(v) for v in a.values]} for a in grid.axes],
            "fixed": grid.fixed.to_dict()}


def default_name(defn: dict) -> str:
    digest = hashlib.sha1(json.dumps(defn, sort_keys=True).encode()).hexdigest()[:8]
    return f"{defn['family']}-{defn['mode']}-{digest}"


def path(runs, name: str, what: str = "--name") -> Path:
    """``<runs>/sweeps/<name>.json``; ``name`` must be one safe file name (``UserError``
    otherwise: nothing is written outside the store or hidden inside it)."""
    names.check(name, what)
    return Path(runs) / FOLDER / f"{name}.json"


def new(name: str, defn: dict, grid, shard: tuple[int, int]) -> dict:
    k, n = shard
    points = []
    for p in grid.points:
        points.append({
            "index": p.index, "coords": {key: _jsonable(v) for key, v in p.coords.items()},
            "label": p.label, "shape": p.spec, "shape_slug": p.slug, "error": p.error,
            "shard": p.index % n + 1, "variants": {},
        })
    now = provenance.now()
    return {"kind": KIND, "schema": SCHEMA, "name": name, **defn,
            "grid": [a.given for a in grid.axes], "fixed_spec": grid.fixed_text,
            "shards": [{"shard": k, "of": n}], "gpus": [], "created": now, "updated": now,
            "points": points}


def load(file: Path) -> dict:
    try:
        raw = store_files.read(file)
        data = jsonsafe.parse(raw) if raw is not None else None
    except (OSError, ValueError) as err:
        raise UserError(f"cannot read the sweep manifest {file}: {err}") from None
    if raw is None:
        raise UserError(f"cannot read the sweep manifest {file}: it is no regular file")
    if not isinstance(data, dict) or data.get("kind") != KIND:
        raise UserError(f"{file} is not a paprof sweep manifest")
    check_structure(data, file)
    return data


def check_structure(data: dict, file) -> None:
    """``UserError`` (one line naming ``file``) unless ``data`` has a manifest's shape:
    a safe name, lists where lists are, each point's index, shard and variant statuses,
    and as many points as its axes make (a list cut short is refused)."""
    names.check(data.get("name"), f"the sweep manifest {file}: its name")

    def bad(what: str):
        return UserError(f"{file} is a damaged sweep manifest: {what}")

    for key, kind in (("points", list), ("shards", list), ("variants", list), ("axes", list)):
        if not isinstance(data.get(key), kind):
            raise bad(f"'{key}' must be a list, got {type(data.get(key)).__name__}")
    if not isinstance(data.get("gpus", []), list) or not all(isinstance(g, str) for g in data.get("gpus", [])):
        raise bad("'gpus' must be a list of names")
    if not all(isinstance(v, str) for v in data["variants"]) or not isinstance(data.get("family"), str):
        raise bad("'family' and each of 'variants' must be text")
    if not all(isinstance(s, dict) and isinstance(s.get("shard"), int) and isinstance(s.get("of"), int)
               for s in data["shards"]):
        raise bad("'shards' must hold {shard, of} pairs")
    size = 1
    for axis in data["axes"]:
        if not isinstance(axis, dict) or not isinstance(axis.get("values"), list) \
                or not isinstance(axis.get("key"), str):
            raise bad("each axis needs a key and a list of values")
        size *= len(axis["values"])
    keys = [axis["key"] for axis in data["axes"]]
    seen = set()
    for point in data["points"]:
        if (not isinstance(point, dict) or not isinstance(point.get("index"), int)
                or isinstance(point.get("index"), bool) or not isinstance(point.get("variants"), dict)):
            raise bad("each point needs an integer index and a variants table")
        if point["index"] in seen or not 0 <= point["index"] < max(size, 1):
            raise bad(f"point index {point['index']} is repeated or outside the grid")
        seen.add(point["index"])
        _check_point(point, keys, bad)
        for vid, state in point["variants"].items():
            if not isinstance(state, dict) or state.get("status") not in STATUSES:
                raise bad(f"point {point['index']}: variant {names.safe(vid)} has no valid status")
    if data["axes"] and len(data["points"]) != size:
        raise bad(f"{len(data['points'])} points where its axes make {size} (cut short?)")


def _check_point(point: dict, keys: list, bad) -> None:
    """A point's coordinates (a value for each axis) and its texts (label, shape, slug,
    error: text or null) as the report reads them."""
    at = f"point {point['index']}"
    coords = point.get("coords")
    if not isinstance(coords, dict):
        raise bad(f"{at}: 'coords' must be a table, got {type(coords).__name__}")
    missing = [k for k in keys if k not in coords]
    if missing:
        raise bad(f"{at}: 'coords' lacks the axis {names.safe(missing[0])}")
    for key in ("label", "shape", "shape_slug", "error"):
        if point.get(key) is not None and not isinstance(point[key], str):
            raise bad(f"{at}: '{key}' must be text, got {type(point[key]).__name__}")
    if point.get("error") is None and not point.get("shape_slug"):
        raise bad(f"{at}: a valid point needs its 'shape_slug'")


def save(runs, data: dict, touched=None) -> Path:
    """Write ``data`` as the store's manifest of its sweep, under the store's lock.

    ``touched``: the (point index, variant) statuses this writer decided; when given,
    the manifest on disk (another shard's writer may have saved since) is read again and
    only those statuses, the shards and the GPUs are laid over it, so concurrent writers
    of one sweep lose nothing. A ``pending`` of ours never hides a status on disk."""
    target = path(runs, data["name"])
    with store.locked(runs):
        out = data
        if touched is not None and target.is_file():
            try:
                disk = load(target)
            except UserError:
                disk = None
            if disk is not None and same_sweep(disk, data):
                out = _overlay(disk, data, touched)
        out["updated"] = provenance.now()
        store.write_json_atomic(target, out, root=runs)
    return target


def _overlay(disk: dict, mine: dict, touched) -> dict:
    """``disk`` with ``mine``'s ``touched`` statuses, shards and GPUs on top."""
    theirs = {p["index"]: p for p in disk["points"]}
    ours = {p["index"]: p for p in mine["points"]}
    for index, vid in touched:
        state = ours.get(index, {}).get("variants", {}).get(vid)
        point = theirs.get(index)
        if state is None or point is None:
            continue
        if state.get("status") == "pending" and vid in point["variants"]:
            continue
        point["variants"][vid] = state
    for s in mine.get("shards", []):
        if s not in disk["shards"]:
            disk["shards"].append(s)
    disk["gpus"] = sorted(set(disk.get("gpus") or []) | set(mine.get("gpus") or []))
    return disk


def same_sweep(a: dict, b: dict) -> bool:
    keys = ("family", "variants", "mode", "axes", "fixed")
    return all(a.get(k) == b.get(k) for k in keys)


def open_or_new(runs, name: str, defn: dict, grid, shard: tuple[int, int]) -> dict:
    """The store's manifest of this sweep (a different sweep of that name is an error)."""
    file = path(runs, name)
    fresh = new(name, defn, grid, shard)
    if not file.is_file():
        return fresh
    data = load(file)
    if not same_sweep(data, fresh):
        raise UserError(f"{file} holds another sweep named {name!r} (other variants, grid or "
                        "fixed parameters); choose another --name or another --runs")
    if {"shard": shard[0], "of": shard[1]} not in data["shards"]:
        data["shards"].append({"shard": shard[0], "of": shard[1]})
    return data


def stored(folder: Path) -> list[Path]:
    """The manifests in a store's ``sweeps`` folder (links, there or as the folder, are
    skipped with a warning; hidden files are temporary)."""
    if store_files.skipped(folder) or not folder.is_dir():
        return []
    return [f for f in sorted(folder.glob("*.json"))
            if not f.name.startswith(".") and store_files.regular(f)]


def find(runs, name: str | None = None) -> dict:
    """The manifest named ``name``, or the store's only one."""
    if not Path(runs).is_dir():
        raise store.missing_store(runs)
    folder = Path(runs) / FOLDER
    files = stored(folder)
    if name:
        file = path(runs, name)
        if not file.is_file():
            have = ", ".join(f.stem for f in files) or "none"
            raise UserError(f"{runs} holds no sweep named {name!r} (it holds: {have})")
        return load(file)
    if not files:
        raise UserError(f"{runs} holds no sweep (no {FOLDER}/*.json); run paprof sweep --runs {runs}")
    if len(files) > 1:
        raise UserError(f"{runs} holds {len(files)} sweeps; say which with --name: "
                        + ", ".join(f.stem for f in files))
    return load(files[0])


def status_counts(data: dict) -> dict[str, int]:
    counts = dict.fromkeys(STATUSES, 0)
    for point in data["points"]:
        for state in point["variants"].values():
            counts[state["status"]] = counts.get(state["status"], 0) + 1
    return counts
