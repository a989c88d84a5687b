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

from paprof import phases as ph
from paprof.read.metrics import BY_COLUMN
from paprof.errors import UserError
from paprof.read import ncu_reader
from paprof.model import steps  # the reader of the reports paprof writes
from paprof.measure.ahead import NcuClock
from paprof.measure.argv import ncu_argv, target_processes
from paprof.measure.ncu_log import NothingProfiled
from paprof.measure.runner import run_ncu

#: The one metric the timing pass collects (the catalogue's ``duration_us``: ncu's
#: ``gpu__time_duration.sum``, in ns).
TIME_METRIC = BY_COLUMN["duration_us"].ncu_name

#: The launch attributes the timing pass reads beside the duration: a launch's
#: configuration as the full pass's ``--filter-mode per-launch-config`` tells them apart.
CONFIG_METRICS = (BY_COLUMN["grid_size"].ncu_name, BY_COLUMN["block_size"].ncu_name)

#: The grid's and the block's three dimensions: ncu's per-launch-config tells launches
#: apart by them, not by their products (PyTorch's reductions run 32 x 66 and 24 x 88
#: blocks, both 2,112, in one step of a GPT block: two configurations to ncu).
DIM_METRICS = tuple(f"launch__{what}_dim_{axis}" for what in ("grid", "block") for axis in "xyz")
TIMING_METRICS = (TIME_METRIC, *CONFIG_METRICS, *DIM_METRICS)

#: How the record says the launches were timed.
TIMED_BY = f"ncu --metrics {','.join(TIMING_METRICS)} (no sections: one pass a launch)"

#: The fraction of the step ``paprof run --cmd`` profiles by default.
DEFAULT_COVER = 0.9


def _counts(action, names, most: int) -> tuple[int, ...] | None:
    """The launch attributes ``names`` of one launch as integers in (0, ``most``); None
    where the report lacks any (a timing pass of a paprof before it read them)."""
    got = []
    for name in names:
        try:
            x = ncu_reader.read_metric(action, name)
        except KeyError:
            return None
        if not (x == x and 0 < x < most):
            return None
        got.append(int(x))
    return tuple(got)


def _config(action) -> tuple[int, int] | None:
    """A launch's (grid size, block size); None where the report lacks either."""
    return _counts(action, CONFIG_METRICS, 2 ** 63)


def _dims(action) -> tuple[int, ...] | None:
    """A launch's grid and block dimensions (x, y, z, x, y, z); None where lacking."""
    return _counts(action, DIM_METRICS, 2 ** 31)


def read_launches(report: Path, range_name: str) -> tuple[list[tuple], int]:
    """``([(kernel, duration_us, (grid, block) or None, step, mangled name or None,
    dimensions or None), ...], steps)`` of a timing report, in launch order; ``steps``:
    the pushes of ``range_name`` the launches sat in (1 where not told)."""

    context, actions = ncu_reader.open_report(Path(report), numeric=list(TIMING_METRICS), text=[])
    names, nvtx, launches, mangled, dims = [], [], [], [], []
    for action in actions:
        name = str(action.name())
        names.append(name)
        nvtx.append(ncu_reader.read_nvtx(action))
        ns = ncu_reader.read_metric(action, TIME_METRIC)
        launches.append((name, ns / 1e3 if ns == ns else 0.0, _config(action)))
        mangled.append(ncu_reader.mangled_name(action))
        dims.append(_dims(action))
    plan = steps.plan(names, nvtx, {"kind": "command", "nvtx_range": range_name})
    return ([(*launch, step, m, d) for launch, step, m, d in zip(launches, plan.steps, mangled, dims)],
            max(1, plan.count))


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


#: The most the first step's time may move when each launch is counted as the profiled
#: launch of its configuration nearest to it in duration: K stops growing once the
#: launches not yet profiled, each counted at its stand-in's duration, add up to within
#: this fraction of the first step's time (of the kernels profiled). Without it one
#: configuration whose small launches jitter past ``SAME_WORK`` (PyTorch's elementwise
#: kernels of a few microseconds) makes K reach every launch of every configuration.
STAND_IN_ERROR = 0.02


def _nearest(us: float, reps: list[float]) -> int:
    """The profiled launch (index into ``reps``) that a launch of ``us`` counts as: the
    nearest in duration (log ratio), the earliest on a tie."""
    return min(range(len(reps)), key=lambda i: (abs(math.log(max(us, 1e-6) / max(reps[i], 1e-6))), i))


def _stand_in_error(by_key: dict, k: int) -> float:
    """How far the first step's time moves (microseconds, summed over launches) when each
    launch counts at the duration of its nearest of its configuration's first ``k``."""
    moved = 0.0
    for times in by_key.values():
        reps = times[:k]
        moved += sum(abs(us - reps[_nearest(us, reps)]) for us in times)
    return moved


