"""Where one run came from: the provenance model, built once from its sidecar.

``RunProvenance.of(sidecar, label=..., gpu=..., shape=..., report_path=...)`` reads the
run store's sidecar (schema 1 or 2, or None for a foreign report) into one frozen
dataclass; the comparison keeps one per variant and the report's footer displays it.
``provenance_warnings`` says where the runs of one comparison disagree (GPU, ncu version,
clock control, shape) and which runs failed or skipped verification.

(The regression gate, ``paprof/gate/``, still keeps its own ``Provenance`` fields
for its baseline file format.)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class RunProvenance:
    """One run's provenance; None where unknown (no sidecar, or a field it lacks)."""

    label: str
    """The variant's label in the comparison it belongs to."""
    gpu: str | None = None
    driver: str | None = None
    ncu_version: str | None = None
    clock_control: str | None = None
    shape: str | None = None
    """The shape as spec text (``batch=64,...``), else the slug."""
    shape_key: str | None = None
    """What shapes are compared by: the slug (a store layout without sidecar only knows it)."""
    preset: str | None = None
    sections: tuple[str, ...] | None = None
    created: str | None = None
    """ISO time the run was profiled."""
    commit: str | None = None
    """paprof's own git commit when the run was made."""
    dirty: bool = False
    verified: bool | None = None
    """The reference check: True passed, False failed, None not run or unknown."""
    unverified: bool = False
    """The sidecar says the run was not verified (a command, ``--no-check``)."""
    kind: str | None = None
    """The variant kind: ``cuda``, ``callable``, ``command``."""
    rel_error: float | None = None
    report: str | None = None
    """The report's path, its last three parts (``family/variant/slug.ncu-rep``)."""
    has_sidecar: bool = False
    launch_details: dict = field(default_factory=dict)
    """Choices the variant made at launch (schema 2), e.g. ``{"num_splits": 1}``."""
    kernels: tuple[str, ...] = ()
    """The kernels ncu profiled in the run (the sidecar's ``profiled_kernels``)."""

    @classmethod
    def of(cls, sidecar: dict | None, *, label: str, gpu: str | None = None,
           shape: str | None = None, report_path: str | None = None) -> "RunProvenance":
        s = sidecar if isinstance(sidecar, dict) else {}
        verification = s.get("verification") or {}
        details = s.get("launch_details")
        sections = s.get("sections")
        kernels = []
        for k in s.get("profiled_kernels") or ():
            name = k.get("kernel") if isinstance(k, dict) else None
            if name and name not in kernels:
                kernels.append(str(name))
        return cls(
            label=label,
            gpu=s.get("gpu") or gpu,
            driver=s.get("driver"),
            ncu_version=s.get("ncu_version"),
            clock_control=s.get("clock_control"),
            shape=s.get("shape") or shape,
            shape_key=s.get("shape_slug") or shape,
            preset=s.get("preset"),
            sections=tuple(sections) if isinstance(sections, (list, tuple)) else None,
            created=s.get("created"),
            commit=s.get("git_commit"),
            dirty=bool(s.get("git_dirty")),
            verified=verification.get("passed"),
            unverified=bool(s) and s.get("verified") is False and not verification,
            kind=s.get("kind"),
            rel_error=verification.get("rel_error"),
            report="/".join(Path(report_path).parts[-3:]) if report_path else None,
            has_sidecar=bool(s),
            launch_details=dict(details) if isinstance(details, dict) else {},
            kernels=tuple(kernels),
        )

    @property
    def commit_text(self) -> str | None:
        """The commit as the footer shows it: ``abc1234 (dirty)`` when the tree was dirty."""
        if self.dirty:
            return f"{self.commit or 'unknown'} (dirty)"
        return self.commit


CHECKS = (
    ("gpu", "GPUs"),
    ("ncu_version", "ncu versions"),
    ("clock_control", "clock settings"),
    ("shape_key", "shapes"),
)
"""Provenance fields that must agree for a comparison to be fair, and their plural.
Shapes are compared by slug (a store layout without sidecar only knows the slug)."""


def provenance_warnings(rows: list[RunProvenance]) -> tuple[list[str], list[str]]:
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
