"""What the explain stage tells the renderers beyond the explanation document.

``told(cmp)`` (run by ``paprof.explain.finish``, once per comparison) gathers the words
and choices the report shows that the ``compare --json`` document does not hold: each
variant's values as the table reads them (``series``), the charts' choice
(``compute_family``), whether the steps form a star, each variant's code path, each rule
change's sentence, the sentences of each step the side-by-side table repeats, and where
each variant stands against its roof. The renderers read them from ``Comparison.told``,
so that the render stage calls nothing of the explain stage but its number formats.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from paprof.explain.causes import code_path
from paprof.explain.roofline_reading import reading
from paprof.explain.sentences import rule_change_text
from paprof.explain.series import compute_family, series, table_sentences


@dataclass
class Told:
    """The renderers' words of one comparison (``told``)."""

    series: dict
    """label -> column -> raw value, the derived rows included (``series.series``)."""
    compute_family: bool
    """Whether the variants' chart is pipe utilisation (``series.compute_family``)."""
    star: bool
    """Every step starts at the baseline (``is_star``)."""
    code_paths: dict = field(default_factory=dict)
    """label -> the code path the variant's family recorded (``causes.code_path``)."""
    rule_texts: list = field(default_factory=list)
    """Per step, the sentence of each of its rule changes (``sentences.rule_change_text``)."""
    repeats: list = field(default_factory=list)
    """Per step, its sentences that repeat rows of the table (``series.table_sentences``)."""
    readings: dict = field(default_factory=dict)
    """label -> where the variant stands against its roof (``roofline_reading.reading``;
    None without a bounded point); empty without a roofline."""


def is_star(cmp) -> bool:
    """Whether every step of ``cmp`` starts at its first variant (``against``'s shape)
    with more than one step: the report then says "against the baseline", not "against
    the variant to its left"."""
    first = cmp.variants[0].label if cmp.variants else None
    return len(cmp.steps) > 1 and all(s.before == first for s in cmp.steps)


def told(cmp) -> Told:
    """The renderers' words of the told comparison ``cmp``."""
    rl = cmp.roofline
    return Told(
        series=series(cmp),
        compute_family=compute_family(cmp),
        star=is_star(cmp),
        code_paths={v.label: code_path(v) for v in cmp.variants},
        rule_texts=[[rule_change_text(c) for c in s.rule_changes] for s in cmp.steps],
        repeats=[table_sentences(cmp, s) for s in cmp.steps],
        readings={v.label: reading(v, rl.roofs) for v in rl.variants} if rl is not None else {},
    )
