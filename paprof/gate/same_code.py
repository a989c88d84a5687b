"""The gate's "same code" rule: a timing change with identical SASS and identical launch
settings is noise, not a regression.

Each run made by ``paprof run`` (and ``check --profile``) carries a ``code`` record
(``paprof.measure.sass_hash``): per kernel the sha256 of its SASS, the launch settings, and one
``fingerprint`` over both. The baseline keeps the fingerprint in each entry's provenance.
When a timing metric (anything that is not a count) regressed and the fingerprints on
both sides are present and equal, the result becomes ``noise (same code)``: it passes,
and says so. Without a fingerprint on either side (a ``--cmd`` program, a Triton or
PyTorch callable, a run or baseline made before the hashes) nothing is claimed: the
regression stands and a note says why the code could not be compared.
"""

from __future__ import annotations

import dataclasses

SAME_CODE = "noise (same code)"
"""The verdict of a timing change between runs of identical SASS and launch settings."""

_NO_RECORD = "no SASS hash recorded (a run made before paprof hashed the SASS, or a foreign report)"


def provenance_fields(side: dict) -> dict:
    """The ``Provenance`` fields this rule needs, from a run's sidecar: ``code`` (the
    fingerprint, or None) and ``code_why`` (why there is none)."""
    record = side.get("code")
    if not isinstance(record, dict):
        return {"code": None, "code_why": _NO_RECORD}
    fingerprint = record.get("fingerprint")
    if record.get("taken") and isinstance(fingerprint, str) and fingerprint:
        return {"code": fingerprint, "code_why": None}
    return {"code": None, "code_why": str(record.get("why") or "the SASS hash was not taken")}


def _why_unknown(base, now) -> str:
    """Why the code of ``base`` (baseline entry) and ``now`` cannot be compared."""
    whys = {word: entry.provenance.code_why or _NO_RECORD
            for word, entry in (("baseline", base), ("run", now)) if not entry.provenance.code}
    if len(whys) == 2 and len(set(whys.values())) == 1:
        return f"neither side: {whys['run']}"
    return "; ".join(f"the {word}: {why}" for word, why in whys.items())


def apply(results: list, pairs: list) -> tuple[list, list[str]]:
    """``results`` with each regressed timing result of an unchanged fingerprint turned
    into ``SAME_CODE`` (status ``pass``), and the notes that say what was done or why it
    could not be."""
    by_key = {base.key: (base, now) for base, now in pairs}
    out, notes, unknown = [], [], {}
    for r in results:
        pair = by_key.get((r.family, r.variant, r.shape))
        if pair is None or r.status != "regressed" or r.rule.count:
            out.append(r)
            continue
        base, now = pair
        a, b = base.provenance.code, now.provenance.code
        if a and b and a == b:
            why = (f"the SASS of every kernel and the launch settings are identical to the "
                   f"baseline's (fingerprint {a[:12]}): the change is noise")
            out.append(dataclasses.replace(r, status="pass", verdict=SAME_CODE, noise=why))
            notes.append(f"{r.name} {r.metric} at {r.shape}: {r.delta_text} with the same "
                         f"code (SASS and launch settings identical, {a[:12]}): noise, not "
                         "a regression")
            continue
        if not (a and b):
            unknown[base.key] = f"{r.name} at {r.shape}: not known whether the code " \
                                f"changed ({_why_unknown(base, now)}): regressions stand"
        out.append(r)
    return out, notes + list(unknown.values())
