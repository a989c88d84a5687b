"""A program by its top kernels: time every launch cheaply, then profile the few that matter.

A ``paprof run --cmd`` step may hold hundreds of launches, most of them small
element-wise kernels that add up to a few per cent of the step, and the full preset
replays each launch ~35 times. So a command is run twice under ncu:

1. **The timing pass**: ``--metrics gpu__time_duration.sum`` and no section (ncu then
   collects that one metric: one pass a launch, nothing replayed), inside the same NVTX
   range and ``--kernel-regex`` as the full pass. Each launch's duration is ncu's own,
   measured the way the full pass measures it (launches serialised, caches flushed), so
   the shares agree with the full reports. The program's CUDA events time a whole step,
   not each kernel; nsys and CUPTI are not paprof's dependencies.
2. **The full pass** on the kernels that make up ``cover`` of the range's time (at most
   ``top`` of them), chosen by name: ncu's ``-k regex:^(name|...)$`` on the function names
   the timing pass read (ncu's default ``--kernel-name-base function``), inside the same
   range. That picks every launch of the chosen kernels in every step and nothing else.
   ``--kernel-id`` (one ``context:stream:name:invocation``) and ``--launch-skip`` /
   ``--launch-count`` (one window of launches) cannot pick a scattered set.

3. **A few launches standing for the others.** A step repeats its kernels (a layer's
   GEMM once per layer, forward and backward): the full pass replays each launch ~35
   times, and the big kernels' replays are most of a program's profiling time. The
   timing pass also reads each launch's grid and block size (launch attributes: no pass
   of their own), and the full pass profiles the first K launches of each launch
   configuration (ncu's ``--filter-mode per-launch-config --launch-count K``). One
   configuration can hold different work (PyTorch's ``vectorized_elementwise_kernel``
   runs several operations on one grid), so K is the number of launches the first step
   needs before each of its configurations has shown every duration it takes (within
   ``SAME_WORK``); each launch of the first step is then counted for the profiled launch
   of its configuration nearest to it in duration (``represent``), and the loader counts
   each profiled launch that many times (``paprof.model.represented``). Where K would
   profile every launch anyway, or a launch's configuration is unknown, every launch is
   profiled; ``--profile-every-launch`` asks for that.

What was skipped (each kernel's name, launches, time and share) goes into the run's
record under ``selection`` (``choose``), and ``paprof compare`` shows it in its program
view (``paprof.model.program``).
"""

from __future__ import annotations

import dataclasses
import math
import time
from pathlib import Path
from typing import Callable

from paprof.read.metrics import BY_COLUMN
from paprof.errors import UserError
from paprof.read import ncu_reader
from paprof.model import steps  # the reader of the reports paprof writes
from paprof.measure.argv import ncu_argv
from paprof.measure.runner import run_ncu

#: The one metric the timing pass collects (the catalogue's ``duration_us``: ncu's
#: ``gpu__time_duration.sum``, in ns).
TIME_METRIC = BY_COLUMN["duration_us"].ncu_name

#: The launch attributes the timing pass reads beside the duration: a launch's
#: configuration as the full pass's ``--filter-mode per-launch-config`` tells them apart.
CONFIG_METRICS = (BY_COLUMN["grid_size"].ncu_name, BY_COLUMN["block_size"].ncu_name)
TIMING_METRICS = (TIME_METRIC, *CONFIG_METRICS)

#: How the record says the launches were timed.
TIMED_BY = f"ncu --metrics {','.join(TIMING_METRICS)} (no sections: one pass a launch)"

#: The fraction of the step ``paprof run --cmd`` profiles by default.
DEFAULT_COVER = 0.9


def _config(action) -> tuple[int, int] | None:
    """A launch's (grid size, block size); None where the report lacks either."""
    got = []
    for name in CONFIG_METRICS:
        x = ncu_reader.read_metric(action, name)
        if not (x == x and 0 < x < 2 ** 63):
            return None
        got.append(int(x))
    return got[0], got[1]


