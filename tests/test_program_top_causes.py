"""A program profiled by its top kernels tells the same story as the program profiled
launch by launch (issue 40: "the same top causes as profiling everything").

The shipped MLP block (examples/mlp: eager and torch.compile, bf16, 3 steps, every launch
profiled on the H200) is profiled again here the way `paprof run --cmd`'s default does
it, with ncu's filters emulated on the full reports: the timing pass's durations (each
launch's `gpu__time_duration.sum`), the kernels making up 90 % of the time, the first K
launches of each configuration (function by mangled name, grid, block), the record's
sequence, and a report holding just those launches (`ncu_split.split_report`, results
byte for byte). Both stores are then compared, eager -> compiled.

Expected (written before this test first ran): the same first cause term, the same
bottlenecks before and after, a headline in the same direction within 5 % of the
whole program's speed-up. Its first run also showed the top route's line saying "1 kernel
gone" where every launch says "4 kernels fused into 2": the fused Triton kernels are in
compiled's unprofiled 5 %; the line now says so (the last test, added after seeing it)."""

from __future__ import annotations

import json
import pytest

from helpers import unpacked
from paprof.measure.top_kernels import choose, chosen_names, read_launches, represent, _key
from paprof.read import ncu_split

pytestmark = pytest.mark.slow  # four comparisons of whole programs: a few seconds



def _runs():
    from pathlib import Path

    archive = Path(__file__).resolve().parents[1] / "examples" / "mlp" / "runs.tar.xz"
    if not archive.is_file():
        pytest.skip("examples/mlp/runs.tar.xz is not there")
    return unpacked(archive) / "runs"


def _top_route(source, dest):
    """``source``'s run folder profiled as the default top route would: ``dest``'s."""
    report = source / "command.ncu-rep"
    launches, steps = read_launches(report, "step")
    selection = choose(launches, steps)
    names = chosen_names(selection)
    k, configs, error, sequence = represent(launches, None if names is None else set(names))
    selection.update(represented=True, per_config=k, stand_in_error=error, sequence=sequence)
    for entry in selection["kernels"]:
        if entry["profiled"]:
            entry["configs"] = configs.get(entry["kernel"], [])
    kept, nth = [], {}
    for index, launch in enumerate(launches):  # ncu: the chosen kernels, first K of each
        if names is not None and launch[0] not in names:
            continue
        key = _key(launch)
        nth[key] = nth.get(key, 0) + 1
        if nth[key] <= k:
            kept.append(index)
    assert len(kept) == len(sequence) < len(launches)
    dest.mkdir(parents=True)
    ncu_split.split_report(report, {dest / "command.ncu-rep": kept})
    side = json.loads((source / "command.json").read_text())
    side["selection"] = selection
    side["report_bytes"] = (dest / "command.ncu-rep").stat().st_size  # the record's own check
    (dest / "command.json").write_text(json.dumps(side))
    return selection


def _story(store):
    import paprof

    doc = paprof.compare(["eager", "compiled"], runs=store).explanation
    (step,) = doc["transitions"]
    return step


@pytest.fixture(scope="module")
def stories(tmp_path_factory):
    runs = _runs()
    top = tmp_path_factory.mktemp("top") / "runs"
    chosen = {}
    for mode in ("eager", "compiled"):
        source = runs / "nvidia-h200" / "command" / mode
        chosen[mode] = _top_route(source, top / "nvidia-h200" / "command" / mode)
    return _story(runs), _story(top), chosen


def test_the_top_route_profiles_fewer_launches(stories):
    _every, _top, chosen = stories
    for mode, selection in chosen.items():
        assert selection["profiled"]["share"] >= 0.9
        assert len(selection["sequence"]) < selection["launches"], mode


def test_the_top_route_tells_the_program_as_every_launch_does(stories):
    every, top, _chosen = stories
    assert [c["term"] for c in top["causes"]][:1] == [c["term"] for c in every["causes"]][:1]
    assert (top["bottleneck_before"], top["bottleneck_after"]) == (every["bottleneck_before"],
                                                                   every["bottleneck_after"])
    assert (top["speedup"] > 1) == (every["speedup"] > 1)
    assert top["speedup"] == pytest.approx(every["speedup"], rel=0.05)


def test_a_kernel_gone_is_said_with_the_other_sides_unprofiled_kernels(stories):
    every, top, _chosen = stories
    assert "timed but not profiled" not in every["cause"]  # every kernel profiled: nothing to say
    assert top["causes"][0]["term"] == "kernel-"
    assert "(compiled has 2 kernels timed but not profiled, 5.2 % of its time, which may now do that work" in top["cause"]
