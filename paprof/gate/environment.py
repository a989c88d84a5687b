"""The gate's environment rule: a measurement taken while the GPU was throttled or shared
is ambiguous, not a regression.

Runs made by ``paprof run`` and ``check --profile`` carry an ``environment`` record
(``paprof.measure.environment``, read through NVML): the clocks, the clock event
(throttle) reasons seen while the variant was timed and profiled, and other processes on
the GPU. When a current run was disturbed (a thermal or power slowdown, another process),
``settle`` measures it again, up to the gate's bound (``Settings.rounds`` measurements
in all) when the caller can re-measure; a run still disturbed after that keeps its
timing results, but a regression among them becomes ``ambiguous (environment)``, stated
with the reason (a pass unless ``--fail-ambiguous``). Throttling and sharing only slow a
kernel down, so results that pass or improved stand.

A run without the record (made before it existed) or with NVML absent ("not observed")
is judged as before, and a note says the environment was not observed.
"""

from __future__ import annotations

import dataclasses

AMBIGUOUS_ENVIRONMENT = "ambiguous (environment)"
"""The verdict of a regression measured while the GPU was throttled or shared."""

CLEAN = "clean"
_DISTURBED = "disturbed: "
_NOT_OBSERVED = "not observed: "


def provenance_fields(side: dict) -> dict:
    """``{"environment": ...}`` for ``Provenance`` from a run's sidecar: ``clean``,
    ``disturbed: <reason>``, ``not observed: <why>``, or None without a record."""
    record = side.get("environment")
    if not isinstance(record, dict):
        return {"environment": None}
    if not record.get("observed"):
        return {"environment": _NOT_OBSERVED + str(record.get("why") or "unknown")}
    reason = record.get("disturbed")
    return {"environment": _DISTURBED + str(reason) if reason else CLEAN}


def disturbed(provenance) -> str | None:
    """The reason ``provenance``'s measurement was disturbed, or None."""
    text = provenance.environment or ""
    return text[len(_DISTURBED):] if text.startswith(_DISTURBED) else None


def settle(pairs: list, remeasure, rounds: int) -> tuple[list, dict]:
    """``pairs`` with each disturbed current entry measured again (``remeasure(base)``)
    until one is not disturbed or ``rounds`` measurements were made; and per baseline key
    the number of measurements made for a pair still disturbed."""
    out, tries = [], {}
    for base, now in pairs:
        made = 1
        while disturbed(now.provenance) and remeasure is not None and made < rounds:
            now = remeasure(base)
            made += 1
        if disturbed(now.provenance):
            tries[base.key] = made
        out.append((base, now))
    return out, tries


def apply(results: list, pairs: list, tries: dict, fail_ambiguous: bool = False
          ) -> tuple[list, list[str]]:
    """``results`` with each regressed timing result of a disturbed run turned into
    ``AMBIGUOUS_ENVIRONMENT``, and the notes that say so (and where the environment of
    a regressed run was not observed, or the baseline was disturbed)."""
    by_key = {base.key: (base, now) for base, now in pairs}
    out, notes = [], []
    for r in results:
        base, now = by_key.get((r.family, r.variant, r.shape), (None, None))
        reason = disturbed(now.provenance) if now is not None else None
        if reason and r.status == "regressed" and not r.rule.count:
            made = tries.get(base.key, 1)
            after = f" in all {made} measurements" if made > 1 else ""
            why = f"measured while the GPU was {reason}{after}"
            out.append(dataclasses.replace(
                r, status="regressed" if fail_ambiguous else "pass",
                verdict=AMBIGUOUS_ENVIRONMENT, noise=why))
            notes.append(f"{r.name} {r.metric} at {r.shape}: {AMBIGUOUS_ENVIRONMENT}: {why}; "
                         + ("counted as a regression (--fail-ambiguous)" if fail_ambiguous
                            else "not counted as a regression"))
            continue
        out.append(r)
    regressed = {(r.family, r.variant, r.shape) for r in out
                 if r.status == "regressed" and not r.rule.count}
    for base, now in pairs:
        if disturbed(base.provenance):
            notes.append(f"{base.name} at {base.shape}: the baseline was measured while "
                         f"the GPU was {disturbed(base.provenance)}")
        state = now.provenance.environment
        if base.key in regressed and (state is None or state.startswith(_NOT_OBSERVED)):
            why = state[len(_NOT_OBSERVED):] if state else "the run has no record of it"
            notes.append(f"{base.name} at {base.shape}: the GPU's clocks and other processes "
                         f"were not observed ({why}): a throttled or shared GPU is not ruled out")
    return out, notes
