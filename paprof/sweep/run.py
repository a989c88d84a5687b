"""Running a sweep: every point of a shard, each variant verified, timed and (profile
mode) profiled into the run store; resumable.

For each point in order, each variant is ``skipped`` when it cannot take the point
(``variant.check``, no GPU needed), passed over when its result is already stored
(unless ``force``), and otherwise measured by the point runner, which writes the result
into the store atomically. The manifest is rewritten after every point, so an interrupt
(Ctrl-C, a Slurm time limit) loses only the point in flight; running the same command
again measures only what is missing. Progress and an ETA go to stderr: a live bar on a
terminal, a line per point in logs.

The point runner is a plain function (``PointRunner``): ``bench_point`` (CUDA events, in
this process) and ``profile_point`` (the launcher under ncu) are the real ones; tests
pass fakes.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from rich.console import Console

from paprof.names import slug
from paprof.errors import PaprofError, ShapeError, environment_error
from paprof.measure import provenance
from paprof.read import store
from paprof.sweep import grid as grids
from paprof.sweep import manifest as manifests
from paprof.sweep import results
from paprof.explain import fmt
from paprof.measure.argv import NcuSettings
from paprof.measure import profile  # looked up on use (the tests stand in for it)
from paprof import progress

MODES = ("bench", "profile")


@dataclass(frozen=True)
class SweepSettings:
    """How each point is measured."""

    mode: str = "bench"
    """``bench``: verify and time with CUDA events; ``profile``: also profile under ncu."""
    force: bool = False
    """Measure points whose results are stored already (and replace those results)."""
    launches: int = 100
    """bench: timed launches per round."""
    rounds: int = 2
    """bench: rounds over the variants (their spread shows the noise)."""
    seed: int | None = None
    """Input seed (None: fresh inputs)."""
    preset: str = "default"
    """profile: ncu section preset."""
    clock_control: str = "none"
    """profile: ncu --clock-control."""
    profile_launches: int = 1
    """profile: launches of each variant profiled."""


@dataclass
class VariantOutcome:
    """What a point runner did with one variant at one point."""

    variant: str
    status: str
    """``done``, ``failed`` or ``skipped``."""
    reason: str | None = None
    result: Path | None = None
    """The stored result (bench record or report)."""
    summary: str = ""
    """A few words for the progress line (``12.3 us``)."""


PointRunner = Callable[..., list[VariantOutcome]]
"""``runner(family, variants, params, runs, settings, say) -> [VariantOutcome]``."""


def bench_point(family, variants, params, runs: Path, settings: SweepSettings, say) -> list[VariantOutcome]:
    """Verify and time ``variants`` at ``params`` with CUDA events; store each passing
    variant's bench record. Needs the GPU (imported here)."""
    from paprof.measure.kernels.bench import run_bench

    data = run_bench(family, variants, params, settings.launches, settings.rounds, settings.seed,
                     progress=say).to_dict()
    out = []
    for row in data["rows"]:
        vid = row["variant"]
        if row["skipped"]:
            out.append(VariantOutcome(vid, "skipped", row["skipped"]))
        elif not row["passed"]:
            out.append(VariantOutcome(vid, "failed", f"relative error {row['rel_error']:.2e} "
                                      "is over the tolerance"))
        else:
            record = results.bench_record(data, row, settings.rounds, settings.seed)
            path = results.bench_path(runs, record["gpu_slug"], family.name, vid, data["shape_slug"])
            store.write_json_atomic(path, record, root=runs)
            out.append(VariantOutcome(vid, "done", result=path, summary=fmt.duration_us(row["median_us"])))
    return out