def _mangled(launch) -> str | None:
    """A launch's mangled name (``read_launches``' fifth field), None where not read."""
    return launch[4] if len(launch) > 4 else None


def _key(launch) -> tuple:
    """A launch's configuration as ncu's ``--filter-mode per-launch-config`` counts it under
    ``--kernel-name-base mangled``: (its function, by mangled name where the timing pass
    read one, grid, block, their dimensions where read: ``DIM_METRICS``)."""
    name, _us, (grid, block), *_rest = launch
    return (_mangled(launch) or name, grid, block, launch[5] if len(launch) > 5 else None)


def represent(launches, names) -> tuple[int, dict, float, list] | None:
    """How the launches of the kernels ``names`` (None: all) are profiled by a few:
    ``(K, {name: [config, ...]}, error, sequence)``.

    A configuration is a function (its mangled name: PyTorch's template instances share
    a function name, ``vectorized_elementwise_kernel``, and differ in their work), grid
    and block. K is the fewest launches of each configuration after which either every
    duration it takes in the first step has been seen (within ``SAME_WORK``), or the
    launches not seen move the first step's time by at most ``STAND_IN_ERROR``; each
    launch of the first step then counts as its configuration's profiled launch nearest
    to it in duration. ``sequence``: the launches ncu profiles (the first K of each
    configuration in the whole range), in launch order, each ``[kernel, grid, block,
    launches of the first step it stands for]`` (0 past the first step: those count
    there); the configs say the same by configuration (``{"grid", "block", "function",
    "launches", "weights", "profiled"}``); ``error``: the fraction of the first step's
    time (of these kernels) that moves. None where every launch would be profiled anyway
    or a launch's configuration is unknown."""
    mine = [l for l in launches if names is None or l[0] in names]
    if not mine or any(len(l) < 3 or l[2] is None for l in mine):
        return None
    by_key: dict[tuple, list[float]] = {}
    total: dict[tuple, int] = {}  # over every step: ncu's first K may reach past the first
    for launch in mine:
        key = _key(launch)
        total[key] = total.get(key, 0) + 1
        if (launch[3] if len(launch) > 3 else 0) == 0:
            by_key.setdefault(key, []).append(max(0.0, float(launch[1])))
    if not by_key or set(by_key) != set(total):
        return None  # a configuration the first step lacks: nothing stands for it
    every = 1
    for times in by_key.values():  # launches needed before every duration has been seen
        seen: list[float] = []
        for i, us in enumerate(times):
            if all(_apart(us, t) for t in seen):
                seen.append(us)
                every = max(every, i + 1)
    step_us = sum(sum(times) for times in by_key.values())
    k, moved = every, 0.0  # every duration seen: nothing moves
    for fewer in range(1, every):
        moved = _stand_in_error(by_key, fewer)
        if moved <= STAND_IN_ERROR * step_us:
            k = fewer
            break
    else:
        moved = _stand_in_error(by_key, every)
    if all(len(times) <= k for times in by_key.values()):
        return None  # nothing would be saved
    weights: dict[tuple, list[int]] = {}
    for key, times in by_key.items():
        reps = times[:k]
        weights[key] = [0] * len(reps)
        for us in times:  # each launch to the nearest profiled one (the earliest on a tie)
            weights[key][_nearest(us, reps)] += 1
    names_of = {_key(l): l[0] for l in mine}
    out: dict[str, list] = {}
    for key in sorted(by_key, key=lambda kk: (names_of[kk], kk[1], kk[2], kk[0], kk[3] or ())):
        function, grid, block, dims = key
        out.setdefault(names_of[key], []).append({
            "grid": grid, "block": block, "function": function,
            **({"dims": [list(dims[:3]), list(dims[3:])]} if dims else {}),
            "launches": len(by_key[key]), "weights": weights[key],
            # what ncu profiles of it: its first K launches in the range (past the first
            # step where it has fewer there: those count for nothing)
            "profiled": min(k, total[key])})
    sequence, nth = [], {}
    for launch in mine:
        key = _key(launch)
        i = nth.get(key, 0)
        nth[key] = i + 1
        if i < k:
            w = weights[key]
            sequence.append([launch[0], key[1], key[2], w[i] if i < len(w) else 0])
    return k, out, (moved / step_us if step_us > 0 else 0.0), sequence


def mangled_names(launches, names) -> tuple[str, ...] | None:
    """The mangled names of every launch of the kernels ``names``, in first-seen order;
    None where a launch has none (the full pass then matches function names)."""
    out: dict[str, None] = {}
    for launch in launches:
        if launch[0] in names:
            mangled = _mangled(launch)
            if not mangled:
                return None
            out[mangled] = None
    return tuple(out)


def chosen_names(selection: dict) -> tuple[str, ...] | None:
    """The names the full pass profiles; None where that is every kernel (no filter)."""
    if not selection["skipped"]["kernels"]:
        return None
    return tuple(k["kernel"] for k in selection["kernels"] if k["profiled"])


