"""A time ledger: where a step's change of ncu duration goes, term by term.

This is an **attribution, not a measurement**. ncu measures one duration per variant;
the ledger splits each variant's duration ``T`` into parts derived from its counters,
then a step's ledger is the change of each part. The parts of one variant add up to
``T`` by construction (the last one is the residual), so a step's terms plus its
residual equal the duration difference exactly (up to float rounding).

Per variant, in this order (each in microseconds):

``dram``
    ``dram_bytes / ceiling``: the time the DRAM bytes need at the GPU's bandwidth
    ceiling (the measured read ceiling, else the datasheet; ``paprof.analysis.gpus``).
    No kernel moving those bytes can be faster.
``tail``
    Of the time beyond that floor, ``T - dram``, the share of SM time the last wave
    leaves idle: ``1 - waves / ceil(waves)`` (``waves_per_sm``; 0.5 waves leave half the
    SMs idle, 1.29 waves leave 35 % of the second wave's SM time idle).
``issue``
    The time the issued instructions need at the schedulers' peak issue rate
    (``T * issue_slots_busy_pct / 100``, which is ``sm__inst_issued`` over its peak)
    beyond what can hide behind the DRAM floor, ``max(0, issue time - dram)``, and at most
    what is left of ``T`` after ``dram`` and ``tail``.
``residual``
    The rest: latency, bandwidth that was not reached for other reasons, overlap the
    model gets wrong. A negative residual means the terms over-explain the duration.

Why there is no separate bandwidth-utilisation term: the loader's achieved bandwidth is
``dram_bytes / T``, so ``dram_bytes / achieved - dram_bytes / ceiling`` is exactly
``T - dram``, i.e. everything beyond the floor; the ledger splits that into ``tail``,
``issue`` and the residual instead of naming it twice. A part whose counters are absent
(no ceiling for the GPU, no waves, no issue counter) is 0 and its time stays in the
residual; ``Ledger.missing`` says which.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

TERMS = (
    ("dram", "DRAM bytes at the ceiling"),
    ("tail", "idle last wave (tail)"),
    ("issue", "instruction issue beyond the DRAM floor"),
)
"""(key, words) of each counter-derived term, in the order they are taken."""

RESIDUAL = ("residual", "residual (latency, the rest)")


def _num(value) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(out) or math.isinf(out) else out


def idle_fraction(waves) -> float | None:
    """Share of SM time the last (partial) wave leaves idle: ``1 - w / ceil(w)``."""
    w = _num(waves)
    if w is None or w <= 0:
        return None
    return 1.0 - w / math.ceil(w)


def parts(values: dict, ceiling_gbs: float | None) -> tuple[dict[str, float], list[str]]:
    """One variant's duration split into ``dram``, ``tail``, ``issue`` and ``residual``
    (microseconds; they sum to ``duration_us``), and the terms whose counters are absent."""
    total = _num(values.get("duration_us"))
    if total is None:
        raise ValueError("no duration_us: nothing to split")
    missing = []
    dram_bytes, ceiling = _num(values.get("dram_bytes")), _num(ceiling_gbs)
    if dram_bytes is not None and ceiling:
        dram = dram_bytes / (ceiling * 1e3)  # GB/s = 1e3 bytes per microsecond
    else:
        dram = 0.0
        missing.append("dram")
    beyond = total - dram
    idle = idle_fraction(values.get("waves_per_sm"))
    if idle is None:
        tail = 0.0
        missing.append("tail")
    else:
        tail = max(beyond, 0.0) * idle
    busy = _num(values.get("issue_slots_busy_pct"))
    if busy is None:
        issue = 0.0
        missing.append("issue")
    else:
        issue = min(max(total * busy / 100.0 - dram, 0.0), max(beyond - tail, 0.0))
    out = {"dram": dram, "tail": tail, "issue": issue}
    out["residual"] = total - dram - tail - issue
    return out, missing


@dataclass
class Ledger:
    """One step's duration difference, term by term (microseconds, after - before)."""

    before: str
    after: str
    before_us: float
    after_us: float
    terms: dict[str, float]
    """``dram``, ``tail``, ``issue`` (each after - before)."""
    residual: float
    missing: list[str] = field(default_factory=list)
    """Terms left at 0 because a variant lacks their counters."""

    @property
    def difference(self) -> float:
        return self.after_us - self.before_us

    def rows(self) -> list[tuple[str, str, float]]:
        """(key, words, microseconds) of each term, then the residual."""
        return [(k, words, self.terms[k]) for k, words in TERMS] + [(*RESIDUAL, self.residual)]


def ledger(before_values: dict, after_values: dict, before_ceiling_gbs=None, after_ceiling_gbs=None,
           before: str = "before", after: str = "after") -> Ledger:
    """The ledger of one step from two variants' values (the comparison's ``values``)."""
    pb, mb = parts(before_values, before_ceiling_gbs)
    pa, ma = parts(after_values, after_ceiling_gbs)
    tb, ta = _num(before_values["duration_us"]), _num(after_values["duration_us"])
    terms = {k: pa[k] - pb[k] for k, _ in TERMS}
    # the residual is what the terms leave of the difference, so the sum is exact
    residual = (ta - tb) - sum(terms.values())
    missing = [k for k, _ in TERMS if k in mb or k in ma]
    return Ledger(before, after, tb, ta, terms, residual, missing)


def step_ledgers(cmp) -> list[Ledger | None]:
    """One ledger per step of a ``Comparison`` (None where a duration is missing)."""
    out = []
    for a, b in zip(cmp.variants, cmp.variants[1:]):
        if _num(a.get("duration_us")) is None or _num(b.get("duration_us")) is None:
            out.append(None)
            continue
        out.append(ledger(a.values, b.values, a.ceiling.gbs if a.ceiling else None,
                          b.ceiling.gbs if b.ceiling else None, a.label, b.label))
    return out
