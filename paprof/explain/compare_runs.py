"""``paprof compare``'s explain stage as one call: the model's comparison in, the
explanation document out.

``explain(cmp)`` tells the comparison that ``paprof.model.analysis.analyse`` made
(``paprof.explain.finish``) and returns its explanation document
(``paprof.explain.explanation``, ``compare --json``): what the renderers read, with the
model's comparison, and nothing else.
"""

from __future__ import annotations

from paprof.explain.explanation import explanation
from paprof.explain.finish import finish


def explain(cmp) -> dict:
    """The explanation document of the comparison ``cmp``, told once here."""
    return explanation(finish(cmp))
