"""paprof's command line with candidate presets registered beside the shipped ones (issue
40, point 2: a default preset in fewer replay passes that keeps every explanation).

    python scripts/preset_probe.py run --family paged_decode --variant all --preset lean2
    python scripts/preset_probe.py --list       (each candidate's sections and metrics)

The candidates, each named by what it collects whole (the rest only for the catalogue's
metrics; kernels/NOTES.md, 2026-12-07, has what they measured on an H100): ``lean2``
basic's sections less SpeedOfLight and the memory overview, InstructionStats, the memory
tables and the hierarchical roofline (the ``lean`` preset of early 2026-12-07 with the
roofline chart for metrics only); ``m3`` the same without the memory tables (``m3`` with
basic's eight sections whole, ``m3s`` in kernels/NOTES.md, became ``lean`` and then the
default). ``scripts/emulate_preset.py`` says what each
would change in the shipped and zoo explanations; ``scripts/device_presets.sh`` times them,
and ``basic+SECTION`` (basic with one more section) on one variant.
"""

from __future__ import annotations

import sys

from paprof.measure import presets as P

_ALONE = ("SpeedOfLight", "MemoryWorkloadAnalysis")  # the candidates': metrics only


def _preset(name: str, whole: tuple[str, ...], metrics_of: tuple[str, ...]) -> P.Preset:
    base = tuple(s for s in P._BASE if s not in _ALONE)
    return P.Preset(name, base + whole,
                    summary=f"candidate: {' '.join(whole)}; metrics of {' '.join(metrics_of)}",
                    metrics=P.metrics_of(metrics_of))


CANDIDATES = {
    "lean2": _preset("lean2", ("InstructionStats", "MemoryWorkloadAnalysis_Tables",
                               "SpeedOfLight_HierarchicalTensorRooflineChart"),
                     _ALONE + ("MemoryWorkloadAnalysis_Chart", "SpeedOfLight_RooflineChart")),
    "m3": _preset("m3", ("InstructionStats", "SpeedOfLight_HierarchicalTensorRooflineChart"),
                  _ALONE + ("MemoryWorkloadAnalysis_Tables", "MemoryWorkloadAnalysis_Chart",
                            "SpeedOfLight_RooflineChart")),
}


#: Probes: ``basic`` with one more section, to say which section costs the replay.
PROBES = {f"basic+{s}": P.Preset(f"basic+{s}", P._BASE + (s,), summary=f"probe: basic and {s}")
          for s in P._TRAFFIC}


def register() -> None:
    """Add the candidates and probes to the presets paprof knows (before its CLI is
    imported)."""
    for name, preset in {**CANDIDATES, **PROBES}.items():
        P.PRESETS.setdefault(name, preset)


if __name__ == "__main__":
    register()
    if sys.argv[1:] == ["--list"]:
        for name in ("default", "tables", *CANDIDATES):
            p = P.PRESETS[name]
            print(f"{name}: sections {' '.join(p.sections)}; {len(p.metrics)} metrics")
        sys.exit(0)
    from paprof.entry import main

    sys.exit(main(sys.argv[1:]))
