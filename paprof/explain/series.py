"""Each compared variant's values as the side-by-side table and the charts read them.

``series(cmp)`` is label -> column -> raw value: the variant's own columns plus the
derived ones a table row shows (speedups over the previous and the first variant, the
bottleneck, the top stall in words, the binding occupancy limits). ``compute_family``
says whether the family is told by its pipes rather than its DRAM bandwidth.
"""

from __future__ import annotations

from paprof.explain import fmt
from paprof.model.comparison import binding_limits, limiter_name
from paprof.explain import sentences as told

SHORT_LIMITERS = {"registers": "registers", "shared memory": "shared mem", "warps": "warps",
                  "blocks": "blocks/SM"}
"""Occupancy limiters as a table cell or a chart tick says them."""


def limiter_short(raw) -> str | None:
    name = limiter_name(raw)
    return None if name is None else SHORT_LIMITERS.get(name, name)


def series(cmp) -> dict[str, dict]:
    """label -> column -> raw value, including the derived rows of the table."""
    out: dict[str, dict] = {}
    first = cmp.variants[0].get("duration_us") if cmp.variants else None
    prev = None
    for v in cmp.variants:
        values = dict(v.values)
        dur = values.get("duration_us")
        values["speedup_prev"] = (prev / dur) if (prev and dur) else None
        values["speedup_first"] = (first / dur) if (first and dur) else None
        values["bottleneck"] = v.bottleneck
        reason, cycles = values.get("top_stall_reason"), values.get("top_stall_cycles")
        values["top_stall"] = (f"{reason.replace('_', ' ')} ({fmt.number(cycles, 2)})"
                               if reason else None)
        names, blocks = binding_limits(v)
        values["limited_by"] = " + ".join(limiter_short(n) for n in names) or None
        values["limited_by_blocks"] = blocks
        out[v.label] = values
        prev = dur
    return out


LOW_DRAM_PCT = 25.0
"""A family whose DRAM throughput stays under this (% of peak) in every variant while a
math pipe works harder is not told by its DRAM bandwidth."""


def compute_family(cmp) -> bool:
    """Whether the variants' chart is pipe utilisation rather than DRAM bandwidth: most of
    them are compute-bound, or DRAM stays under ``LOW_DRAM_PCT`` in every one while the
    tensor or FMA pipe is busier (a flash-attention family would draw 1 % DRAM bars)."""
    bound = [v.bottleneck for v in cmp.variants]
    if bound.count("compute-bound") * 2 > len(bound):
        return True

    def peak(key):
        return max((float(v.get(key)) for v in cmp.variants if v.get(key) is not None), default=None)

    dram = peak("dram_throughput_pct")
    math_pipe = max((x for x in (peak("tensor_pipe_pct"), peak("fma_pipe_pct")) if x is not None),
                    default=None)
    return dram is not None and math_pipe is not None and dram < LOW_DRAM_PCT and math_pipe > dram


TABLE_SENTENCES = ("duration_sentence", "launch_sentence", "registers_sentence",
                   "shared_memory_sentence", "occupancy_sentence", "throughput_sentences",
                   "stall_sentence", "dram_traffic_sentence", "bandwidth_sentence", "work_sentence")
"""The sentence functions (``paprof.explain.sentences``) whose sentences say a
change the side-by-side table shows in its rows."""


def table_sentences(cmp, step) -> set[str]:
    """The sentences of ``step`` that repeat rows of the side-by-side table (told again
    by the same sentence functions ``tell`` used: ``TABLE_SENTENCES``)."""
    before, after = cmp.variant(step.before), cmp.variant(step.after)
    out: set[str] = set()
    for name in TABLE_SENTENCES:
        said = getattr(told, name)(before, after, step.deltas, cmp.thresholds)
        if isinstance(said, str):
            out.add(said)
        elif said:
            out.update(said)
    return out
