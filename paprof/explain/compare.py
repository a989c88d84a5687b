"""Variants side by side: the deltas of each step and the story of why it got faster.

Input is the loader's tidy frame (``paprof.model.load``): one row per kernel launch,
and ``variant_rows`` of it, where a variant made of several kernels (split-KV partial +
merge) is summed into one row. ``compare`` turns those into a ``Comparison``: one
``VariantResult`` per variant in the order given, and one ``Step`` per consecutive pair
(v2 -> v3), each with its deltas and its story as sentences.

One module per job:

- ``paprof.model.comparison``: the dataclasses, the column lists, ``Thresholds``;
- ``paprof.model.movers``: each column's delta across a step and whether it moved; rule
  changes;
- ``paprof.model.assembly``: rows -> variants (``assemble``);
- ``paprof.explain.causes``: the first three sentences of a step: the mechanism from the
  counters, what limits the variant now, what ncu estimates would move it next;
- ``paprof.explain.sentences``: one function per kind of sentence, ``STORY`` (their
  order) and ``tell``;
- here: ``compare`` and ``compare_reports``, the variants with each step told;
- ``paprof.model.provenance``: whether the runs can be compared (the reports use it too).

Everything a comparison's reader needs is importable from here (``__all__``).
"""

from pathlib import Path

from paprof.model.assembly import assemble, family_notes, launch_spread, pair_differences
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
from paprof.model.comparison import (BOUND_UNITS, BOUND_WORDS, EXTRA_COLUMNS, LIMITERS,
                                     METRIC_COLUMNS, ROOFLINE_COLUMNS, STALL_COLUMNS, THRESHOLDS,
                                     THROUGHPUT_UNITS, Comparison, Delta, KernelPart, RuleChange,
                                     RuleHit, Step, Thresholds, VariantResult, binding_limits,
                                     bound_words, limiter_name, verdict_words)
from paprof.model.load import load_reports, variant_rows
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
    rule_change_text,
    rule_sentences,
    shared_memory_sentence,
    stall_sentence,
    tell,
    throughput_sentences,
    work_sentence,
)
from paprof.model.analysis import comparison, complete
from paprof.explain.finish import finish
from paprof.model.provenance import CHECKS as PROVENANCE_CHECKS
from paprof.model.provenance import provenance_warnings


def compare(df, summed=None, order=None, thresholds: Thresholds = THRESHOLDS,
            cross: bool = False) -> Comparison:
    """Compare the variants in the loader's frame ``df``: the model's comparison
    (``paprof.model.analysis``: the variants, each step between two of them measured, the
    provenance checked, the roofline, ledgers and stall ranking; ``summed`` is
    ``variant_rows(df)``, computed when None; ``order`` lists report paths in the order
    the user named them), then each step told (``paprof.explain.finish``)."""
    return finish(complete(comparison(df, summed, order, thresholds, cross)))


def compare_reports(paths: list, thresholds: Thresholds = THRESHOLDS, cross: bool = False) -> Comparison:
    """Load ``.ncu-rep`` files with the loader and compare them in the order given."""
    df = load_reports([Path(p) for p in paths])
    return compare(df, variant_rows(df), order=paths, thresholds=thresholds, cross=cross)

__all__ = [
    "bandwidth_sentence", "binding_limits", "bottleneck_sentence", "BOUND_UNITS", "BOUND_WORDS",
    "bound_words", "cause", "cause_sentence", "code_path", "code_path_sentence", "compare",
    "compare_reports", "Comparison", "Delta", "dram_traffic_sentence", "DRIVERS",
    "duration_sentence", "EXTRA_COLUMNS", "family_notes", "KernelPart", "kernels_sentence",
    "launch_sentence", "launch_spread", "assemble", "pair_differences", "limit", "limit_sentence", "limiter_name", "LIMITERS",
    "METRIC_COLUMNS", "movers", "next_move", "next_moves", "next_sentence", "occupancy_sentence",
    "PROVENANCE_CHECKS", "provenance_warnings", "registers_sentence", "ROOFLINE_COLUMNS",
    "rule_change_text", "rule_changes", "rule_sentences", "RuleChange", "RuleHit", "shared_memory_sentence", "speedup",
    "STALL_COLUMNS", "stall_sentence", "Step", "step_deltas", "STORY", "tell", "THRESHOLDS",
    "Thresholds", "throughput_sentences", "THROUGHPUT_UNITS", "VariantResult", "verdict_words",
    "work_sentence",
]
