"""Each compared run as the report shows it: the variant card (its kernels, bottleneck
and code path) and the provenance table."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

from paprof.explain import fmt
from paprof.explain.compare import Comparison, VariantResult, bound_words, verdict_words
from paprof.model.program import listed_groups, listed_words, summed


@dataclass
class KernelView:
    name: str
    duration_us: float | None
    duration: str
    share: float | None
    share_text: str
    grid: str
    block: str
    bottleneck: str


@dataclass
class VariantView:
    label: str
    variant: str
    family: str | None
    idea: str | None
    shape: str | None
    gpu: str | None
    duration_us: float | None
    duration: str
    bottleneck: str | None
    bottleneck_text: str
    evidence: list[str]
    kernels: list[KernelView]
    report: str | None
    code_path: str | None = None
    """The code path the run took at launch, in its family's recorded words (else its raw
    ``launch_details``), if recorded."""

    @property
    def multi_kernel(self) -> bool:
        return len(self.kernels) > 1

    @property
    def listed(self) -> list[KernelView]:
        """The kernels as the report lists them (``program.listed_groups``): each launch,
        or for a program's step each kernel by name, the longest first, then the rest."""
        out = []
        for label, group in listed_groups(self.kernels, _name):
            if len(group) == 1 and label == group[0].name:
                out.append(group[0])
                continue
            us, share = summed(group)
            longest = max(group, key=lambda k: k.duration_us or 0.0)
            many = len({k.name for k in group}) > 1  # "N more kernels": no one shape
            out.append(KernelView(
                name=label, duration_us=us, duration=fmt.duration_us(us), share=share,
                share_text=fmt.pct(share * 100) if share is not None else fmt.MISSING,
                grid="" if many else longest.grid, block="" if many else longest.block,
                bottleneck="" if many else longest.bottleneck))
        return out

    @property
    def kernels_words(self) -> str:
        """"2 kernels", or for a program's step "215 launches of 10 kernels"."""
        return listed_words(self.kernels, _name)


def _name(k: KernelView) -> str:
    return k.name


@dataclass
class ProvenanceView:
    columns: list[tuple[str, str]]
    """(key, heading) of each column of ``rows``."""
    rows: list[dict]
    """One per variant: key -> text."""
    common: list[tuple[str, str]]
    """(heading, text) of the fields every variant shares."""
    varying: list[tuple[str, str]]
    """(key, heading) of the columns worth a per-variant table: those that differ, and
    the ones that always identify a run (date, commit, verification, report file)."""


def variant_view(v: VariantResult, code_path: str | None = None) -> VariantView:
    """The variant's card; ``code_path``: the launch's code path as the explain stage
    told it (``Told.code_paths``)."""
    kernels = [
        KernelView(
            name=k.kernel,
            duration_us=k.duration_us,
            duration=fmt.duration_us(k.duration_us),
            share=k.share,
            share_text=fmt.pct(k.share * 100) if k.share is not None else fmt.MISSING,
            grid=fmt.count(k.grid_size),
            block=fmt.count(k.block_size),
            bottleneck=bound_words(k.bottleneck),
        )
        for k in v.kernels
    ]
    return VariantView(
        label=v.label,
        variant=v.variant,
        family=v.family,
        idea=v.idea,
        shape=v.shape,
        gpu=v.gpu,
        duration_us=v.get("duration_us"),
        duration=fmt.duration_us(v.get("duration_us")),
        bottleneck=v.bottleneck,
        bottleneck_text=verdict_words(v),
        evidence=list(v.evidence),
        kernels=kernels,
        report=v.report_path,
        code_path=code_path,
    )


PROVENANCE_COLUMNS = (
    ("gpu", "GPU"),
    ("driver", "Driver"),
    ("ncu_version", "ncu"),
    ("clock_control", "Clock control"),
    ("shape", "Shape"),
    ("preset", "Preset"),
    ("date", "Profiled"),
    ("git_commit", "Commit"),
    ("verified", "Verified"),
    ("report", "Report"),
)


PER_RUN = ("date", "git_commit", "verified", "report")
"""Provenance columns shown per variant even when they agree."""


def _date_text(value) -> str | None:
    if not value:
        return None
    try:
        when = datetime.fromisoformat(str(value))
    except ValueError:
        return str(value)
    if when.tzinfo is not None:
        when = when.astimezone(timezone.utc)
        return when.strftime("%Y-%m-%d %H:%M UTC")
    return when.strftime("%Y-%m-%d %H:%M")


def provenance_view(cmp: Comparison) -> ProvenanceView:
    rows = []
    for p in cmp.provenance:
        row = {"label": p.label}
        for key, _ in PROVENANCE_COLUMNS:
            if key == "date":
                value = _date_text(p.created)
            elif key == "git_commit":
                value = p.commit_text
            elif key == "verified":
                value = {True: "passed", False: "FAILED", None: None}[p.verified]
                if p.unverified:
                    value = "not verified"
                if p.rel_error is not None and value:
                    value += f" (rel. error {float(p.rel_error):.1e})"
            else:
                value = getattr(p, key)
            row[key] = "unknown" if value is None else str(value)
        rows.append(row)
    common, varying = [], []
    for key, heading in PROVENANCE_COLUMNS:
        values = {r[key] for r in rows}
        if key not in PER_RUN and len(values) == 1 and rows:
            common.append((heading, rows[0][key]))
        else:
            varying.append((key, heading))
    dates = sorted({r["date"][:10] for r in rows if r["date"] != "unknown"})
    if dates:
        common.append(("Profiled", dates[0] if len(dates) == 1 else f"{dates[0]} to {dates[-1]}"))
    return ProvenanceView(list(PROVENANCE_COLUMNS), rows, common, varying)
