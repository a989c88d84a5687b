"""Named ncu section presets: which sections ``paprof run`` asks ncu to collect.

Section identifiers are ncu's own (``ncu --list-sections``, first column). Replay cost
under ncu 2025.3.1 on an H100 80GB (``paprof run --family paged_decode --variant all``, 9
variants, one warm machine, 2026-12-07): ``default`` 43.6 s wall (27 passes on the
baseline's kernel), ``tables`` 63.6 s (35 passes; ~54 s with caches warm). On the H200
(8 variants, 2026-12-01): ``basic`` 20 passes a kernel, ``source`` 36.
"""

from __future__ import annotations

from dataclasses import dataclass

from paprof.errors import UserError
from paprof.read.metrics import ncu_metric_names


@dataclass(frozen=True)
class Preset:
    """A named choice of what ncu collects."""

    name: str
    """The ``--preset`` value."""
    sections: tuple[str, ...] = ()
    """ncu section identifiers, one ``--section`` each."""
    section_set: str | None = None
    """An ncu section set (``--set NAME``) used instead of ``sections``."""
    summary: str = ""
    """One line for ``--help``."""
    lineinfo: bool = False
    """Build the variant's CUDA kernels with ``-lineinfo`` so that SourceCounters can
    name source lines (``PAPROF_LINEINFO=1`` in the launcher's environment)."""
    metrics: tuple[str, ...] = ()
    """ncu metric names collected beside the sections (one ``--metrics`` list): the
    catalogue's metrics of sections the preset leaves out."""

    def ncu_args(self) -> list[str]:
        """The argv fragment that selects this preset's metrics."""
        if self.section_set:
            return ["--set", self.section_set]
        args = [arg for section in self.sections for arg in ("--section", section)]
        return args + (["--metrics", ",".join(self.metrics)] if self.metrics else [])


_BASE = (
    "SpeedOfLight",
    "MemoryWorkloadAnalysis",
    "Occupancy",
    "LaunchStats",
    "WorkloadDistribution",
    "ComputeWorkloadAnalysis",
    "SchedulerStats",
    "WarpStateStats",
)
# traffic per memory level (L1, shared memory, L2, DRAM; requests, sectors, hit rates),
# instruction counts and the roofline's inputs
_TRAFFIC = (
    "MemoryWorkloadAnalysis_Tables",
    "MemoryWorkloadAnalysis_Chart",
    "InstructionStats",
    "SpeedOfLight_RooflineChart",
    "SpeedOfLight_HierarchicalTensorRooflineChart",
)

# ``default``: every catalogue column the sections whole fill (the causes, the limits, the
# traffic, the roofline, the gate's metrics) in fewer replay passes. basic's eight
# sections, InstructionStats and the hierarchical roofline (whose ``derived__*`` metrics
# only its section script makes) are whole: ncu's rules scale their estimates by
# SpeedOfLight's and the memory overview's results, so with those two collected only for
# paprof's metrics the rules told a kernel at 89 % of DRAM peak "Issue Slot Utilization,
# up to 58.5 % of its time" where every section whole said 11.6 % (an H100, 2026-12-07,
# kernels/NOTES.md). The memory tables, the memory chart and the roofline chart
# (``METRICS_ONLY``) are collected only for the metrics paprof reads: the tables' section
# whole is ~25 SASS-patched counts paprof never reads, 13 replay passes and 8.9 s of the
# paged_decode baseline's 52 ms kernel on that H100. What goes with them (``tables`` keeps
# them): the two rules of the tables (MemoryCacheAccessPattern, SharedMemoryConflicts:
# their estimates for uncoalesced access and bank conflicts in "what would move it
# next"), the memory chart's two (not actionable, peer and system memory), the roofline
# chart's one (no estimate), and those three sections' pages in Nsight Compute.
# tests/test_default_preset.py holds every cause and limit line of the shipped steps and
# the zoo to ``tables``' and every next-move line to ``tables``' without those rules.
METRICS_ONLY = ("MemoryWorkloadAnalysis_Tables", "MemoryWorkloadAnalysis_Chart",
                "SpeedOfLight_RooflineChart")


def metrics_of(sections: tuple[str, ...]) -> tuple[str, ...]:
    """The catalogue's metrics of ``sections`` as one ``--metrics`` list can ask for them:
    each once, without the ``derived__*`` ones (only a section's script makes those)."""
    return tuple(dict.fromkeys(m for m in ncu_metric_names(sections) if not m.startswith("derived__")))


#: The default's sections: every section of ``tables`` but ``METRICS_ONLY``.
_WHOLE = tuple(s for s in _BASE + _TRAFFIC if s not in METRICS_ONLY)
#: ... and what it collects of those three: the catalogue's metrics, one list.
_METRICS = metrics_of(METRICS_ONLY)


PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        Preset(
            "default",
            _WHOLE,
            summary=("throughputs, traffic per memory level, instructions, roofline inputs, occupancy, "
                     "launch, pipes, schedulers and warp stalls (the memory tables, memory chart "
                     "and roofline chart only for the metrics paprof reads)"),
            metrics=_METRICS,
        ),
        Preset(
            "tables",
            _BASE + _TRAFFIC,
            summary=("default with the memory tables, memory chart and roofline chart whole: ncu's "
                     "uncoalesced-access and bank-conflict estimates, their pages in Nsight Compute "
                     "(8 more replay passes a kernel)"),
        ),
        Preset(
            "source",
            _WHOLE + ("SourceCounters",),
            summary="default plus warp-stall samples per source line (kernels built with -lineinfo)",
            lineinfo=True,
            metrics=_METRICS,
        ),
        Preset(
            "basic",
            _BASE,
            summary=("default without the traffic tables and roofline (fewer, cheaper passes; "
                     "memory-side causes lose their words)"),
        ),
        Preset(
            "memory",
            ("SpeedOfLight", "MemoryWorkloadAnalysis", "Occupancy", "LaunchStats"),
            summary="throughputs, memory, occupancy and launch only (fewer replay passes)",
        ),
        Preset("full", section_set="full", summary="ncu's full set (slow: many replay passes)"),
    )
}


def get_preset(name: str) -> Preset:
    """A preset by name; unknown names list the known ones."""
    try:
        return PRESETS[name]
    except KeyError:
        raise UserError(f"unknown preset {name!r}; known: {', '.join(PRESETS)}") from None
