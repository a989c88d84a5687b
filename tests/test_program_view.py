"""``paprof compare`` of two programs (``run --cmd`` runs) opens with the program view:
each program's kernels by time, their share of the step and label, what moved most, and
what the top-kernel run skipped (``paprof.model.program``), in the HTML, the Markdown
and the explanation JSON. On the shipped MLP program runs (examples/mlp)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import extract, unpacked

MLP = Path(__file__).resolve().parents[1] / "examples" / "mlp" / "runs.tar.xz"
pytestmark = pytest.mark.skipif(not MLP.is_file(), reason="examples/mlp/runs.tar.xz is not there")

#: What a top-kernel run of eager would record had its timing pass seen two more kernels
#: (3 steps: 500 us and 160 us over the three).
SELECTION = {
    "cover": 0.9, "top": None, "timed_by": "ncu --metrics gpu__time_duration.sum", "steps": 3,
    "launches": 60, "time_us": 13502.3,
    "kernels": [{"kernel": "nvjet", "launches": 42, "time_us": 12842.3, "share": 0.951, "profiled": True},
                {"kernel": "copy_kernel", "launches": 12, "time_us": 500.0, "share": 0.037, "profiled": False},
                {"kernel": "fill_kernel", "launches": 6, "time_us": 160.0, "share": 0.012, "profiled": False}],
    "profiled": {"kernels": 6, "launches": 42, "time_us": 12842.3, "share": 0.951},
    "skipped": {"kernels": 2, "launches": 18, "time_us": 660.0, "share": 0.049},
}


def _report(runs: Path):
    from paprof.api import write_report

    return write_report(["eager", "compiled"], runs=runs, out=None, markdown="-")


@pytest.fixture(scope="module")
def shipped():
    return _report(unpacked(MLP) / "runs")


def test_the_program_view_comes_first_with_each_programs_kernels_by_time(shipped):
    text = shipped.markdown_text
    assert text.index("### Program view") < text.index("| variant | time (ncu)")
    view = shipped.context.program
    eager, compiled = view.runs
    assert eager.coverage.startswith("every kernel in the range profiled (14 launches a step)")
    first = eager.kernels[0]
    assert first.kernel.startswith("nvjet") and first.launches == "2" and first.bottleneck == "compute-bound"
    assert [k.kernel for k in compiled.kernels][-1].startswith("triton_red")  # longest first
    assert "| vectorized\\_elementwise\\_kernel | 7 | 434 us | 10.1 % | dram-bound |" in text
    assert not eager.skipped and not view.note


def test_what_moved_most_is_the_fused_element_wise_work(shipped):
    (moved,) = shipped.context.program.transitions
    top = moved.moved[0]
    assert (top.before, top.after, top.change) == ("vectorized_elementwise_kernel", "-", "-434 us")
    assert all(not m.before.startswith("nvjet") for m in moved.moved)  # the GEMMs did not move
    assert moved.speedup == "compiled is 1.15x faster than eager over the whole step"


def test_the_explanation_carries_the_program_view(shipped):
    from paprof.explain.explanation import explanation

    program = explanation(shipped.comparison)["program"]
    eager = program["runs"][0]
    assert eager["label"] == "eager" and eager["skipped"] is None
    assert sum(k["share"] for k in eager["kernels"]) == pytest.approx(1.0)
    assert program["transitions"][0]["moved"][0]["delta_us"] == pytest.approx(-433.7, abs=0.1)


def _skipping(tmp_path, mode: str):
    """The shipped MLP's report with ``mode``'s run recorded as skipping two kernels."""
    runs = extract(MLP, tmp_path) / "runs"
    sidecar = runs / "nvidia-h200" / "command" / mode / "command.json"
    data = json.loads(sidecar.read_text())
    data["selection"] = SELECTION
    sidecar.write_text(json.dumps(data))
    return _report(runs)


def test_what_was_skipped_is_shown_with_its_share(tmp_path):
    built = _skipping(tmp_path, "eager")
    eager = built.context.program.runs[0]
    assert eager.coverage == ("6 of 8 kernels profiled, the longest that make up 90 % of the timed "
                              "step")
    assert eager.step_time == "4.5 ms"  # 4.28 ms profiled + 220 us a step skipped
    assert eager.skipped == ("skipped (timed only): 2 kernels, 6 launches a step, 220 us, 4.9 % of "
                             "the step: copy_kernel 167 us, fill_kernel 53.3 us")
    (moved,) = built.context.program.transitions
    assert "skipped kernels (timed only)" in [m.before for m in moved.moved]
    assert moved.speedup.endswith("over the whole step (skipped kernels included)")
    assert "covers the profiled kernels only: eager skipped some" in built.context.program.note
    assert "copy\\_kernel 167 us" in built.markdown_text


def test_the_html_shows_it_and_a_comparison_of_kernels_has_none(shipped, tmp_path):
    from helpers import recorded
    from paprof.api import write_report

    page = tmp_path / "mlp.html"
    write_report(["eager", "compiled"], runs=unpacked(MLP) / "runs", out=page)
    html = page.read_text()
    assert '<section id="program">' in html and 'href="#program"' in html
    assert html.index('id="program"') < html.index('id="verdict"')
    kernels = write_report(["v2", "v3"], runs=recorded("h200"), out=None, markdown="-")
    assert kernels.context.program is None and "Program view" not in kernels.markdown_text


@pytest.mark.parametrize("selection", [
    {"skipped": "all of them", "profiled": {}},
    {"skipped": {"kernels": "many", "time_us": None, "launches": -1}, "profiled": {"time_us": "x"},
     "kernels": [{"kernel": 5}, "no", {"kernel": "k", "launches": "1e99", "profiled": False}], "steps": "3"},
])
def test_a_damaged_selection_is_read_as_far_as_it_goes(tmp_path, selection):
    runs = extract(MLP, tmp_path) / "runs"
    sidecar = runs / "nvidia-h200" / "command" / "eager" / "command.json"
    data = json.loads(sidecar.read_text())
    data["selection"] = selection
    sidecar.write_text(json.dumps(data))
    eager = _report(runs).context.program.runs[0]
    assert eager.kernels[0].kernel.startswith("nvjet")


def test_the_verdict_gives_a_program_that_skipped_kernels_its_whole_step(shipped, tmp_path):
    """The one-line verdict quotes the profiled kernels' time; where the fastest program
    skipped kernels, its whole step (as the program view gives it) comes first."""
    assert shipped.context.summary.startswith("Fastest: compiled (") and "a step" not in shipped.context.summary
    built = _skipping(tmp_path, "compiled")
    compiled = built.context.program.runs[1]
    assert compiled.label == "compiled" and compiled.skipped
    assert built.context.summary.startswith(
        f"Fastest: compiled (a step {compiled.step_time}, ")
    assert " of it in the profiled kernels, " in built.context.summary
