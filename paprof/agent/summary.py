"""Answers an agent can read: the explanation (``paprof.explanation/1``) summarised, and
every answer held under a size cap with a note of what was cut.

A model's context is the scarce resource: the full explanation of one step of the
shipped H200 runs is 17 kB, most of it counters behind terms that moved nothing. The
summary keeps per transition the speedup, the story's leading sentences, the terms that
moved most (each with its share of the time difference; the causes with the counters that
moved most), the kernel view's totals and the comparability notes; the full document stays
one ``paprof compare --json`` away.
"""

from __future__ import annotations

import json

MAX_CHARS = 20_000
"""The most characters of JSON any answer holds (compact JSON: no indentation)."""

TEXT_CHARS = 500
"""Where an answer is over ``MAX_CHARS`` with its list empty (a name of megabytes), each
text in it is cut to this many characters."""

TERMS = 4
"""Terms of the decomposition kept per transition (the largest by time)."""

COUNTERS = 3
"""Counters kept per term (the explanation lists them in the mechanism's order, those
that moved far first)."""

KERNELS = 8
"""Kernel pairs kept per transition (the largest by time difference)."""


def _kernel_view(kernels: list[dict], limit: int) -> dict:
    """The kernel view's totals, and its ``limit`` pairs that changed most."""
    def moved(k: dict) -> float:
        return abs((k.get("after_us") or 0.0) - (k.get("before_us") or 0.0))

    counts = {status: sum(1 for k in kernels if k["status"] == status)
              for status in ("matched", "gone", "new")}
    largest = sorted(kernels, key=moved, reverse=True)[:limit]
    return {"counts": counts,
            "before_us": sum(k.get("before_us") or 0.0 for k in kernels),
            "after_us": sum(k.get("after_us") or 0.0 for k in kernels),
            "largest": largest, "left_out": len(kernels) - len(largest)}


def _terms(transition: dict, terms: int, counters: int) -> tuple[list[dict], int]:
    """The ``terms`` largest terms of the decomposition, each with its top counters."""
    dec = transition.get("decomposition") or {}
    delta = dec.get("delta_us")
    every = sorted(dec.get("terms") or [], key=lambda t: abs(t.get("us") or 0.0), reverse=True)
    kept = [{"term": t["key"], "label": t.get("label"), "us": t.get("us"),
             "share": (t["us"] / delta) if delta and t.get("us") is not None else None,
             "before": t.get("before"), "after": t.get("after"),
             "counters": (t.get("evidence") or [])[:counters]}
            for t in every[:terms]]
    said = {c["term"]: {e["label"] for e in c["counters"]} for c in transition.get("causes") or []}
    for term in kept:  # a cause's counters are said with the cause: the others here
        term["counters"] = [e for e in term["counters"] if e["label"] not in said.get(term["term"], ())]
    return kept, len(every) - len(kept)


def transition(t: dict, terms: int = TERMS, counters: int = COUNTERS,
               kernels: int = KERNELS) -> dict:
    """One transition of the explanation, summarised."""
    dec = t.get("decomposition") or {}
    kept, more = _terms(t, terms, counters)
    return {
        "before": t["before"], "after": t["after"], "speedup": t.get("speedup"),
        "headline": t.get("headline"), "cause": t.get("cause"), "limit": t.get("limit"),
        "next_move": t.get("next_move"),
        "bottleneck_before": t.get("bottleneck_before"),
        "bottleneck_after": t.get("bottleneck_after"),
        "time_us": {k: dec.get(k) for k in ("before_us", "after_us", "delta_us", "noise_us")},
        "causes": [{"mechanism": c["mechanism"], "term": c["term"], "label": c["label"],
                    "us": c["us"], "share": c["share"], "counters": c["counters"][:counters]}
                   for c in t.get("causes") or []],
        "terms": kept, "terms_left_out": more,
        "kernels": _kernel_view(t.get("kernels") or [], kernels),
        "rules_changed": len(t.get("rules") or []),
    }


def explanation(doc: dict, **limits) -> dict:
    """The explanation ``doc`` summarised: its runs in brief, each transition as
    ``transition`` makes it, the comparability checks."""
    return {
        "schema": doc["schema"], "summary_of": "paprof compare --json",
        "runs": [{k: r.get(k) for k in ("label", "variant", "family", "shape", "gpu",
                                          "duration_us", "duration_us_spread", "bottleneck")}
                 for r in doc["runs"]],
        "transitions": [transition(t, **limits) for t in doc["transitions"]],
        "comparable": doc["comparable"], "cross": doc["cross"],
        "warnings": doc["warnings"], "notes": doc["notes"],
    }


def bounded(answer: dict, key: str, max_chars: int = MAX_CHARS) -> str:
    """``answer`` as JSON of at most ``max_chars`` characters: items are dropped from
    the end of its list ``key`` until it fits, and ``cut`` says how many went."""
    items = list(answer.get(key) or [])
    total = len(items)
    while True:
        text = json.dumps(answer, allow_nan=False)
        if len(text) <= max_chars:
            return text
        if not items:
            return _texts_cut(answer, len(text), max_chars)
        drop = max(1, len(items) // 4)
        items = items[:-drop]
        answer = {**answer, key: items,
                  "cut": f"{total - len(items)} of {total} {key} left out to stay under "
                         f"{max_chars} characters: ask for fewer (the CLI's output has all)"}


def _texts_cut(answer: dict, size: int, max_chars: int) -> str:
    """``answer`` with each text cut to ``TEXT_CHARS`` (``paprof.safetext``); when even
    that is over ``max_chars``, only a note of its size."""
    from paprof.safetext import shown

    def cut(value):
        if isinstance(value, str):
            return shown(value, limit=TEXT_CHARS, newlines=True)
        if isinstance(value, dict):
            return {shown(k, limit=TEXT_CHARS): cut(v) for k, v in value.items()}
        if isinstance(value, list):
            return [cut(v) for v in value]
        return value

    text = json.dumps(cut(answer), allow_nan=False)
    if len(text) <= max_chars:
        return text
    return json.dumps({"cut": f"the answer was {size:,} characters, over the {max_chars:,} an "
                              f"answer holds: ask for less (the CLI's output has all)"})
