"""Numbers that look contradictory side by side, and the reason they are not.

A reader who sees a 6 % L2 hit rate beside L2 delivering each DRAM byte to the SMs four
times, or "Memory is the max over DRAM, L1 and L2" beside a Memory throughput under L2's,
suspects a bug. ``contradictions(cmp)`` finds these pairs in the compared variants and
says why they hold together, so the report can print the reason beside the number (not
in a tooltip). Each note sits beside one table row (``key``).
"""

from __future__ import annotations

from dataclasses import dataclass

from paprof.explain import fmt

SECTOR_BYTES = 32

REPEAT_RATIO = 1.5
"""L2 -> SM bytes per DRAM byte from which the repeats should show as L2 hits."""

HIT_GAP_PTS = 25.0
"""A hit rate this far (points) under the share of repeated bytes looks contradictory."""

ABOVE_PTS = 0.5
"""A unit's throughput this far (points) above Memory throughput looks contradictory."""


@dataclass
class Contradiction:
    key: str
    """The table row the note sits beside (a column of the tidy table)."""
    labels: list[str]
    """The variants it is about."""
    text: str


def _num(v, key):
    value = v.get(key)
    return None if fmt.is_missing(value) else float(value)


def _also(labels: list[str], shown: str) -> str:
    rest = [lab for lab in labels if lab != shown]
    return f"; also {', '.join(rest)}" if rest else ""


def l2_hits(cmp) -> Contradiction | None:
    """A low L2 hit rate beside L2 -> SM bytes several times the DRAM bytes: the hit rate
    is over L2's sector lookups, made after the SMs' identical reads were merged, so the
    repeated deliveries are neither hits nor misses. The note quotes the variant with the
    widest gap and names the others."""
    found = []
    for v in cmp.variants:
        hit, ratio = _num(v, "l2_hit_rate_pct"), _num(v, "l2_to_sm_per_dram_byte")
        if None in (hit, ratio) or ratio < REPEAT_RATIO:
            continue
        gap = (1 - 1 / ratio) * 100 - hit
        if gap > HIT_GAP_PTS:
            found.append((gap, v, hit, ratio))
    if not found:
        return None
    _, v, hit, ratio = max(found, key=lambda f: f[0])
    labels = [f[1].label for f in found]
    lookups, dram = _num(v, "l2_read_sectors_from_l1"), _num(v, "dram_bytes_read")
    per = (f" ({v.label}: {fmt.number(lookups / (dram / SECTOR_BYTES), 3)} per DRAM sector)"
           if lookups and dram else "")
    return Contradiction(
        "l2_hit_rate_pct", labels,
        f"The hit rate is low beside L2 -> SM bytes several times DRAM's ({v.label}: {fmt.pct(hit)} beside "
        f"{fmt.number(ratio, 3)} per DRAM byte{_also(labels, v.label)}): the hit rate counts "
        f"L2's sector lookups{per}, made after the SMs' identical reads were merged, so the "
        "repeated bytes the crossbar delivers are neither hits nor misses.")


UNITS = (("DRAM", "dram_throughput_pct"), ("L1", "l1_throughput_pct"), ("L2", "l2_throughput_pct"))

WHY_ABOVE = {
    "L2": "L2 throughput (lts__throughput) is the busiest of all L2 sub-unit counters, a wider "
          "set than the L2 part of Memory throughput (gpu__compute_memory_throughput)",
    "L1": "L1 throughput is a % of L1's active cycles, Memory throughput of the elapsed ones",
    "DRAM": "DRAM throughput and Memory throughput are averaged over different units",
}


def memory_below_a_unit(cmp) -> Contradiction | None:
    """Memory throughput ("the max over DRAM, L1 and L2") under one of those units' own
    throughput: ncu's percentages are over different counters or cycles. The note quotes
    the variant whose unit reads highest and names the others."""
    found = []
    for v in cmp.variants:
        memory = _num(v, "memory_throughput_pct")
        if memory is None:
            continue
        for name, key in UNITS:
            x = _num(v, key)
            if x is not None and x > memory + ABOVE_PTS:
                found.append((x, v.label, memory, name))
    if not found:
        return None
    x, label, memory, name = max(found)
    labels = list(dict.fromkeys(f[1] for f in found))
    units = list(dict.fromkeys(f[3] for f in found))
    return Contradiction(
        "memory_throughput_pct", labels,
        f"Memory reads under a unit it is the max over ({label}: Memory {fmt.pct(memory)}, {name} "
        f"{fmt.pct(x)}{_also(labels, label)}): " + "; ".join(WHY_ABOVE[n] for n in units) + ".")


def contradictions(cmp) -> list[Contradiction]:
    """Every contradiction-looking pair found in ``cmp``'s variants, with its reason."""
    return [c for c in (l2_hits(cmp), memory_below_a_unit(cmp)) if c is not None]
