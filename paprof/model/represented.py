"""Launches that stand for others: a program profiled by a few launches of each launch
configuration (``paprof run --cmd``'s default).

The timing pass (``paprof.measure.top_kernels``) timed every launch of the range; the
full pass profiled the first K launches of each launch configuration (kernel, grid,
block) of the top kernels, and the run's record says, for each configuration, how many
launches of one step each profiled launch stands for
(``selection["kernels"][i]["configs"][j]["weights"]``) and how many ncu profiles
(``"profiled"``). The loader counts each profiled launch that many times, in one step,
so a step's time and counters are those of every launch, and every command sees the
step the same way.

The record is read as untrusted input (a store someone else wrote), and the report may
not hold what the record planned (the program ran differently the second time): a
record that does not hold together loads the run as profiled (each launch once), and a
configuration whose profiled launches the report does not hold as planned counts each
of its launches once.
"""

from __future__ import annotations

from collections.abc import Mapping

#: A profiled launch standing for more launches than this in one step is not believed.
MOST_PER_STEP = 100_000
MOST_PER_CONFIG = 64

Key = tuple[str, int, int]


def _count(x, zero: bool = False, most: int = MOST_PER_STEP) -> int | None:
    if isinstance(x, bool) or not isinstance(x, int) or not (0 if zero else 1) <= x <= most:
        return None
    return x


def weights(record: Mapping | None) -> dict[Key, tuple[int, tuple[int, ...]]] | None:
    """``{(kernel, grid, block): (profiled, weights)}`` of a run whose profiled launches
    stand for others; None for any other run (or a record that does not hold together)."""
    chosen = record.get("selection") if isinstance(record, Mapping) else None
    if not isinstance(chosen, Mapping) or chosen.get("represented") is not True:
        return None
    kernels = chosen.get("kernels")
    if not isinstance(kernels, list):
        return None
    out: dict = {}
    for k in kernels:
        if not isinstance(k, Mapping):
            return None
        if k.get("profiled") is not True:
            continue
        name, configs = k.get("kernel"), k.get("configs")
        if not isinstance(name, str) or not isinstance(configs, list) or not configs:
            return None
        for c in configs:
            if not isinstance(c, Mapping):
                return None
            grid, block = _count(c.get("grid"), most=2 ** 62), _count(c.get("block"), most=2 ** 62)
            profiled, w = _count(c.get("profiled")), c.get("weights")
            if None in (grid, block, profiled) or not isinstance(w, list) \
                    or not 0 < len(w) <= min(profiled, MOST_PER_CONFIG):
                return None
            counts = tuple(_count(x, zero=True) for x in w)
            if None in counts or not 0 < sum(counts) <= MOST_PER_STEP:
                return None
            out[(name, grid, block)] = (profiled, counts)
    return out or None


def key_of(row: Mapping) -> Key | None:
    """A loaded row's configuration key; None where its grid or block size is missing."""
    try:
        grid, block = float(row.get("grid_size")), float(row.get("block_size"))
    except (TypeError, ValueError):
        return None
    if not (grid == grid and block == block and grid > 0 and block > 0):
        return None
    return str(row.get("kernel")), int(grid), int(block)


def counts(rows: list[Mapping], plan: Mapping) -> tuple[list[int], list[str]]:
    """How many times each of a report's ``rows`` (in report order) is counted under
    ``plan`` (``weights``), and the configurations that were not profiled as planned
    (their launches counted once each)."""
    keys = [key_of(r) for r in rows]
    seen: dict = {}
    for key in keys:
        seen[key] = seen.get(key, 0) + 1
    off = sorted(f"{k[0]} ({k[1]} x {k[2]})" for k in seen
                 if k in plan and seen[k] != plan[k][0])
    out, nth = [], {}
    for key in keys:
        if key not in plan or seen[key] != plan[key][0]:
            out.append(1)
            continue
        i = nth.get(key, 0)
        nth[key] = i + 1
        w = plan[key][1]
        out.append(w[i] if i < len(w) else 0)  # past the first step's: counted there
    return out, off
