"""``paprof compare``'s analysis as one call: reports in, a finished comparison out.

``finished_comparison(paths)`` loads the reports, compares them (as a chain in their
order, or with ``baseline=True`` every variant against the first), and finishes the
comparison (``paprof.explain.finish``): what the reports, ``compare --json`` and the
notebook all read.
"""

from __future__ import annotations

import time

from paprof.errors import UserError
from paprof.explain.finish import attach_hotspots, finish
from paprof.explain.verdict import against


def _foreign_kernels(df) -> bool:
    """Whether the loaded table is one report without a run record (not written by
    paprof) whose launches are of two or more kernels."""
    if df.empty or df["variant"].nunique() != 1 or "kernel" not in df:
        return False
    records = df["sidecar"] if "sidecar" in df else []
    return all(r is None or r != r for r in records) and df["kernel"].nunique() >= 2


def finished_comparison(paths, *, thresholds=None, cross: bool = False, step_range: str | None = None,
                        baseline: bool = False, sources: bool = True, timings: dict | None = None):
    """The finished ``Comparison`` of the reports ``paths``; ``timings`` (when given)
    gets the seconds spent loading, comparing and reading sources."""
    from paprof.explain.compare import THRESHOLDS, compare
    from paprof.model.load import load_reports, variant_rows

    timings = {} if timings is None else timings
    t = time.perf_counter()
    df = load_reports(paths, step_range=step_range)
    summed = variant_rows(df)
    timings["load"] = time.perf_counter() - t

    t = time.perf_counter()
    if len(paths) == 1 and _foreign_kernels(df):
        # one report paprof did not write, holding several kernels (a tutorial's naive,
        # coalesced, tiled ... in one ncu run): each kernel is a variant, in launch order
        df = df.assign(variant=df["kernel"].astype(str))
        summed = variant_rows(df)
    cmp = compare(df, summed, order=paths, thresholds=thresholds or THRESHOLDS, cross=cross)
    if len(cmp.variants) < 2:
        raise UserError(f"compare needs at least 2 variants; the reports given hold {len(cmp.variants)}")
    if baseline:
        cmp = against(cmp, cmp.variants[0].label)
    timings["compare"] = time.perf_counter() - t

    t = time.perf_counter()
    if sources:
        attach_hotspots(cmp)
    timings["source"] = time.perf_counter() - t
    return finish(cmp)
