"""The explain stage's one pass over a comparison the model completed.

``finish(cmp)`` tells each step of a comparison that ``paprof.model.analysis`` measured and
completed (roofline, ledgers, stall ranking and hot spots attached there): its headline,
cause, limit, next move and sentences (``paprof.explain.sentences.tell``), then the reasons
beside numbers that look contradictory, and what the renderers show beyond the
explanation document (``paprof.explain.told``). The explanation document and the reports
then only read it. It runs once per comparison; calling it again on a finished comparison
does nothing.
"""

from __future__ import annotations

from paprof.explain.contradictions import contradictions
from paprof.explain.sentences import tell
from paprof.explain.told import told


def finish(cmp):
    """``cmp`` with every step told and its contradictions found; returns it."""
    if cmp.finished:
        return cmp
    for step in cmp.steps:
        tell(cmp.variant(step.before), cmp.variant(step.after), cmp.thresholds, step)
    cmp.contradictions = contradictions(cmp)
    cmp.told = told(cmp)
    cmp.finished = True
    return cmp
