"""One ncu session for several variants of one shape, split into one report a run.

``paprof run --variant a,b,c`` pays ncu's start (ncu itself, the launcher's Python, its
CUDA context, the shape's inputs) once instead of once a variant: one launcher process
(``paprof.measure.kernels.batch --profile-launches``) makes each variant's profiled steps in
turn, each inside pushes of the variant's own NVTX range, under one ncu
(``argv.session_argv``); ``paprof.read.ncu_split`` then splits the one report by range into
each variant's part, which ``profile.profile_variant`` stores as that variant's run (its
sidecar's ``ncu_session`` says so).

What goes wrong stays with the variant it belongs to: a variant whose launches failed in
the session, or whose results do not number what its launch count asked, gets no part and
is profiled alone afterwards, as before; a session that fails as a whole (ncu's error, a
report the splitter cannot read) leaves every variant to be profiled alone.
``PAPROF_NCU_PER_VARIANT=1`` turns the session off (one ncu a variant, as before 2026-12).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from paprof import phases as ph
from paprof.errors import PaprofError
from paprof.family import Variant
from paprof.measure.argv import NcuSettings, session_argv
from paprof.measure.ncu_log import ProfiledKernel
from paprof.measure.runner import run_ncu
from paprof.read import ncu_split
from paprof.read.ncu_fastread import Unsupported

PER_VARIANT = "PAPROF_NCU_PER_VARIANT"
"""Set to 1: one ncu session a variant (``paprof run`` as before the shared session)."""
KEY = "ncu_session"
"""The sidecar key of a run profiled in a shared session."""


def wanted() -> bool:
    """Whether several variants share one ncu session (unless ``PAPROF_NCU_PER_VARIANT``)."""
    return os.environ.get(PER_VARIANT, "0") in ("", "0")


@dataclass
class Part:
    """One variant's part of a shared session: its report, its kernels, its phases."""

    report: Path
    kernels: list[ProfiledKernel]
    phases: list[ph.Phase]
    argv: list[str]
    """The session's ncu command line."""
    log: Path
    """The session's ncu log (every variant's)."""
    record: dict = field(default_factory=dict)
    """The sidecar's ``ncu_session``: the variants, this part's results of the report's."""


class _Clock:
    """The session's progress: when each profiled kernel (in order) was first seen and when
    its passes were printed; shows each as its variant's (``show(variant, kernel)``).

    A kernel is a new one when its name or launch id differs from the last one's, or the
    last one's passes were printed (ncu omits the launch id under an NVTX filter, and two
    variants may launch a kernel of the same name). A kernel whose passes came on a line of
    their own (after a warning: the runner reports no kernel for it) ends when the next one
    starts."""

    def __init__(self, owners: Sequence[Variant], show: Callable[[Variant, ProfiledKernel], None]):
        self.owners, self.show = list(owners), show
        self.start = time.perf_counter()
        self.seen: list[list] = []  # [(name, launch), first seen, passes printed or None]

    def __call__(self, kernel: ProfiledKernel) -> None:
        now = time.perf_counter()
        key = (kernel.kernel, kernel.launch)
        if not self.seen or self.seen[-1][0] != key or self.seen[-1][2] is not None:
            self.seen.append([key, now, None])
        if kernel.passes is not None:
            self.seen[-1][2] = now
        index = len(self.seen) - 1
        if index < len(self.owners):
            self.show(self.owners[index], kernel)

    def spans(self, end: float) -> list[tuple[float, float]]:
        """(first seen, replay done) of each profiled kernel, in order; ``end``: when ncu
        exited."""
        out = []
        for i, (_key, first, done) in enumerate(self.seen):
            if done is None:
                done = self.seen[i + 1][1] if i + 1 < len(self.seen) else end
            out.append((first, done))
        return out


