"""Launches that stand for others: a program profiled by a few launches of each launch
configuration (``paprof run --cmd``'s default).

The timing pass (``paprof.measure.top_kernels``) timed every launch of the range; the
full pass profiled the first K launches of each launch configuration (function, grid,
block) of the top kernels, and the run's record lists those launches in launch order,
each with how many launches of one step it stands for (``selection["sequence"]``:
``[kernel, grid, block, launches]``; ``selection["kernels"][i]["configs"]`` says the same
by configuration, for people). The loader counts each profiled launch that many times,
in one step, so a step's time and counters are those of every launch, and every command
sees the step the same way. The sequence, not the configurations, is matched: template
instances of one function (PyTorch's elementwise kernels) share a kernel name in the
report, and only their order tells them apart.

The record is read as untrusted input (a store someone else wrote), and the report may
not hold what the record planned (the program ran differently the second time): a
record that does not hold together, or a report whose launches are not the planned
ones in order, loads the run as profiled (each launch once, and says so). Records of
paprof versions before the sequence are read that way too.
"""

from __future__ import annotations

from collections.abc import Mapping

#: A profiled launch standing for more launches than this in one step is not believed.
MOST_PER_STEP = 100_000

Key = tuple[str, int, int]


def _count(x, zero: bool = False, most: int = MOST_PER_STEP) -> int | None:
    if isinstance(x, bool) or not isinstance(x, int) or not (0 if zero else 1) <= x <= most:
        return None
    return x


MOST_LAUNCHES = 100_000
"""A plan of more profiled launches than this is not believed."""

Planned = tuple[str, int, int, int]
"""One launch ncu was to profile, in launch order: (kernel, grid, block, the launches of
the first step it stands for)."""


def weights(record: Mapping | None) -> tuple[Planned, ...] | None:
    """The launches a run's full pass was to profile, in order, each with the launches it
    stands for (``selection["sequence"]``); None for any other run, or a record that does
    not hold together (its launches are then each counted once)."""
    chosen = record.get("selection") if isinstance(record, Mapping) else None
    if not isinstance(chosen, Mapping) or chosen.get("represented") is not True:
        return None
    sequence = chosen.get("sequence")
    if not isinstance(sequence, list) or not 0 < len(sequence) <= MOST_LAUNCHES:
        return None
    out = []
    for item in sequence:
        if not isinstance(item, list) or len(item) != 4 or not isinstance(item[0], str):
            return None
        grid, block = _count(item[1], most=2 ** 62), _count(item[2], most=2 ** 62)
        weight = _count(item[3], zero=True)
        if None in (grid, block, weight):
            return None
        out.append((item[0], grid, block, weight))
    if not 0 < sum(w for *_k, w in out) <= MOST_PER_STEP:
        return None
    return tuple(out)


def key_of(row: Mapping) -> Key | None:
    """A loaded row's configuration key; None where its grid or block size is missing."""
    try:
        grid, block = float(row.get("grid_size")), float(row.get("block_size"))
    except (TypeError, ValueError):
        return None
    if not (grid == grid and block == block and grid > 0 and block > 0):
        return None
    return str(row.get("kernel")), int(grid), int(block)


def counts(rows: list[Mapping], plan: tuple[Planned, ...]) -> tuple[list[int], str]:
    """How many times each of a report's ``rows`` (in report order) is counted under
    ``plan`` (``weights``), and a note where that is not the plan as made (else "").

    The planned weights where the report holds exactly the planned launches (kernel, grid
    and block, in order). Where it holds them in order with launches between (ncu told
    two launch configurations apart where the timing pass saw one), those count for none
    and the planned ones as planned. Else each launch once."""
    keys = [key_of(r) for r in rows]
    if keys == [p[:3] for p in plan]:
        return [p[3] for p in plan], ""
    times, j, extra = [], 0, []
    for key in keys:  # the plan as a subsequence, matched at the earliest launch
        if j < len(plan) and key == plan[j][:3]:
            times.append(plan[j][3])
            j += 1
        else:
            times.append(0)
            extra.append(key)
    if j == len(plan) and set(extra) <= {p[:3] for p in plan}:
        first = extra[0]  # a planned configuration's (so not None)
        return times, (f"ncu profiled {len(extra)} launches the timing pass did not plan (the "
                       f"first: {first[0]} ({first[1]} x {first[2]})), counted for none, the "
                       "planned ones as planned")
    for i, (key, want) in enumerate(zip(keys, plan)):
        if key != want[:3]:
            got = "no launch shape" if key is None else f"{key[0]} ({key[1]} x {key[2]})"
            why = f"launch {i + 1} is {got}, the plan's {want[0]} ({want[1]} x {want[2]})"
            break
    else:
        why = f"{len(rows)} launches where the plan had {len(plan)}"
    return [1] * len(rows), f"not profiled as the timing pass planned, each launch counted once: {why}"