def own_process_first(settings, run: Callable, say: Callable[[str], None], what: str):
    """``run(settings)`` under ``settings.target_processes``; for ``auto``, first with the
    program's own process alone (``application-only``), then, where ncu profiled nothing
    there (``NothingProfiled``), with its child processes too (``all``): ``(what run
    gave, the target it ran under, the seconds of each try that profiled nothing)``.
    Every process ncu connects to slows each profiled launch, and a try that profiles
    nothing costs about the program's own run."""
    tries = (["application-only", "all"] if settings.target_processes == "auto"
             else [target_processes(settings)])
    spent: list[float] = []
    for target in tries:
        started = time.perf_counter()
        try:
            return run(dataclasses.replace(settings, target_processes=target)), target, spent
        except NothingProfiled:
            if target == tries[-1]:
                raise
            spent.append(time.perf_counter() - started)
            say(f"the program's own process launched nothing in the range: {what} again "
                "with its child processes")
    raise AssertionError("unreachable: the last try returns or raises")


def time_and_choose(settings, variant, report: Path, log: Path, env: dict,
                    say: Callable[[str], None], shown_log: Path | None = None):
    """Run the timing pass of a command into ``report`` (a scratch path), choose its top
    kernels; ``(settings for the full pass, the selection record, the timing pass's
    phases)``: its start (ncu and the program up to the range's first launch: a program
    that compiles, ``torch.compile``, pays it here), its launches and its end. Under
    ``target_processes="auto"`` ncu first profiles the program's own process alone
    (``application-only``), and the program's children too (``all``) only where that
    profiled nothing in the range (the phases then begin with that first try); the full
    pass's settings keep the processes that held the launches. ``log``: where ncu's
    output goes, ``shown_log``: where errors say it is (``run_ncu``)."""

    seen: set = set()

    def tick(kernel) -> None:
        key = kernel.launch if kernel.launch is not None else len(seen) * (kernel.percent == 0)
        if key not in seen:
            seen.add(key)
            say(f"timing every launch in the range (ncu, duration only): {len(seen)} so far")

    def timing_pass(attempt):
        timing = dataclasses.replace(attempt, metrics=TIMING_METRICS, kernel_names=None,
                                     per_config=None)
        say("timing every launch in the range (ncu, duration only"
            + (", the program's own process)" if settings.target_processes == "auto"
               and attempt.target_processes != "all" else ")"))
        clock = NcuClock(tick, names=(ph.TIMING_START, ph.TIMING_PASS, ph.TIMING_END))
        ncu = run_ncu(ncu_argv(timing, variant, None, report, None), log, report,
                      on_kernel=clock, env=env, shown_log=shown_log)
        return ncu, clock

    started = time.monotonic()
    (ncu, clock), target, spent = own_process_first(settings, timing_pass, say, "timing it")
    timed = [ph.Phase(ph.TIMING_ALONE, s) for s in spent] + clock.phases(ncu.log.kernels)
    launches, steps = read_launches(report, variant.nvtx_range)
    # the launches the report holds (ncu's log may print fewer lines than it profiled)
    timed = [dataclasses.replace(p, kernels=len(launches)) if p.name == ph.TIMING_PASS else p
             for p in timed]
    selection = choose(launches, steps, settings.cover, settings.top)
    selection["seconds"] = round(time.monotonic() - started, 3)
    selection["processes"] = target  # ncu's --target-processes, the full pass's too
    names = chosen_names(selection)
    plan = None if settings.every_launch else represent(launches, None if names is None else set(names))
    chosen = set(names) if names is not None else {l[0] for l in launches}
    functions = mangled_names(launches, chosen) if plan is not None else None
    if plan is not None and functions is None:
        plan = None  # a configuration is told by its function's mangled name: none here
    selection["represented"] = plan is not None
    each = ""
    if plan is not None:
        k, configs, error, sequence = plan
        selection["per_config"] = k
        selection["stand_in_error"] = round(error, 4)
        selection["sequence"] = sequence
        for entry in selection["kernels"]:
            if entry["profiled"]:
                entry["configs"] = configs.get(entry["kernel"], [])
        n = sum(c["profiled"] for cs in configs.values() for c in cs)
        each = (f", {n} launches of the first step standing for the others: its time "
                f"within {100 * error:.1f} %")
    profiled = selection["profiled"]
    say(f"profiling {profiled['kernels']} of {len(selection['kernels'])} kernels "
        f"({100 * profiled['share']:.1f} % of the range's time{each})")
    if plan is not None:  # ncu counts each function's launches apart: name them mangled
        return dataclasses.replace(settings, kernel_names=functions, name_base="mangled",
                                   per_config=plan[0], target_processes=target), selection, timed
    return (dataclasses.replace(settings, kernel_names=names, per_config=None, target_processes=target),
            selection, timed)
