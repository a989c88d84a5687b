"""A comparison as data: the versioned JSON explanation (``paprof compare --json``).

What a CI bot or an agent needs without parsing prose: each compared run (time, spread,
steps, bottleneck verdict and its evidence, the ceiling used and where it came from), each
transition between two runs (speedup, the decomposition's terms with the counters behind
them, the causes, the kernel view, the verdicts before and after) and the comparability
checks (what differs in a cross comparison, the warnings), and the verdict table
(every variant against the baseline, ties called), and where whole programs are compared
the program view (``paprof.model.program``). Built from the finished
``Comparison``; the sentences are the report's own, and the reports' verdict table and
step texts are rendered from this document (``paprof.render.context``).

Schema ``paprof.explanation/1`` (``SCHEMA``): fields are only ever added within a version;
``docs/explanations.md`` describes them.
"""

from __future__ import annotations

import math

from paprof.model.numbers import finite as _num
from paprof.explain.cause_words import mechanism, shown_evidence
from paprof.model.decompose import group
from paprof.explain.verdict import verdict
from paprof._version import __version__
from paprof.model.program import program_view

SCHEMA = "paprof.explanation/1"


def json_safe(obj):
    """JSON-safe: non-finite floats as null, tuples as lists, everything else as it is."""
    if isinstance(obj, dict):
        return {str(k): json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    return obj


def _run(v) -> dict:
    ceiling = v.ceiling
    return {
        "label": v.label, "variant": v.variant, "family": v.family, "shape": v.shape, "gpu": v.gpu,
        "report": v.report_path,
        "duration_us": _num(v.get("duration_us")),
        "duration_us_spread": _num((v.spread or {}).get("duration_us")),
        "steps": v.launches,
        "kernels": [{"kernel": k.kernel, "duration_us": _num(k.duration_us), "share": _num(k.share),
                     "bottleneck": k.bottleneck} for k in v.kernels],
        "bottleneck": v.bottleneck,
        "evidence": list(v.evidence or []),
        "ceiling": None if ceiling is None else {
            "tbs": _num(ceiling.tbs), "source": ceiling.source,
            "origin": "measured" if ceiling.measured else "datasheet"},
        "verified": (v.sidecar or {}).get("verified"),
    }


def _kernels(dec) -> list[dict]:
    if dec is None or dec.pairing is None:
        return []
    p = dec.pairing
    out = [{"status": "matched", "before": a.kernel, "after": b.kernel,
            "before_us": _num(a.duration_us), "after_us": _num(b.duration_us),
            "launches_before": getattr(a, "launches", 1), "launches_after": getattr(b, "launches", 1)}
           for a, b in p.pairs]
    out += [{"status": "gone", "before": a.kernel, "before_us": _num(a.duration_us),
             "launches_before": getattr(a, "launches", 1)} for a in p.gone]
    out += [{"status": "new", "after": b.kernel, "after_us": _num(b.duration_us),
             "launches_after": getattr(b, "launches", 1)} for b in p.new]
    return out


def _transition(step) -> dict:
    dec = step.decomposition
    causes = dec.causes() if dec is not None else []
    return {
        "before": step.before, "after": step.after,
        "speedup": _num(step.speedup),
        "headline": step.headline,
        "cause": step.cause,
        "limit": step.limit,
        "next_move": step.next_move,
        "traffic": step.traffic,
        "bottleneck_before": step.bottleneck_before,
        "bottleneck_after": step.bottleneck_after,
        "decomposition": None if dec is None else dec.to_dict(),
        "causes": [{"mechanism": group(t.key), "term": t.key, "label": t.label, "us": _num(t.us),
                    "words": mechanism(t),
                    "classes": [{"class": p.key, "words": p.words, "before": _num(p.before),
                                 "after": _num(p.after), "us": _num(p.us)} for p in t.parts],
                    "share": _num(t.us / dec.delta_us) if dec.delta_us else None,
                    "counters": [{"label": e.label, "before": _num(e.before), "after": _num(e.after),
                                  "unit": e.unit, "ratio": _num(e.ratio)}
                                 for e in shown_evidence(t)]}
                   for t in causes],
        "kernels": _kernels(dec),
        "rules": [{"id": c.id, "title": c.title, "change": c.kind, "kernel": c.kernel,
                   "speedup_pct_before": _num(c.before_pct), "speedup_pct_after": _num(c.after_pct)}
                  for c in step.rule_changes],
        "sentences": list(step.sentences),
    }


def _verdict(cmp) -> dict | None:
    """Every variant against the baseline (``paprof.explain.verdict``): the report's
    verdict table as data."""
    v = verdict(cmp)
    if v is None:
        return None
    return {
        "baseline": v.baseline, "noise_pct": v.noise_pct, "fastest": list(v.fastest),
        "chained": v.chained,
        "rows": [{"label": r.label, "baseline": r.baseline,
                  "duration_us": _num(r.duration_us), "duration_us_spread": _num(r.spread_us),
                  "steps": r.launches, "event_us": _num(r.event_us),
                  "event_us_spread": _num(r.event_spread_us), "event_count": r.event_count,
                  "speedup": _num(r.speedup), "bottleneck": r.bottleneck, "cause": r.cause,
                  "short_cause": r.short_cause, "against": r.against, "limit": r.limit,
                  "verified": r.verified, "tie": list(r.tie)}
                 for r in v.rows],
    }


def explanation(cmp) -> dict:
    """The comparison ``cmp`` as the ``paprof.explanation/1`` document."""

    return json_safe({
        "schema": SCHEMA,
        "paprof_version": __version__,
        "runs": [_run(v) for v in cmp.variants],
        "transitions": [_transition(s) for s in cmp.steps],
        "comparable": not cmp.cross,
        "cross": list(cmp.cross),
        "warnings": list(cmp.warnings),
        "notes": list(cmp.notes),
        "verdict": _verdict(cmp),
        "program": program_view(cmp),
    })
