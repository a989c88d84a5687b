"""A sweep's results in the run store: bench records beside the runs, and finding both.

A bench point of one variant is stored as JSON where its run would be::

    <runs>/<gpu-slug>/<family>/<variant>/<params-slug>.bench.json

(``BENCH_SCHEMA``; the fields of ``paprof bench --json``'s row, its shape, work model and
read ceiling, and the provenance of the machine and the code). A profiled point is an
ordinary run (``.ncu-rep`` + sidecar). ``paprof merge`` may keep a second launch of the
same point under ``<params-slug>.<digest>.bench.json`` / ``.ncu-rep``: readers go by the
record's own ``family``, ``variant`` and ``shape_slug`` and take the newest ``created``.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from pathlib import Path

from paprof import jsonsafe, names
from paprof._version import __version__
from paprof.read import store_files
from paprof.errors import UserError
from paprof.measure import provenance
from paprof.read import store

BENCH_SUFFIX = ".bench.json"
BENCH_KIND = "paprof-bench"
BENCH_SCHEMA = 1

PROVENANCE_KEYS = ("gpu", "driver", "ncu_version", "clock_control", "preset", "git_commit",
                   "paprof_version", "launches", "rounds")
"""Fields that must agree for two launches of one point to be comparable (merge reports
the ones that differ as a conflict of provenance)."""


def bench_path(runs, gpu_slug: str, family: str, variant: str, shape_slug: str) -> Path:
    """Where the bench record of one variant at one point lives."""
    report = store.run_paths(runs, gpu_slug, family, variant, shape_slug).report
    return report.with_name(shape_slug + BENCH_SUFFIX)


def bench_record(bench: dict, row: dict, rounds: int | None = None, seed=None) -> dict:
    """One variant's record from ``BenchResult.to_dict()`` and one of its ``rows``."""
    gpus = provenance.query_gpus()
    driver = next((d for name, d in gpus if name == bench["gpu"]), None)
    commit, dirty = provenance.git_state()
    return {
        "kind": BENCH_KIND, "schema": BENCH_SCHEMA,
        "family": bench["family"], "variant": row["variant"], "variant_kind": row.get("kind"),
        "shape": bench["shape"], "shape_slug": bench["shape_slug"], "params": bench["params"],
        "work": bench["work"], "gpu": bench["gpu"], "gpu_slug": names.slug(bench["gpu"]),
        "driver": driver, "read_ceiling_tbs": bench["read_ceiling_tbs"],
        "gemm_ceiling_tflops": bench.get("gemm_ceiling_tflops"),
        "launches": bench["launches"], "rounds": rounds, "input_sets": bench["input_sets"],
        "seed": seed,
        **{k: row.get(k) for k in ("median_us", "round_medians_us", "round_spread_pct", "tbs",
                                   "tflops", "pct_of_ceiling", "pct_of_gemm_ceiling", "rel_error",
                                   "passed", "kernels", "details", "launch_words")},
        "git_commit": commit, "git_dirty": dirty, "paprof_version": __version__,
        "host": socket.gethostname(), "created": provenance.now(),
    }


@dataclass(frozen=True)
class Record:
    """A stored result of one variant at one point: a bench record or a profiled run."""

    path: Path
    """The ``.bench.json``, or the run's ``.ncu-rep``."""
    data: dict
    """The bench record, or the run's sidecar (``{}`` without one)."""
    mode: str
    """``bench`` or ``profile``."""

    @property
    def key(self) -> tuple:
        d = self.data
        return (d.get("gpu_slug"), d.get("family"), d.get("variant"), d.get("shape_slug"))

    @property
    def created(self) -> str:
        return str(self.data.get("created") or "")


def read_bench(path: Path) -> dict:
    try:
        raw = store_files.read(path)
        data = jsonsafe.parse(raw) if raw is not None else None
    except jsonsafe.Refused as err:
        raise UserError(f"damaged record {path}: {err}") from None
    except (OSError, ValueError) as err:
        raise UserError(f"cannot read the bench record {path}: {err}") from None
    if raw is None:
        raise UserError(f"cannot read the bench record {path}: it is no regular file")
    if not isinstance(data, dict) or data.get("kind") != BENCH_KIND:
        raise UserError(f"{path} is not a paprof bench record")
    return store.check_record(data, path)


def _is_temp(path: Path) -> bool:
    return path.name.startswith(".") or store.TEMP_MARK in path.name


def find_records(root, mode: str | None = None, scan=None) -> list[Record]:
    """Every bench record and run under ``root``, sorted by path (``mode`` narrows;
    ``scan``: the command's ``store.Scan``, which then holds the runs found)."""
    root = Path(root)
    if not root.is_dir():
        raise store.missing_store(root)
    out: list[Record] = []
    if mode in (None, "bench"):
        for path in store_files.files(root, BENCH_SUFFIX):
            if not _is_temp(path):
                out.append(Record(path, read_bench(path), "bench"))
    if mode in (None, "profile"):
        for run in (scan.find_runs if scan is not None else store.find_runs)(root):
            data = dict(run.sidecar.data) if run.sidecar else {}  # its dict, not key by key
            for key in ("gpu_slug", "family", "variant"):
                data.setdefault(key, run.layout.get(key))
            data.setdefault("shape_slug", run.shape_slug)
            out.append(Record(run.report, data, "profile"))
    return out


def latest(records: list[Record]) -> dict[tuple, Record]:
    """The newest record (by ``created``, then path) per (gpu, family, variant, shape)."""
    chosen: dict[tuple, Record] = {}
    for rec in records:
        old = chosen.get(rec.key)
        if old is None or (rec.created, str(rec.path)) > (old.created, str(old.path)):
            chosen[rec.key] = rec
    return chosen


def stored(runs, gpu_slug: str | None, family: str, variant: str, shape_slug: str,
           mode: str) -> Path | None:
    """The stored result of this point, if any. ``gpu_slug`` None: on any GPU of the store."""
    suffix = BENCH_SUFFIX if mode == "bench" else ".ncu-rep"
    gpus = [gpu_slug] if gpu_slug else sorted(
        p.name for p in Path(runs).glob("*") if not store_files.skipped(p) and p.is_dir())
    for gpu in gpus:
        paths = store.run_paths(runs, gpu, family, variant, shape_slug)
        path = paths.report.with_name(shape_slug + suffix)
        if mode == "bench" and store_files.regular(path) or mode != "bench" and store.is_stored(paths):
            return path
    return None
