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

What was skipped (each kernel's name, launches, time and share) goes into the run's
record under ``selection`` (``choose``), and ``paprof compare`` shows it in its program
view (``paprof.model.program``).
"""

from __future__ import annotations

import dataclasses
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

#: How the record says the launches were timed.
TIMED_BY = f"ncu --metrics {TIME_METRIC} (no sections: one pass a launch)"

#: The fraction of the step ``paprof run --cmd`` profiles by default.
DEFAULT_COVER = 0.9


def read_launches(report: Path, range_name: str) -> tuple[list[tuple[str, float]], int]:
    """``([(kernel, duration_us), ...], steps)`` of a timing report, in launch order;
    ``steps``: the pushes of ``range_name`` the launches sat in (1 where not told)."""

    context, actions = ncu_reader.open_report(Path(report), numeric=[TIME_METRIC], text=[])
    names, nvtx, launches = [], [], []
    for action in actions:
        name = str(action.name())
        names.append(name)
        nvtx.append(ncu_reader.read_nvtx(action))
        ns = ncu_reader.read_metric(action, TIME_METRIC)
        launches.append((name, ns / 1e3 if ns == ns else 0.0))
    plan = steps.plan(names, nvtx, {"kind": "command", "nvtx_range": range_name})
    return launches, max(1, plan.count)


def choose(launches, steps: int = 1, cover: float = DEFAULT_COVER,
           top: int | None = None) -> dict:
    """Which kernels to profile: the fewest names, longest first, whose launches make up
    ``cover`` of the total time (at most ``top`` names), as the run record keeps it
    (``selection``): every kernel's launches, time and share, and the totals of the
    profiled and the skipped ones. Times and launches are over all ``steps``."""
    if not 0 < cover <= 1:
        raise ValueError(f"cover must be in (0, 1], got {cover}")
    by_name: dict[str, list] = {}
    for name, us in launches:
        entry = by_name.setdefault(name, [0, 0.0])
        entry[0] += 1
        entry[1] += max(0.0, float(us))
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

    timing = dataclasses.replace(settings, metrics=(TIME_METRIC,), kernel_names=None)
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
    profiled = selection["profiled"]
    say(f"profiling {profiled['kernels']} of {len(selection['kernels'])} kernels "
        f"({100 * profiled['share']:.1f} % of the range's time)")
    return dataclasses.replace(settings, kernel_names=chosen_names(selection)), selection
