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

from paprof import names
from paprof.errors import UserError
from paprof.profiler import provenance, store

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
        data = json.loads(Path(file).read_text())
    except (OSError, ValueError) as err:
        raise UserError(f"cannot read the sweep manifest {file}: {err}") from None
    if not isinstance(data, dict) or data.get("kind") != KIND:
        raise UserError(f"{file} is not a paprof sweep manifest")
    return data


def save(runs, data: dict) -> Path:
    data["updated"] = provenance.now()
    target = path(runs, data["name"])
    store.write_json_atomic(target, data)
    return target


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


def find(runs, name: str | None = None) -> dict:
    """The manifest named ``name``, or the store's only one."""
    folder = Path(runs) / FOLDER
    files = sorted(folder.glob("*.json")) if folder.is_dir() else []
    files = [f for f in files if not f.name.startswith(".")]
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
