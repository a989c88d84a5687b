"""The time ledger: each step's change of time, grouped into a fixed set of terms.

The terms are the decomposition's (:mod:`paprof.model.decompose`: the warp-time
identity, with the logarithmic-mean rule that makes them add up to the measured
difference exactly), grouped so that every step of a comparison has the same columns:

``instructions``
    More or fewer warp instructions issued per scheduler.
``memory``
    Waits on global or local memory: long scoreboard, LG throttle, drain, memory
    barriers, texture throttle, constant-cache misses.
``shared``
    Waits on shared memory and special functions: short scoreboard, MIO throttle.
``barrier``
    Waits at block barriers.
``pipes``
    Dependencies and busy pipes: wait, math pipe throttle, GMMA, dispatch, branch
    resolution, instruction fetch, the rest.
``issue``
    Issuing itself and eligible warps not picked (the schedulers' issue rate).
``warps``
    Fewer or more warps resident per scheduler (occupancy).
``idle``
    Schedulers with no warp at all: a grid too small, a partial last wave, a tail.
``clock``
    The SM clock.
``kernels``
    Kernels that appear or disappear between the steps (a fused program).
``unexplained``
    What the counters could not split: 0 where every kernel pair has the identity's
    counters (then the terms add up to the difference exactly).
"""

from __future__ import annotations

from dataclasses import dataclass

from paprof.model.decompose import group

TERMS = (
    ("instructions", "instructions issued"),
    ("memory", "memory waits"),
    ("shared", "shared-memory and MIO waits"),
    ("barrier", "barrier waits"),
    ("pipes", "dependencies and pipes"),
    ("issue", "issue"),
    ("warps", "warps in flight"),
    ("idle", "idle schedulers"),
    ("clock", "SM clock"),
    ("kernels", "kernels new or gone"),
)
"""(key, words) of each term, in the order the ledger shows them."""

RESIDUAL = ("unexplained", "not split by the counters")

@dataclass
class Ledger:
    """One step's duration difference, term by term (microseconds, after - before)."""

    before: str
    after: str
    before_us: float
    after_us: float
    terms: dict[str, float]
    """Each of ``TERMS``' keys (after - before, 0 where nothing moved)."""
    residual: float
    """``unexplained``: 0 where the decomposition is exact."""

    @property
    def difference(self) -> float:
        return self.after_us - self.before_us

    @property
    def missing(self) -> list[str]:
        """Kept for callers: the ledger has no counter-less terms any more."""
        return []

    def rows(self) -> list[tuple[str, str, float]]:
        """(key, words, microseconds) of each term, then the unexplained rest."""
        return [(k, words, self.terms[k]) for k, words in TERMS] + [(*RESIDUAL, self.residual)]


def from_decomposition(dec, before: str = "before", after: str = "after") -> Ledger:
    """The ledger of one step from its ``Decomposition``."""
    terms = {k: 0.0 for k, _ in TERMS}
    residual = 0.0
    for t in dec.terms:
        key = group(t.key)
        if key not in terms:  # unexplained, or a fallback's unit terms (not the identity's)
            residual += t.us
        else:
            terms[key] += t.us
    return Ledger(before, after, dec.before_us, dec.after_us, terms, residual)


def step_ledgers(cmp) -> list[Ledger | None]:
    """One ledger per step of a ``Comparison`` (None where a step has no decomposition:
    a duration is missing)."""
    out = []
    for step in cmp.steps:
        dec = getattr(step, "decomposition", None)
        out.append(None if dec is None else from_decomposition(dec, step.before, step.after))
    return out