def read_launches(report: Path, range_name: str) -> tuple[list[tuple], int]:
    """``([(kernel, duration_us, (grid, block) or None, step), ...], steps)`` of a
    timing report, in launch order; ``steps``: the pushes of ``range_name`` the launches
    sat in (1 where not told)."""

    context, actions = ncu_reader.open_report(Path(report), numeric=list(TIMING_METRICS), text=[])
    names, nvtx, launches = [], [], []
    for action in actions:
        name = str(action.name())
        names.append(name)
        nvtx.append(ncu_reader.read_nvtx(action))
        ns = ncu_reader.read_metric(action, TIME_METRIC)
        launches.append((name, ns / 1e3 if ns == ns else 0.0, _config(action)))
    plan = steps.plan(names, nvtx, {"kind": "command", "nvtx_range": range_name})
    return [(*launch, step) for launch, step in zip(launches, plan.steps)], max(1, plan.count)


def choose(launches, steps: int = 1, cover: float = DEFAULT_COVER,
           top: int | None = None) -> dict:
    """Which kernels to profile: the fewest names, longest first, whose launches make up
    ``cover`` of the total time (at most ``top`` names), as the run record keeps it
    (``selection``): every kernel's launches, time and share, and the totals of the
    profiled and the skipped ones. Times and launches are over all ``steps``."""
    if not 0 < cover <= 1:
        raise ValueError(f"cover must be in (0, 1], got {cover}")
    by_name: dict[str, list] = {}
    for launch in launches:
        entry = by_name.setdefault(launch[0], [0, 0.0])
        entry[0] += 1
        entry[1] += max(0.0, float(launch[1]))
    total = sum(t for _, t in by_name.values())
    if not by_name:
        raise UserError("the timing pass saw no kernel inside the range")
    order = sorted(by_name.items(), key=lambda item: (-item[1][1], item[0]))
    chosen, covered = [], 0.0
    for name, (_, us) in order:
        if top is not None and len(chosen) >= top:
            break
        if chosen and total > 0 and covered / total >= cover - 1e-12:
            break
        chosen.append(name)
        covered += us
    picked = set(chosen)

    def share(us: float) -> float:
        return us / total if total > 0 else 0.0

    def part(names) -> dict:
        n = [by_name[k] for k in names]
        us = sum(t for _, t in n)
        return {"kernels": len(n), "launches": sum(c for c, _ in n), "time_us": us,
                "share": share(us)}

    return {
        "cover": cover,
        "top": top,
        "timed_by": TIMED_BY,
        "steps": steps,
        "launches": sum(c for c, _ in by_name.values()),
        "time_us": total,
        "kernels": [{"kernel": name, "launches": n, "time_us": us, "share": share(us),
                     "profiled": name in picked} for name, (n, us) in order],
        "profiled": part(chosen),
        "skipped": part([name for name, _ in order if name not in picked]),
    }


#: Two launches of one configuration whose durations differ by more than this are taken
#: to do different work (a launch shows its own duration in the timing pass; the same
#: work on the same grid repeats within a few per cent).
SAME_WORK = 0.15


def _apart(a: float, b: float) -> bool:
    lo, hi = sorted((max(a, 1e-6), max(b, 1e-6)))
    return hi / lo > 1.0 + SAME_WORK


