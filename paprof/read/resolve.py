"""Which runs a ``paprof compare`` names: run-store ids and ``.ncu-rep`` paths as runs.

``resolve_variants(["v2", "v3"], runs="examples/h200")`` finds each id's latest run in the
store (at the first one's shape and GPU where the store has that, so one command compares
like with like); a spec ending in ``.ncu-rep`` is that report. Each comes back as a
``paprof.read.store.Run``: the report's path with its run record already read, so that the
stages after this one read each chosen sidecar no more (``paprof.model.load`` takes runs).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from paprof.errors import UserError
from paprof.read import store
from paprof import registry

DEFAULT_RUNS = Path("runs")
REPORT_SUFFIX = ".ncu-rep"


class _Store:
    """The runs of one store, scanned on first use and once per ``resolve_variants`` call
    (a store of 10,000 runs was rescanned once per variant)."""

    def __init__(self, root):
        self.root, self._runs = root, None

    def runs(self):
        if self._runs is None:
            self._runs = store.find_runs(self.root)
        return self._runs


def _shape_slug(shape: str | None, runs: _Store, specs) -> str | None:
    """A ``--shape`` value as the store's slug: a slug as it is; ``KEY=VALUE,...`` parsed
    by the family of the first run-store id (found in the store, so only its parameters
    class is imported, never kernel code)."""
    if not shape:
        return None
    if "=" not in shape:
        return shape

    family = None
    for spec in specs:
        if spec.endswith(REPORT_SUFFIX) or Path(spec).is_file():
            continue
        fam, _, vid = spec.rpartition("/")
        held = [r for r in runs.runs() if r.variant == vid and (not fam or r.family == fam)]
        family = fam or next((r.family for r in held if r.family), None)
        break
    if family is None:
        raise UserError(f"--shape {shape}: give the shape as its slug (the file name in the "
                        "run store), or name a run-store variant whose family can parse it")
    try:
        return registry.family(family).parse(shape).slug()
    except UserError:
        if family in registry.families():
            raise
    # The family is not installed here (a colleague's runs): the stored runs' own
    # parameters say which slug the spec names.
    given = spec_items(shape)
    slugs = {r.sidecar.get("shape_slug") for r in runs.runs()
             if r.family == family and isinstance(r.sidecar, Mapping)
             and given.items() <= spec_items(str(r.sidecar.get("shape") or "")).items()}
    slugs.discard(None)
    if len(slugs) == 1:
        return slugs.pop()
    raise UserError(f"--shape {shape}: family {family} is not installed here and "
                    + (f"{len(slugs)} stored shapes match it ({', '.join(sorted(slugs)[:4])}): "
                       "give more parameters or the slug" if slugs else
                       "no stored run of it has those parameters"))


def spec_items(spec: str | None) -> dict[str, str]:
    """``KEY=VALUE,...`` (a ``--shape``, a run's shape) as a dict of strings, compared as
    text (the family's own spec); parts without ``=`` left out."""
    out = {}
    for part in (spec or "").split(","):
        key, eq, value = part.partition("=")
        if eq:
            out[key.strip()] = value.strip()
    return out


def resolve_variants(specs: list[str], runs: Path | str = DEFAULT_RUNS,
                     shape: str | None = None) -> list[store.Run]:
    """Each spec as a run (``store.Run``: the report and its record, read once), in order.

    A spec ending in ``.ncu-rep`` (or naming an existing file) is that report, its sidecar
    read here. Anything else is
    a run-store id (``v3`` or ``paged_decode/v3``): the latest run of it in ``runs``, at
    ``shape`` (a slug or a ``--shape`` spec) when given; otherwise at the first variant's
    shape and GPU where the store has that, so that one command compares like with like.
    """
    specs = list(specs)
    one_report = len(specs) == 1 and (specs[0].endswith(REPORT_SUFFIX) or Path(specs[0]).is_file())
    if len(specs) < 2 and not one_report:  # one report paprof did not write: its kernels
        raise UserError(f"compare needs at least 2 variants, got {len(specs)}: "
                        "e.g. paprof compare v2 v3 --runs examples/h200")

    scanned = _Store(runs)
    wanted_shape = _shape_slug(shape, scanned, specs)
    first_run = None
    found: list[store.Run] = []
    chosen: set = set()  # the shapes of the runs the ids resolved to
    for spec in specs:
        path = Path(spec)
        if spec.endswith(REPORT_SUFFIX) or path.is_file():
            if not path.is_file():
                raise UserError(f"no such report: {spec}")
            found.append(_report_run(path))
            continue
        if first_run is None:
            run = store.latest(runs, spec, shape_slug=wanted_shape, runs=scanned.runs())
            first_run = run
        else:
            run = None
            tries = [(wanted_shape or first_run.shape_slug, first_run.gpu_slug),
                     (wanted_shape or first_run.shape_slug, None)]
            for shape_slug, gpu in tries:
                try:
                    run = store.latest(runs, spec, shape_slug=shape_slug, gpu=gpu, runs=scanned.runs())
                    break
                except UserError:
                    continue
            if run is None:
                # Not at the first variant's shape: the latest of any shape (the report
                # then warns that the shapes differ), or the store's own error message.
                run = store.latest(runs, spec, shape_slug=wanted_shape, runs=scanned.runs())
        found.append(run)
        chosen.add(run.shape_slug)
    held = {}
    for spec in specs:
        if not (spec.endswith(REPORT_SUFFIX) or Path(spec).is_file()):
            fam, _, vid = spec.rpartition("/")
            held[spec] = {r.sidecar.get("shape_slug") for r in scanned.runs()
                          if r.variant == vid and (not fam or r.family == fam)
                          and isinstance(r.sidecar, Mapping)}
    if not wanted_shape and len(held) > 1:
        common = set.intersection(*held.values()) - {None}
        if len(chosen) > 1 and common:
            raise UserError("these variants' latest runs are at different shapes; shapes they "
                            "all have: " + ", ".join(sorted(common)[:6])
                            + " (choose one with --shape, or pass --cross)")
    seen: dict[str, str] = {}
    for spec, run in zip(specs, found):
        key = os.path.realpath(run.report)
        if key in seen:
            raise UserError(f"{seen[key]} and {spec} name the same report ({run.report}); "
                            "compare different runs")
        seen[key] = spec
    return found


def _report_run(path: Path) -> store.Run:
    """The run of a report named by its path, as the loader makes it: an ``.ncu-rep`` with
    its sidecar (``store.find_runs`` of the file), any other file without one."""
    if path.name.endswith(REPORT_SUFFIX):
        return store.find_runs(path)[0]
    return store.Run(path, None, {})
