"""A comparison made whole before any report sees it.

``finish(cmp)`` attaches what the reports show beyond the model: the roofline, each
step's time ledger, the warp-stall ranking, the reasons beside numbers that look
contradictory and (``sources=True``) the source hot spots of
runs profiled with SourceCounters. The reports then only format. Calling it again does
nothing.
"""

from __future__ import annotations
from paprof.model import source, roofline
from paprof.explain.contradictions import contradictions
from paprof.model.ledger import step_ledgers
from paprof.model.stalls import rank_stalls


def attach_hotspots(cmp) -> None:
    """Read the source hot spots (``cmp.hotspots``) of the runs profiled with SourceCounters;
    without any, ``cmp.hotspots`` stays None and the report has no hot-spot section."""
    from paprof.measure import source_text

    cmp.hotspots = source.for_comparison(cmp, lambda v: source_text.for_run(v.sidecar))


def finish(cmp, sources: bool = False):
    """``cmp`` with its roofline, ledgers and stall ranking (and hot spots when
    ``sources``) attached; returns it."""
    if sources and cmp.hotspots is None:
        attach_hotspots(cmp)
    if cmp.finished:
        return cmp

    cmp.roofline = roofline.build(cmp)
    cmp.ledgers = step_ledgers(cmp)
    cmp.stalls = rank_stalls(cmp)
    cmp.contradictions = contradictions(cmp)
    cmp.finished = True
    return cmp
