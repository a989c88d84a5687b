"""Named ncu section presets: which sections ``paprof run`` asks ncu to collect.

Section identifiers are ncu's own (``ncu --list-sections``, first column). Replay cost
under ncu 2025.3.1 on the H200 (``paprof run --variant all`` of paged_decode, 8 variants,
2026-12-01): ``basic`` 20 passes a kernel, 83 s wall; ``default`` 35 passes, 100 s;
``source`` 36 passes, 120 s.
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

# ``lean``: what the analysis and the reports read, derived from the metric catalogue.
# Every catalogue column ``default`` fills is filled (the causes, the limits, the traffic,
# the roofline, the gate's metrics); a section stays whole where its ncu rules can give an
# estimate that "what would move it next" shows (``causes.next_moves``), or where the
# catalogue reads a metric its section script derives (``derived__*``: the hierarchical
# roofline); the others are collected only for the catalogue's metrics: SpeedOfLight (its
# rules, SOLBottleneck, Compute and Memory, give no estimate), MemoryWorkloadAnalysis (no
# rule), MemoryWorkloadAnalysis_Chart (MemoryL2Compression is not actionable, and
# MemoryApertureUsage is about peer and system memory). tests/test_lean_preset.py holds
# every cause, limit and next-move line of the shipped steps and the zoo to the default's.
METRICS_ONLY = ("SpeedOfLight", "MemoryWorkloadAnalysis", "MemoryWorkloadAnalysis_Chart")


def _lean() -> Preset:

    return Preset(
        "lean",
        tuple(s for s in _BASE + _TRAFFIC if s not in METRICS_ONLY),
        summary="default's columns and its rules that give estimates, in fewer replay passes: "
                "SpeedOfLight and the memory workload sections only for the metrics paprof reads",
        metrics=tuple(dict.fromkeys(ncu_metric_names(METRICS_ONLY))),
    )


PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        Preset(
            "default",
            _BASE + _TRAFFIC,
            summary=("throughputs, traffic per memory level, instructions, roofline inputs, occupancy, "
                     "launch, pipes, schedulers and warp stalls"),
        ),
        Preset(
            "source",
            _BASE + _TRAFFIC + ("SourceCounters",),
            summary="default plus warp-stall samples per source line (kernels built with -lineinfo)",
            lineinfo=True,
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
        _lean(),
    )
}


def get_preset(name: str) -> Preset:
    """A preset by name; unknown names list the known ones."""
    try:
        return PRESETS[name]
    except KeyError:
        raise UserError(f"unknown preset {name!r}; known: {', '.join(PRESETS)}") from None
