"""Variants side by side: the deltas of each step and the story of why it got faster.

Input is the loader's tidy frame (``paprof.model.load``): one row per kernel launch,
and ``variant_rows`` of it, where a variant made of several kernels (split-KV partial +
merge) is summed into one row. ``compare`` turns those into a ``Comparison``: one
``VariantResult`` per variant in the order given, and one ``Step`` per consecutive pair
(v2 -> v3), each with its deltas and its story as sentences.

One module per job:

- ``model``: the dataclasses, the column lists, ``Thresholds``, the value helpers;
- ``movers``: each column's delta across a step and whether it moved; rule changes;
- ``causes``: the first three sentences of a step: the mechanism from the counters, what
  limits the variant now, what ncu estimates would move it next;
- ``sentences``: one function per kind of sentence, ``STORY`` (their order) and ``tell``;
- ``assembly``: rows -> variants -> ``Comparison`` (``compare``, ``compare_reports``);
- provenance lives beside this package (``paprof.model.provenance``): the reports use
  it too.

Everything is importable from here, as before the split.
"""

from paprof.model.assembly import (
    _one_launch_each,
    launch_spread,
    _rules_of,
    _unique_labels,
    _variant_result,
    compare,
    compare_reports,
    family_notes,
)
from paprof.explain.causes import (
    DRIVERS,
    cause,
    cause_sentence,
    limit,
    limit_sentence,
    next_move,
    next_moves,
    next_sentence,
)
from paprof.model.comparison import (
    BOUND_UNITS,
    BOUND_WORDS,
    EXTRA_COLUMNS,
    LIMITERS,
    METRIC_COLUMNS,
    ROOFLINE_COLUMNS,
    STALL_COLUMNS,
    THRESHOLDS,
    THROUGHPUT_UNITS,
    Comparison,
    Delta,
    KernelPart,
    RuleChange,
    RuleHit,
    Step,
    Thresholds,
    VariantResult,
    _clean,
    _num,
    binding_limits,
    bound_words,
    limiter_name,
    verdict_words,
)
from paprof.model.movers import movers, rule_changes, speedup, step_deltas
from paprof.explain.sentences import (
    STORY,
    bandwidth_sentence,
    bottleneck_sentence,
    code_path,
    code_path_sentence,
    dram_traffic_sentence,
    duration_sentence,
    kernels_sentence,
    launch_sentence,
    occupancy_sentence,
    registers_sentence,
    rule_sentences,
    shared_memory_sentence,
    stall_sentence,
    tell,
    throughput_sentences,
    work_sentence,
)
from paprof.model.provenance import CHECKS as PROVENANCE_CHECKS
from paprof.model.provenance import provenance_warnings

__all__ = [name for name in dir() if not name.startswith("__")]