def _phases(start: float, end: float, spans: list, indices: list[int], logged: list,
            members: int) -> list[ph.Phase]:
    """One variant's phases of the session: its start and end shared by the ``members``,
    then its own setup (after the previous variant's replay) and replay. Without the
    kernels' times (``spans`` empty: the progress lines did not number the results) the
    whole session is one shared replay."""
    passes = [logged[i].passes for i in indices if logged and logged[i].passes is not None]
    counted = {"passes": sum(passes) if passes else None, "kernels": len(indices)}
    if not spans or not indices:
        return [ph.Phase(ph.REPLAY, end - start, shared=members, **counted)]
    first, last = spans[0][0], max(done for _t, done in spans)
    own = [spans[i] for i in indices]
    before = max((spans[i][1] for i in range(indices[0])), default=first)
    return [ph.Phase(ph.NCU_START, first - start, shared=members),
            ph.Phase(ph.NCU_SETUP, max(0.0, own[0][0] - before)),
            ph.Phase(ph.REPLAY, max(0.0, own[-1][1] - own[0][0]), **counted),
            ph.Phase(ph.NCU_END, max(0.0, end - last), shared=members)]


def _launch_counts(members, settings: NcuSettings, kernels: dict[str, int]) -> list[int]:
    return [settings.launches * max(1, kernels[v.id]) for v in members]


def profile_together(members: Sequence[Variant], params, settings: NcuSettings, env: dict,
                     kernels: dict[str, int], show: Callable[[Variant, ProfiledKernel], None],
                     say: Callable[[str], None]) -> tuple[dict[str, Part], Path | None]:
    """One ncu session over ``members`` (each a variant the batch checked, ``kernels``: its
    kernels a launch); ``({variant id: Part}, scratch folder)`` for the variants whose part
    came out whole (the caller removes the folder once stored). ``({}, None)`` when the
    session failed as a whole: each variant is then profiled alone."""
    scratch = Path(tempfile.mkdtemp(prefix="paprof-session-"))
    report, result, log = scratch / "session.ncu-rep", scratch / "session.json", scratch / "session.ncu.log"
    counts = _launch_counts(members, settings, kernels)
    argv = session_argv(settings, members, params, report, result, counts)
    say(f"ncu: one session for {len(members)} variants: starting")
    clock = _Clock([v for v, n in zip(members, counts) for _ in range(n)], show)
    try:
        return _run(members, argv, counts, report, result, log, scratch, clock, env, say)
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise


def _run(members, argv, counts, report: Path, result: Path, log: Path, scratch: Path,
         clock: _Clock, env: dict, say) -> tuple[dict[str, Part], Path | None]:
    try:
        ncu = run_ncu(argv, log, report, on_kernel=clock, env=env)
        end = time.perf_counter()
        launched = json.loads(result.read_text()).get("variants") or {}
        t0 = time.perf_counter()
        groups = ncu_split.group_by_range(report, [v.nvtx_range for v in members])
    except (PaprofError, OSError, ValueError, Unsupported) as err:
        say(f"ncu: the shared session failed ({str(err)[:120]}): each variant alone")
        shutil.rmtree(scratch, ignore_errors=True)
        return {}, None
    whole = [v for v, n in zip(members, counts)
             if not (launched.get(v.id) or {}).get("error") and len(groups[v.nvtx_range]) == n]
    parts = {v.id: scratch / f"{v.id}.ncu-rep" for v in whole}
    try:
        ncu_split.split_report(report, {parts[v.id]: groups[v.nvtx_range] for v in whole})
    except (OSError, ValueError, Unsupported) as err:
        say(f"ncu: the shared report could not be split ({str(err)[:120]}): each variant alone")
        shutil.rmtree(scratch, ignore_errors=True)
        return {}, None
    split = time.perf_counter() - t0
    results = sum(len(g) for g in groups.values())
    spans = clock.spans(end) if len(clock.seen) == results else []
    logged = ncu.log.kernels if len(ncu.log.kernels) == results else []
    out: dict[str, Part] = {}
    for variant in whole:
        indices = groups[variant.nvtx_range]
        phases = _phases(clock.start, end, spans, indices, logged, len(members)) + [
            ph.Phase(ph.SPLIT, split, shared=len(members))]
        kernels_of = [logged[i] for i in indices] if logged else []
        out[variant.id] = Part(parts[variant.id], kernels_of, phases, list(argv), log, {
            "variants": [v.id for v in members], "results": indices, "of": results,
            "report_bytes": report.stat().st_size})
    report.unlink(missing_ok=True)
    return out, scratch
