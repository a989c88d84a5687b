"""The ground-truth zoo (``examples/zoo``): kernel pairs that each differ by ONE known cause,
profiled on the H200. ``paprof compare <pair>_slow <pair>_fast`` must name that cause
first: the top term of the time decomposition is the one the cause acts through, and the
counters shown with it include the one that carries the cause."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ZOO = Path(__file__).resolve().parents[1] / "examples" / "zoo"
RUNS = ZOO / "runs"

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

#: For each cause of causes.toml: the decomposition terms it acts through (the top cause
#: must be one of them) and the counters of which at least one must be shown as moved.
EXPLAINS = {
    "uncoalesced": ({"stall:long_scoreboard", "stall:lg_throttle"}, {"sectors per global load request"}),
    "vector_loads": ({"instructions", "stall:lg_throttle", "stall:long_scoreboard"},
                     {"global load instructions", "bytes per global load instruction",
                      "global load requests (each a round trip a warp may wait on)"}),
    "occupancy_shared_mem": ({"warps"}, {"shared memory per block", "blocks per SM (shared memory limit)",
                                         "theoretical occupancy"}),
    "partial_wave": ({"idle"}, {"waves per SM", "grid size"}),
    "bank_conflicts": ({"stall:mio_throttle", "stall:short_scoreboard"},
                       {"shared-memory wavefronts per load", "shared-memory bank conflicts"}),
    "barrier": ({"stall:barrier"}, set()),
    "divergence": ({"instructions"}, {"threads per instruction"}),
    "dependent_chain": ({"stall:wait", "warps"}, set()),
    "l2_resident": ({"stall:long_scoreboard", "stall:lg_throttle"}, {"L2 hit rate", "DRAM bytes"}),
    "atomics": ({"stall:lg_throttle", "stall:long_scoreboard", "stall:membar", "stall:drain"},
                {"global atomic requests"}),
    "spills": ({"instructions", "stall:long_scoreboard", "stall:lg_throttle"},
               {"local-memory (spill) instructions"}),
    "launch_overhead": ({"idle"}, {"launches"}),
    "fp64": ({"stall:math_pipe_throttle", "stall:wait", "instructions"}, {"FP64 pipe"}),
}


def _pairs() -> list[dict]:
    causes = ZOO / "causes.toml"
    return tomllib.loads(causes.read_text())["pair"] if causes.is_file() else []


needs_runs = pytest.mark.skipif(not RUNS.is_dir(), reason="examples/zoo/runs is not there")


@pytest.mark.skipif(not (ZOO / "causes.toml").is_file(), reason="examples/zoo is not there")
def test_every_cause_of_the_zoo_has_an_explanation_rule():
    assert {p["cause"] for p in _pairs()} <= set(EXPLAINS)
    assert len(_pairs()) >= 12


def _step(pair: dict):
    from paprof.reports.build import write_report

    built = write_report([pair["slow"], pair["fast"]], runs=RUNS, out=None, markdown=None,
                         shape=pair["shape"].replace(" ", ""))
    (step,) = built.comparison.steps
    return step


def _verdict(pair: dict) -> tuple[bool, str]:
    step = _step(pair)
    terms, counters = EXPLAINS[pair["cause"]]
    causes = step.decomposition.causes()
    if not causes:
        return False, f"{pair['name']}: no cause named ({step.cause})"
    top = causes[0]
    shown = {e.label for e in top.evidence if e.moved}
    right = top.key in terms and (not counters or bool(shown & counters))
    return right, f"{pair['name']}: {top.key} ({', '.join(sorted(shown))}) | {step.cause}"


@needs_runs
@pytest.mark.parametrize("pair", _pairs(), ids=lambda p: p["name"])
def test_each_pair_names_its_cause_first(pair):
    right, said = _verdict(pair)
    assert right, said