def profile_point(family, variants, params, runs: Path, settings: SweepSettings, say) -> list[VariantOutcome]:
    """Verify, event-time and profile ``variants`` at ``params`` under ncu
    (``profile_variants``); the runs go into the store."""
    ncu = NcuSettings(preset=settings.preset, clock_control=settings.clock_control,
                      launches=settings.profile_launches, seed=settings.seed)
    say("profiling under ncu")
    quiet = Console(stderr=True, force_terminal=False)  # the sweep's own bar is the live one
    out = []
    for o in profile.profile_variants(variants, params, ncu, runs, replace=settings.force,
                                      console=quiet, family=family, replace_option="--force"):
        if o.skipped:
            out.append(VariantOutcome(o.variant.id, "skipped", str(o.skipped)))
        elif o.failed:
            out.append(VariantOutcome(o.variant.id, "failed", str(o.failed)))
        else:
            event = (o.run.sidecar or {}).get("duration_us_event")
            out.append(VariantOutcome(o.variant.id, "done", result=o.run.report,
                                      summary=fmt.duration_us(event)))
    return out


RUNNERS: dict[str, PointRunner] = {"bench": bench_point, "profile": profile_point}


def visible_gpu(environ=None) -> str | None:
    """The model of the GPU(s) this process may use (nvidia-smi, narrowed by integer
    ``CUDA_VISIBLE_DEVICES``); None when unknown or mixed."""
    environ = os.environ if environ is None else environ
    names = [name for name, _driver in provenance.query_gpus()]
    visible = (environ.get("CUDA_VISIBLE_DEVICES") or "").strip()
    if visible:
        ids = [s.strip() for s in visible.split(",")]
        if all(s.isdigit() for s in ids):
            names = [names[int(s)] for s in ids if int(s) < len(names)]
    return names[0] if len(set(names)) == 1 else None


@dataclass
class SweepResult:
    """What ``run_sweep`` did."""

    manifest: dict
    path: Path
    """The manifest file."""
    points: int
    """Points of this shard."""
    measured: int = 0
    """Variant-points measured now."""
    resumed: int = 0
    """Variant-points already stored (passed over)."""
    skipped: list[str] = field(default_factory=list)
    """``v5 at batch 4, context 32768: reason`` for each variant a point could not take."""
    failed: list[str] = field(default_factory=list)
    invalid: list[str] = field(default_factory=list)
    interrupted: bool = False


