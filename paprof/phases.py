"""Where a run's time went: the phases of one variant's ``paprof run``, with wall-clock seconds.

``paprof run`` times each phase of each variant and writes them into the run record (the
sidecar's ``phases``: a list, one entry a phase, in the order they ran); ``paprof run
--timings`` shows them. A record written before phases were kept has no ``phases`` and
reads as having none (``RunRecord.phases`` is empty).

One entry: ``{"phase": NAME, "s": SECONDS}`` and, where they apply:

- ``passes``: ncu's replay passes over every profiled kernel (``replay``), counted from
  ncu's ``==PROF==`` lines; ``kernels``: how many kernels were replayed;
- ``shared``: how many variants shared this phase (one launcher process that checked and
  timed them all pays its start and the shape's inputs and reference once): the entry
  holds the whole time, and a total over variants counts it once;
- ``overlapped``: it ran beside other phases (the nvcc builds of the SASS hashes, ahead and
  in parallel), so it is off the run's critical path: a total leaves it out.

The phases (``NAMES``, in running order): the launcher's start (Python, imports, the CUDA
context), the build ahead (several variants' NVRTC compiles in parallel threads), the build
(NVRTC, or the modules built ahead, and the launcher's setup), the inputs and the float64 reference,
the check, the CUDA-event timing, the ceilings, the SASS hash (nvcc), the provenance (git,
nvidia-smi, ncu's version), for a ``--cmd`` program by its top kernels the timing pass (ncu
and the program starting up to the range's first launch, compilation included; the
launches, one pass each; the end; before them, where the program's own process was tried
first and launched nothing in the range, that whole try), then under ncu (a ``--cmd``
program's every kernel, ``--all``: first its own process's try where that profiled
nothing): its
start (ncu, the launcher again, its build and inputs, up to the first profiled kernel),
the replay passes, and its end (the report written, the processes gone). Several variants
profiled in one ncu session (``paprof.measure.session``) share its start and end (``shared``)
and the split of its report into theirs (``split``); each has its own ``ncu setup`` (its
build and setup inside the session, after the previous variant's replay) and replay.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from paprof.errors import UserError

KEY = "phases"
"""The sidecar key."""

START, BUILD_AHEAD, BUILD, INPUTS, REFERENCE, CHECK, TIMING, CEILING, HASH = (
    "launcher start", "build ahead", "build", "inputs", "reference", "check", "timing", "ceiling",
    "SASS hash")
PROVENANCE, NCU_START, NCU_SETUP, REPLAY, NCU_END, SPLIT = (
    "provenance", "ncu start", "ncu setup", "replay", "ncu end", "split")
TIMING_ALONE, TIMING_START, TIMING_PASS, TIMING_END = (
    "timing pass (own process)", "timing pass start", "timing pass", "timing pass end")
NCU_ALONE = "ncu (own process)"
NAMES = (START, BUILD_AHEAD, BUILD, INPUTS, REFERENCE, CHECK, TIMING, CEILING, HASH, PROVENANCE,
         TIMING_ALONE, TIMING_START, TIMING_PASS, TIMING_END, NCU_ALONE, NCU_START, NCU_SETUP,
         REPLAY, NCU_END, SPLIT)
"""Every phase, in running order (a record may hold others: they are shown after these)."""

LARGEST_S = 1e7
"""The longest phase a record may hold (about four months): more is a damaged record."""


@dataclass(frozen=True)
class Phase:
    """One phase of one variant's run."""

    name: str
    seconds: float
    passes: int | None = None
    kernels: int | None = None
    shared: int = 1
    """How many variants shared it (its whole time is here; a total counts it once)."""
    overlapped: bool = False
    """It ran beside other phases: not on the run's critical path."""

    def to_dict(self) -> dict:
        out: dict = {"phase": self.name, "s": round(self.seconds, 4)}
        if self.passes is not None:
            out["passes"] = self.passes
        if self.kernels is not None:
            out["kernels"] = self.kernels
        if self.shared > 1:
            out["shared"] = self.shared
        if self.overlapped:
            out["overlapped"] = True
        return out

    @property
    def own_seconds(self) -> float:
        """This variant's part of the critical path: the time over the variants that
        shared it, nothing when it overlapped other work."""
        return 0.0 if self.overlapped else self.seconds / max(1, self.shared)


@dataclass
class Clock:
    """Collects phases as they run: ``with clock.phase("build"): ...`` or ``add``."""

    phases: list[Phase] = field(default_factory=list)

    def add(self, name: str, seconds: float, **extra) -> Phase:
        phase = Phase(name, max(0.0, float(seconds)), **extra)
        self.phases.append(phase)
        return phase

    def phase(self, name: str, **extra):
        return _Timed(self, name, extra)

    def to_record(self) -> list[dict]:
        return [p.to_dict() for p in self.phases]


class _Timed:
    def __init__(self, clock: Clock, name: str, extra: dict):
        self.clock, self.name, self.extra = clock, name, extra

    def __enter__(self):
        self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.clock.add(self.name, time.perf_counter() - self.t0, **self.extra)
        return False


def _count(value, key: str, path) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 1 << 31:
        raise UserError(f"damaged record {path}: 'phases' entry '{key}' must be a count, got {value!r}"[:200])
    return value


def parse(value, path="record") -> tuple[Phase, ...]:
    """A record's ``phases`` as ``Phase`` objects; () when the record has none (written
    before phases were kept); a one-line ``UserError`` naming the file for a damaged one."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise UserError(f"damaged record {path}: 'phases' must be a list")
    out = []
    for entry in value:
        if not isinstance(entry, Mapping) or not isinstance(entry.get("phase"), str):
            raise UserError(f"damaged record {path}: each 'phases' entry must be a table "
                            "with a 'phase' name")
        seconds = entry.get("s")
        if (isinstance(seconds, bool) or not isinstance(seconds, (int, float))
                or not math.isfinite(seconds) or not 0 <= seconds <= LARGEST_S):
            raise UserError(f"damaged record {path}: 'phases' entry 's' must be seconds from 0 "
                            f"to {LARGEST_S:g}")
        shared = _count(entry.get("shared"), "shared", path)
        out.append(Phase(entry["phase"][:80], float(seconds),
                         passes=_count(entry.get("passes"), "passes", path),
                         kernels=_count(entry.get("kernels"), "kernels", path),
                         shared=max(1, shared or 1), overlapped=entry.get("overlapped") is True))
    return tuple(out)


def ordered_names(runs) -> list[str]:
    """The phase names of ``runs`` (each a sequence of ``Phase``): ``NAMES``' order first,
    then any other in the order first seen."""
    seen = {p.name for phases in runs for p in phases}
    rest = [n for phases in runs for n in (p.name for p in phases) if n not in NAMES]
    return [n for n in NAMES if n in seen] + list(dict.fromkeys(rest))


def totals(runs) -> dict[str, float]:
    """Seconds per phase name over ``runs`` (each a sequence of ``Phase``), a shared phase
    counted once (its time spread over the variants that shared it) and an overlapped one
    left out: what the phases cost the whole command, in ``ordered_names`` order."""
    sums = {name: 0.0 for name in ordered_names(runs)}
    for phases in runs:
        for p in phases:
            sums[p.name] += p.own_seconds
    return sums


def overlapped(runs) -> float:
    """Seconds spent beside the critical path (the parallel nvcc builds), summed."""
    return sum(p.seconds for phases in runs for p in phases if p.overlapped)
