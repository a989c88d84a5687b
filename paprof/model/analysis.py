"""The model's stage of a comparison in one call: runs in, a comparison of numbers out.

``analyse(runs)`` loads the resolved runs (``paprof.read.resolve``: each a report and its
record, read once) into the tidy table, assembles the compared variants, measures each
step between two of them (the deltas, the speedup, the rules that changed, the time
decomposition: ``measure_step``) and completes the comparison with every number the
reports show beyond that (``complete``: the roofline, each step's time ledger, the
warp-stall ranking and, when asked, the source hot spots). No word is written here: the
explain stage tells each step (``paprof.explain.finish``) from these numbers, and nothing
after this stage reads a run again.
"""

from __future__ import annotations

import time

from paprof.errors import UserError
from paprof.model import roofline, source
from paprof.model.assembly import assemble, family_notes, pair_differences
from paprof.model.comparison import THRESHOLDS, Comparison, Step, Thresholds
from paprof.model.decompose import decompose
from paprof.model.ledger import step_ledgers
from paprof.model.load import load_reports, variant_rows
from paprof.model.movers import rule_changes, speedup, step_deltas
from paprof.model.provenance import provenance_warnings
from paprof.model.stalls import rank_stalls


def measure_step(before, after, t: Thresholds = THRESHOLDS) -> Step:
    """The step ``before`` -> ``after`` in numbers: its deltas, speedup, rule changes and
    time decomposition; its words (headline, cause, sentences) still to be told
    (``paprof.explain.sentences.tell``)."""
    changes = rule_changes(before, after, t)
    spread = sum((v.spread or {}).get("duration_us") or 0.0 for v in (before, after))
    return Step(
        before=before.label, after=after.label, speedup=speedup(before, after), headline="",
        bottleneck_before=None, bottleneck_after=None, sentences=[],
        deltas=step_deltas(before, after, t),
        rules_appeared=[c for c in changes if c.kind == "appeared"],
        rules_disappeared=[c for c in changes if c.kind == "disappeared"],
        rules_changed=[c for c in changes if c.kind == "changed"],
        decomposition=decompose(before, after, spread),
    )


def comparison(df, summed=None, order=None, thresholds: Thresholds = THRESHOLDS,
               cross: bool = False, baseline: bool = False) -> Comparison:
    """The variants of the loader's frame ``df`` (``assembly.assemble``; ``order``: the
    report paths in the order the user named them) and each step between two of them
    measured: consecutive ones, or with ``baseline`` the first against each other one
    (``compare --baseline``); the provenance checked. Not yet complete (``complete``)."""
    variants, apart, launch_notes = assemble(df, summed, order, cross)
    pairs = ([(variants[0], v) for v in variants[1:]] if baseline
             else list(zip(variants, variants[1:])))
    steps = []
    for a, b in pairs:
        step = measure_step(a, b, thresholds)
        step.differs = pair_differences(a, b)
        steps.append(step)
    provenance = [v.provenance for v in variants]
    warnings, notes = provenance_warnings(provenance)
    return Comparison(variants, steps, provenance, warnings,
                      family_notes(variants) + notes + launch_notes, thresholds, cross=apart)


def complete(cmp: Comparison, sources_for=None) -> Comparison:
    """``cmp`` with the roofline, each step's time ledger and the stall ranking attached,
    and the source hot spots of the runs profiled with SourceCounters when
    ``sources_for`` (a variant -> its ``Sources``) is given; returns it."""
    if sources_for is not None:
        cmp.hotspots = source.for_comparison(cmp, sources_for)
    cmp.roofline = roofline.build(cmp)
    cmp.ledgers = step_ledgers(cmp)
    cmp.stalls = rank_stalls(cmp)
    return cmp


def foreign_kernels(df) -> bool:
    """Whether the loaded table is one report without a run record (not written by
    paprof) whose launches are of two or more kernels."""
    if df.empty or df["variant"].nunique() != 1 or "kernel" not in df:
        return False
    records = df["sidecar"] if "sidecar" in df else []
    return all(r is None or r != r for r in records) and df["kernel"].nunique() >= 2


def analyse(runs, *, thresholds: Thresholds | None = None, cross: bool = False,
            step_range: str | None = None, baseline: bool = False, sources_for=None,
            timings: dict | None = None) -> Comparison:
    """The complete comparison, in numbers, of ``runs`` (``paprof.read.store.Run``s as
    ``paprof.read.resolve`` gives them, or report paths), as a chain in their order or
    with ``baseline`` every variant against the first. ``sources_for``: see
    ``complete``. ``timings`` (when given) gets the seconds spent loading, comparing and
    reading sources."""
    timings = {} if timings is None else timings
    t = time.perf_counter()
    df = load_reports(runs, step_range=step_range)
    summed = variant_rows(df)
    timings["load"] = time.perf_counter() - t

    t = time.perf_counter()
    if len(runs) == 1 and foreign_kernels(df):
        # one report paprof did not write, holding several kernels (a tutorial's naive,
        # coalesced, tiled ... in one ncu run): each kernel is a variant, in launch order
        df = df.assign(variant=df["kernel"].astype(str))
        summed = variant_rows(df)
    order = [getattr(r, "report", r) for r in runs]
    cmp = comparison(df, summed, order=order, thresholds=thresholds or THRESHOLDS, cross=cross,
                     baseline=baseline)
    if len(cmp.variants) < 2:
        raise UserError(f"compare needs at least 2 variants; the reports given hold {len(cmp.variants)}")
    timings["compare"] = time.perf_counter() - t

    t = time.perf_counter()
    if sources_for is not None:
        cmp.hotspots = source.for_comparison(cmp, sources_for)
    timings["source"] = time.perf_counter() - t
    return complete(cmp)