def _now_eta(started: float, done: int, left: int) -> str:
    if not done:
        return "ETA unknown"
    seconds = (time.monotonic() - started) / done * left
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return "ETA " + (f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s")


def plan(family, variants, points, runs: Path, mode: str, force: bool, gpu_slug: str | None):
    """Per point: (variants to measure, {variant: (status, reason, result)} decided now)."""
    out = []
    for point in points:
        decided: dict[str, tuple] = {}
        todo = []
        for v in variants:
            if point.params is None:
                decided[v.id] = ("invalid", point.error, None)
                continue
            try:
                v.check(point.params)
            except ShapeError as err:
                decided[v.id] = ("skipped", str(err), None)
                continue
            held = None if force else results.stored(runs, gpu_slug, family.name, v.id, point.slug, mode)
            if held is not None:
                decided[v.id] = ("done", None, held)
            else:
                todo.append(v)
        out.append((point, todo, decided))
    return out


def _state(status: str, reason, result, runs: Path, resumed: bool = False) -> dict:
    rel = None
    if result is not None:
        result = Path(result)
        rel = str(result.relative_to(runs)) if result.is_relative_to(runs) else str(result)
    return {"status": status, "reason": reason, "result": rel, "resumed": resumed}


def run_sweep(family, variants, grid: grids.Grid, runs, settings: SweepSettings = SweepSettings(),
              *, shard: tuple[int, int] = (1, 1), name: str | None = None,
              runner: PointRunner | None = None, gpu_name: str | None = None,
              console: Console | None = None) -> SweepResult:
    """Measure shard ``shard`` (K, N; 1-based) of ``grid`` for ``variants`` of ``family``
    into the store ``runs``. ``runner`` defaults to the mode's (``RUNNERS``); ``gpu_name``
    (default: ``visible_gpu()``) says where stored results are looked for.

    A ``KeyboardInterrupt`` or an error leaves the manifest written and the finished
    points stored, and continues; ``SweepResult.interrupted`` is never True on return
    (the exception is).
    """
    if settings.mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}")
    runs = Path(runs)
    console = console or Console(stderr=True)
    runner = runner or RUNNERS[settings.mode]
    ids = [v.id for v in variants]
    defn = manifests.definition(family.name, ids, grid, settings.mode)
    name = name or manifests.default_name(defn)
    data = manifests.open_or_new(runs, name, defn, grid, shard)
    gpu = gpu_name if gpu_name is not None else visible_gpu()
    gpu_slug = slug(gpu) if gpu else None
    points = grids.shard(grid.points, *shard)
    result = SweepResult(data, manifests.path(runs, name), len(points))
    work = plan(family, variants, points, runs, settings.mode, settings.force, gpu_slug)
    entries = {p["index"]: p for p in data["points"]}
    touched: set[tuple[int, str]] = set()  # the statuses this writer decides (see save)

    def record(point, vid, state):
        entries[point.index]["variants"][vid] = state
        touched.add((point.index, vid))
        where = f"{vid} at {point.label}"
        if state["status"] == "skipped":
            result.skipped.append(f"{where}: {state['reason']}")
        elif state["status"] == "failed":
            result.failed.append(f"{where}: {state['reason']}")
        elif state["status"] == "invalid" and vid == ids[0]:
            result.invalid.append(f"{point.label}: {state['reason']}")

    for point, todo, decided in work:
        for vid, (status, reason, held) in decided.items():
            record(point, vid, _state(status, reason, held, runs, resumed=status == "done"))
            result.resumed += status == "done"
        for v in todo:
            entries[point.index]["variants"].setdefault(v.id, _state("pending", None, None, runs))
            touched.add((point.index, v.id))
    manifests.save(runs, data, touched)

    total = sum(1 for _, todo, _ in work if todo)
    live = console.is_terminal
    started, done = time.monotonic(), 0

    with progress.bar("sweep", console, live) as bar:
        task = bar.add_task("", total=total)
        for point, todo, _decided in work:
            if not todo:
                continue
            bar.update(task, description=f"{point.label}")

            def say(text, _label=point.label):
                bar.update(task, description=f"{_label}: {text}")

            try:
                outcomes = runner(family, todo, point.params, runs, settings, say)
            except BaseException as err:
                result.interrupted = True
                manifests.save(runs, data, touched)
                where = (f"stopped at {point.label}; the {done} point(s) finished before it "
                         f"are stored in {runs}; run the same command again to go on")
                if isinstance(err, PaprofError):  # one line: the error and where it stopped
                    raise type(err)(f"{err} ({where})") from None
                said = environment_error(err, where)  # a full or read-only disk
                if said is not None:
                    raise said from None
                if isinstance(err, KeyboardInterrupt) and not err.args:  # the CLI's one line
                    raise type(err)(where) from None  # (SIGTERM's stays one)
                console.print(f"paprof sweep: {where}", soft_wrap=True)  # a bug: traceback next
                raise
            for o in outcomes:
                record(point, o.variant, _state(o.status, o.reason, o.result, runs))
                result.measured += o.status == "done"
            if gpu_slug is None:
                gpu_slug = _learn_gpu(outcomes, runs)
            data["gpus"] = sorted(set(data["gpus"]) | ({gpu_slug} if gpu_slug else set()))
            manifests.save(runs, data, touched)
            done += 1
            bar.advance(task)
            if not live:
                said = ", ".join(f"{o.variant} {o.summary or o.status}" for o in outcomes)
                console.print(f"[{done}/{total}] {point.label}: {said} "
                              f"({_now_eta(started, done, total - done)})", highlight=False, soft_wrap=True)
    return result


def _learn_gpu(outcomes, runs: Path) -> str | None:
    """The GPU folder a result went into (``runs/<gpu>/...``)."""
    for o in outcomes:
        if o.result is not None and Path(o.result).is_relative_to(runs):
            return Path(o.result).relative_to(runs).parts[0]
    return None