def represent(launches, names) -> tuple[int, dict] | None:
    """How the first step's launches of the kernels ``names`` (None: all) are profiled
    by a few: ``(K, {name: [config, ...]})``, each config ``{"grid", "block", "launches"
    (in the first step), "weights", "profiled"}``, ``weights[i]`` the launches of the
    first step the configuration's i-th profiled launch stands for (0 where an earlier one
    of the same duration stands for it), ``profiled`` how many of its launches ncu
    profiles. None where every launch would be profiled anyway (K reaches
    every configuration's count) or a launch's configuration is unknown."""
    mine = [l for l in launches if names is None or l[0] in names]
    if not mine or any(len(l) < 3 or l[2] is None for l in mine):
        return None
    by_key: dict[tuple, list[float]] = {}
    total: dict[tuple, int] = {}  # over every step: ncu's first K may reach past the first
    for name, us, (grid, block), *step in mine:
        key = (name, grid, block)
        total[key] = total.get(key, 0) + 1
        if (step[0] if step else 0) == 0:
            by_key.setdefault(key, []).append(max(0.0, float(us)))
    if not by_key or set(by_key) != set(total):
        return None  # a configuration the first step lacks: nothing stands for it
    k = 1
    for times in by_key.values():  # launches needed before every duration has been seen
        seen: list[float] = []
        for i, us in enumerate(times):
            if all(_apart(us, t) for t in seen):
                seen.append(us)
                k = max(k, i + 1)
    if all(len(times) <= k for times in by_key.values()):
        return None  # nothing would be saved
    out: dict[str, list] = {}
    for (name, grid, block), times in sorted(by_key.items(), key=lambda kv: kv[0]):
        reps = times[:k]
        weights = [0] * len(reps)
        for us in times:  # each launch to the nearest profiled one (the earliest on a tie)
            j = min(range(len(reps)), key=lambda i: (abs(math.log(max(us, 1e-6) / max(reps[i], 1e-6))), i))
            weights[j] += 1
        out.setdefault(name, []).append({
            "grid": grid, "block": block, "launches": len(times), "weights": weights,
            # what ncu profiles of it: its first K launches in the range (past the first
            # step where it has fewer there: those count for nothing)
            "profiled": min(k, total[(name, grid, block)])})
    return k, out


def chosen_names(selection: dict) -> tuple[str, ...] | None:
    """The names the full pass profiles; None where that is every kernel (no filter)."""
    if not selection["skipped"]["kernels"]:
        return None
    return tuple(k["kernel"] for k in selection["kernels"] if k["profiled"])


def time_and_choose(settings, variant, report: Path, log: Path, env: dict,
                    say: Callable[[str], None], shown_log: Path | None = None):
    """Run the timing pass of a command into ``report`` (a scratch path), choose its top
    kernels; ``(settings for the full pass, the selection record)``. ``log``: where ncu's
    output goes, ``shown_log``: where errors say it is (``run_ncu``)."""

    timing = dataclasses.replace(settings, metrics=TIMING_METRICS, kernel_names=None,
                                 per_config=None)
    argv = ncu_argv(timing, variant, None, report, None)
    seen: set = set()

    def tick(kernel) -> None:
        key = kernel.launch if kernel.launch is not None else len(seen) * (kernel.percent == 0)
        if key not in seen:
            seen.add(key)
            say(f"timing every launch in the range (ncu, duration only): {len(seen)} so far")

    say("timing every launch in the range (ncu, duration only)")
    started = time.monotonic()
    run_ncu(argv, log, report, on_kernel=tick, env=env, shown_log=shown_log)
    launches, steps = read_launches(report, variant.nvtx_range)
    selection = choose(launches, steps, settings.cover, settings.top)
    selection["seconds"] = round(time.monotonic() - started, 3)
    names = chosen_names(selection)
    plan = None if settings.every_launch else represent(launches, None if names is None else set(names))
    selection["represented"] = plan is not None
    each = ""
    if plan is not None:
        k, configs = plan
        selection["per_config"] = k
        for entry in selection["kernels"]:
            if entry["profiled"]:
                entry["configs"] = configs.get(entry["kernel"], [])
        n = sum(c["profiled"] for cs in configs.values() for c in cs)
        each = f", {n} launches of the first step standing for the others"
    profiled = selection["profiled"]
    say(f"profiling {profiled['kernels']} of {len(selection['kernels'])} kernels "
        f"({100 * profiled['share']:.1f} % of the range's time{each})")
    return dataclasses.replace(settings, kernel_names=names,
                               per_config=plan[0] if plan else None), selection
