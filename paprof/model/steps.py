"""What is compared: a run holds steps, a step is the kernel launches of one repetition.

Every command sees a variant through this one model: its time is the sum over one
step's launches, its spread is across steps. This module decides, for the results of
one report in report order, which step each belongs to, and says how it knew:

1. **A step range.** The run's record names an NVTX push/pop range that is pushed once a
   step (``step_range``: paprof's own launcher pushes the variant's range around each
   step; a ``--cmd`` run's ``--nvtx-range``), or the user names one (``--step-range``).
   Each push of that range is one step: the fast reader reads which push a launch sat in
   (ncu records the push's id; ``ncu_report`` exposes only the name). Results outside
   every push of the range join the step before them.
2. **The profiler's record.** An older run of paprof's own (no step range) whose record
   says it profiled N launches of its variant and whose results are N repeats of one
   kernel sequence: N steps of that sequence.
3. **One step.** Anything else (a foreign report, a range whose pushes cannot be told
   apart): the whole report is one step, never guessed from kernel names.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Sequence

#: How the steps of a report were found (the ``steps_from`` column).
FROM_RANGE, FROM_RECORD, ONE_STEP = "range", "record", "one step"


@dataclass(frozen=True)
class StepPlan:
    """The step of each result of one report, and how it was decided."""

    steps: tuple[int, ...]
    source: str
    """``range``, ``record`` or ``one step``."""
    note: str = ""
    """One sentence for the reader where the report could not be split as asked."""

    @property
    def count(self) -> int:
        return len(set(self.steps)) if self.steps else 0


def _range_matches(entry: tuple, wanted: str) -> bool:
    """Whether one NVTX stack entry ``(domain, name, id)`` is the range ``wanted``
    (``NAME``, ``NAME/`` or ``DOMAIN@NAME``, as ncu's ``--nvtx-include`` spells it)."""
    domain, name, _ident = entry
    wanted = wanted[:-1] if wanted.endswith("/") else wanted
    if "@" in wanted:
        want_domain, want_name = wanted.split("@", 1)
        return name == want_name and domain == want_domain
    return name == wanted


def _by_range(nvtx: Sequence, step_range: str) -> StepPlan | None:
    """Steps by the pushes of ``step_range``; None where no launch sits in it."""
    ids: list = []
    inside = 0
    for stack in nvtx:
        if stack is None:
            return None
        mine = [e for e in stack if _range_matches(e, step_range)]
        inside += bool(mine)
        ids.append(mine[-1][2] if mine else None)
    if not inside:
        return None
    if sum(i is not None for i in ids) != inside:
        # names only (ncu_report): the pushes cannot be told apart
        return StepPlan(tuple(0 for _ in ids), ONE_STEP,
                        f"the launches sit in NVTX range {step_range!r} but the reader gives no "
                        "push ids (a report ncu 2025.3's fast reader cannot read): one step")
    order: dict = {}
    steps, current = [], 0
    for ident in ids:
        if ident is not None:
            current = order.setdefault(ident, len(order))
        steps.append(current)
    return StepPlan(tuple(steps), FROM_RANGE)


def _by_record(kernels: Sequence[str], launches: int) -> StepPlan | None:
    n = len(kernels)
    if launches <= 1 or n % launches:
        return None
    size = n // launches
    first = list(kernels[:size])
    if any(list(kernels[i:i + size]) != first for i in range(size, n, size)):
        return None
    return StepPlan(tuple(i // size for i in range(n)), FROM_RECORD)


def plan(kernels: Sequence[str], nvtx: Sequence, record: dict | None,
         step_range: str | None = None) -> StepPlan:
    """The steps of one report's results (``kernels`` and their NVTX stacks ``nvtx``, in
    report order), from the run's ``record`` (its sidecar, None for a foreign report)
    and the range the user named (``step_range``, which wins over the record's)."""
    record = record if isinstance(record, Mapping) else {}
    if not kernels:
        return StepPlan((), ONE_STEP)
    wanted = step_range or record.get("step_range")
    if not wanted and record.get("kind") == "command":
        wanted = record.get("nvtx_range")  # a --cmd run: its range is its step
    note = ""
    if isinstance(wanted, str) and wanted:
        found = _by_range(nvtx, wanted)
        if found is not None and found.source == FROM_RANGE:
            return found
        if found is not None:
            note = found.note
        elif step_range:
            note = f"no launch of this report sits in NVTX range {step_range!r}: one step"
    launches = record.get("launches")
    if not note and isinstance(launches, int) and not isinstance(launches, bool):
        found = _by_record(kernels, launches)
        if found is not None:
            return found
    return StepPlan(tuple(0 for _ in kernels), ONE_STEP, note)
