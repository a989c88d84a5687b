"""Whether the runs of one comparison can be compared, from their run records.

Each compared variant's ``paprof.read.record.RunRecord`` (the sidecar as read, or a foreign
report's record) is the one model of where it came from; ``provenance_warnings`` says
where the runs of one comparison disagree (GPU, ncu version, clock control, shape) and
which runs failed or skipped verification.
"""

from __future__ import annotations

from paprof.read.record import RunRecord


CHECKS = (
    ("gpu", "GPUs"),
    ("ncu_version", "ncu versions"),
    ("clock_control", "clock settings"),
    ("shape_key", "shapes"),
)
"""Provenance fields that must agree for a comparison to be fair, and their plural.
Shapes are compared by slug (a store layout without sidecar only knows the slug)."""


def provenance_warnings(rows: list[RunRecord]) -> tuple[list[str], list[str]]:
    """(warnings, notes): mismatched settings are warnings; unknown ones are notes."""
    warnings, notes = [], []
    for key, plural in CHECKS:
        groups: dict[str, list[str]] = {}
        shown: dict[str, str] = {}
        for r in rows:
            value = getattr(r, key)
            if value is not None:
                groups.setdefault(str(value), []).append(r.label)
                shown.setdefault(str(value), str(r.shape if key == "shape_key" else value))
        if len(groups) > 1:
            listed = "; ".join(f"{shown[val]} ({', '.join(labels)})" for val, labels in groups.items())
            warnings.append(f"Profiled with different {plural}: {listed}. "
                            "The numbers are not directly comparable.")
    for r in rows:
        if r.verified is False:
            warnings.append(f"{r.label} failed verification against the float64 reference "
                            f"(relative error {r.rel_error}): its timing is of a wrong kernel.")
        if r.unverified:
            what = "an external command" if r.kind == "command" else "this run"
            warnings.append(f"{r.label} is not verified: {what} was profiled without a "
                            "reference check, so nothing says its output is right.")
        if not r.has_sidecar:
            notes.append(f"{r.label}: no provenance sidecar beside {r.report or 'the report'}; "
                         "its ncu version and clock control are unknown and were not checked.")
    return warnings, notes
