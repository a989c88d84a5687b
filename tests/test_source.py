"""Source hot spots from SourceCounters, on the recorded H200 source-preset runs (tests/data:
v2, v3, v4, v5 made with ``paprof run --preset source``), and the
matching, merging and fallbacks on synthetic instructions."""

from __future__ import annotations

from pathlib import Path

import pytest

from paprof.model import source as S
from helpers import recorded

ROOT = Path(__file__).resolve().parents[1]
SOURCE_RUNS = recorded("h200-source")
OLD_RUNS = recorded("h200")
FAMILY = ROOT / "kernels" / "paprof_kernels" / "paged_decode"


def report(variant: str, runs: Path = SOURCE_RUNS) -> Path:
    return next((runs / "nvidia-h200" / "paged_decode" / variant).glob("*fp32.ncu-rep"))


def has_commit(commit: str) -> bool:
    import subprocess

    done = subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", f"{commit}^{{commit}}"],
                          capture_output=True, check=False)
    return done.returncode == 0


# -- synthetic ---------------------------------------------------------------------------
def ins(offset, samples, file="k.cu", line=1, sass="FFMA R1, R2, R3, R4", **stalls):
    return S.Instruction(offset, sass, samples, stalls or {"long_scoreboard": samples}, 10.0, file, line)


class Texts(S.Sources):
    def __init__(self, lines: dict):
        super().__init__()
        self.lines = lines

    def locate(self, file, line):
        return f"{file}:{line}", self.lines.get((file, line))


def test_lines_merge_instructions_and_share_the_kernels_time():
    k = S.KernelHotspots("k", 100.0, 100.0, [ins(0, 60, line=3), ins(16, 20, line=3), ins(32, 20, line=7)])
    v = S.variant_hotspots("a", "a.ncu-rep", [k], Texts({("k.cu", 3): "  x += y;", ("k.cu", 7): "z();"}))
    assert [(x.where, x.samples, x.time_us) for x in v.lines] == [("k.cu:3", 80, 80.0), ("k.cu:7", 20, 20.0)]
    assert v.lines[0].share == pytest.approx(0.8) and v.lines[0].executed == 20
    assert [i.offset for i in v.lines[0].instructions] == [0, 16]  # hottest first
    assert v.lines[0].top_stall == ("long_scoreboard", 1.0)


def test_a_split_variant_weighs_each_kernel_by_its_duration():
    big = S.KernelHotspots("partial", 90.0, 1000.0, [ins(0, 1000, line=5)])
    small = S.KernelHotspots("merge", 10.0, 10.0, [ins(0, 10, line=9)])
    v = S.variant_hotspots("v4", "r", [big, small], Texts({}))
    assert [(x.where, x.time_us) for x in v.lines] == [("k.cu:5", 90.0), ("k.cu:9", 10.0)]
    assert v.duration_us == 100.0 and sum(x.share for x in v.lines) == pytest.approx(1.0)


def test_without_line_information_the_hot_spots_are_instructions():
    k = S.KernelHotspots("k", 10.0, 10.0, [ins(0x40, 8, file=None, line=None, sass="LDG.E R2, [R4]"),
                                            ins(0x50, 2, file=None, line=None)])
    v = S.variant_hotspots("a", "r", [k])
    assert not v.has_lines
    assert [(x.where, x.text) for x in v.lines] == [("k+0x0040", "LDG.E R2, [R4]"),
                                                    ("k+0x0050", "FFMA R1, R2, R3, R4")]


def test_issuing_is_not_a_stall():
    line = S.Line("k.cu", 1, "k.cu:1", None, samples=10, stalls={"selected": 7, "wait": 3})
    assert line.top_stall == ("wait", 0.3)
    assert S.Line("k.cu", 1, "k.cu:1", None, samples=5, stalls={"selected": 5}).top_stall is None


def test_diff_matches_lines_by_text_across_files_and_sums_repeats():
    a = S.variant_hotspots("a", "r", [S.KernelHotspots("k", 100.0, 100.0, [
        ins(0, 70, file="a.cu", line=10), ins(8, 30, file="a.cu", line=11)])],
        Texts({("a.cu", 10): "dot += q * k;", ("a.cu", 11): "}"}))
    b = S.variant_hotspots("b", "r", [S.KernelHotspots("k", 50.0, 100.0, [
        ins(0, 20, file="b.cu", line=40), ins(8, 20, file="b.cu", line=60), ins(16, 60, file="b.cu", line=30)])],
        Texts({("b.cu", 40): "  dot += q * k;", ("b.cu", 60): "dot += q * k;", ("b.cu", 30): "stage(k);"}))
    step = S.diff(a, b)
    assert step.matched_by_text
    got = {c.key: (c.kind, c.before_us, c.after_us) for c in step.changes}
    assert got["dot += q * k;"] == ("shrank", 70.0, 20.0)  # two lines of b, one statement
    assert got["stage(k);"] == ("new", 0.0, 30.0)
    assert got["a.cu:11"] == ("gone", 30.0, 0.0)  # a brace matches only itself
    assert [c.key for c in step.changes][0] == "dot += q * k;"  # the largest move first


def test_without_text_lines_match_by_file_and_line():
    a = S.variant_hotspots("a", "r", [S.KernelHotspots("k", 10.0, 10.0, [ins(0, 10, line=4)])], Texts({}))
    b = S.variant_hotspots("b", "r", [S.KernelHotspots("k", 20.0, 10.0, [ins(0, 10, line=4)])], Texts({}))
    step = S.diff(a, b)
    assert not step.matched_by_text
    assert [(c.key, c.kind, c.change_us) for c in step.changes] == [("k.cu:4", "grew", 10.0)]


# -- the recorded H200 runs ----------------------------------------------------------------


@pytest.fixture(scope="module")
def hot():
    from paprof.measure import source_text
    from paprof.explain.compare import compare_reports

    cmp = compare_reports([report(v) for v in ("v2", "v3", "v4", "v5")])
    return S.for_comparison(cmp, lambda v: source_text.for_run(v.sidecar))


def test_the_samples_are_the_reports_and_the_lines_add_up_to_the_duration(hot):
    kernels, embedded = S.read_report(report("v2"))
    assert [k.kernel for k in kernels] == ["paged_decode_v2"] and embedded == {}
    assert kernels[0].samples == 323071  # smsp__pcsamp_sample_count of the report
    assert kernels[0].has_lines
    v2 = hot.variant("v2")
    assert sum(x.time_us for x in v2.lines) == pytest.approx(v2.duration_us)
    assert v2.duration_us == pytest.approx(kernels[0].duration_us)


@pytest.mark.lab
def test_v2_waits_on_the_k_load_in_its_dot_product(hot):
    top = hot.variant("v2").top()
    assert top[0].where == "v2_vectorized.cu:36"
    assert top[0].text.strip() == "for (int i = 0; i < VEC; ++i) partial += q.v[i] * k.v[i];"
    reason, share = top[0].top_stall
    assert reason == "long_scoreboard" and share > 0.9 and top[0].share > 0.5
    assert top[0].instructions[0].sass.startswith("FFMA")
    assert "common.cuh:14" in [x.where for x in top]  # the warp shuffle, in the header
    # the text is the run's commit's where this clone has it (a shallow clone: the working tree's)
    assert ("commit d90b5dc" if has_commit("d90b5dc") else "working tree") in hot.variant("v2").source_note


@pytest.mark.lab
def test_v3_waits_where_it_stages_k_in_shared_memory(hot):
    top = hot.variant("v3").top()
    assert top[0].where == "v3_gqa.cu:43" and "key_cache" in top[0].text
    assert top[0].top_stall[0] == "long_scoreboard"
    assert top[0].instructions[0].sass.startswith("STS")


@pytest.mark.lab
def test_v2_to_v3_the_dot_products_wait_moves_to_the_staging(hot):
    step = hot.steps[0]
    assert (step.before, step.after, step.matched_by_text) == ("v2", "v3", True)
    by_key = {c.key: c for c in step.changes}
    dot = by_key["for (int i = 0; i < VEC; ++i) partial += q.v[i] * k.v[i];"]
    assert dot.kind == "shrank" and dot.before.where == "v2_vectorized.cu:36" and dot.after.where == "v3_gqa.cu:52"
    assert dot.change_us < -1000  # 1.55 ms -> 77 us
    staged = step.changes[1]
    assert staged.kind == "new" and staged.after.where == "v3_gqa.cu:43"


@pytest.mark.lab
def test_v4s_two_kernels_are_one_variant_and_v5_maps_into_its_source(hot):
    v4 = hot.variant("v4")
    assert [k.kernel for k in v4.kernels] == ["paged_decode_v4_partial", "paged_decode_v4_merge"]
    assert v4.top()[0].where == "v4_split.cu:42"
    v5 = hot.variant("v5")
    assert v5.top()[0].where == "v5_fast.cu:99" and "fmaf" in v5.top()[0].text


def test_runs_without_source_counters_have_no_hot_spots(tmp_path):
    from paprof.explain.compare import compare_reports

    assert S.for_comparison(compare_reports([report("v2", OLD_RUNS), report("v3", OLD_RUNS)])) is None
    mixed = S.for_comparison(compare_reports([report("v2", OLD_RUNS), report("v3")]))
    assert mixed.without == ["v2"] and [v.label for v in mixed.variants] == ["v3"] and mixed.steps == []


def test_without_the_family_the_module_file_is_named_but_has_no_text():
    kernels, _ = S.read_report(report("v2"))
    v = S.variant_hotspots("v2", "r", kernels)
    assert v.top()[0].where.endswith(".cubin.cu:36") and v.top()[0].text is None


@pytest.mark.lab
def test_a_commit_this_checkout_lacks_reads_the_working_tree():
    import json

    from paprof.measure import source_text

    side = json.loads(report("v2").with_suffix("").with_suffix(".json").read_text())
    side["source"]["commit"] = side["git_commit"] = "0000000"
    sources = source_text.for_run(side)
    kernels, _ = S.read_report(report("v2"))
    v = S.variant_hotspots("v2", "r", kernels, sources)
    assert v.top()[0].text == (FAMILY / "v2_vectorized.cu").read_text().split("\n")[35]
    assert "working tree" in v.source_note and "commit 0000000" in v.source_note


@pytest.mark.lab
def test_compare_writes_the_hot_spots_and_the_notebook_has_them(tmp_path):
    import paprof
    from paprof.api import write_report

    built = write_report(["v2", "v3"], runs=SOURCE_RUNS, out=tmp_path / "r.html", markdown=tmp_path / "r.md")
    html, md = (tmp_path / "r.html").read_text(), (tmp_path / "r.md").read_text()
    assert 'id="hotspots"' in html and 'href="#hotspots"' in html
    assert "v2_vectorized.cu:36" in html and "long scoreboard (98 %)" in html
    assert "### Source hot spots" in md and "| 1 | v2\\_vectorized.cu:36 |" in md
    assert "**v2 -> v3**: the lines that grew or shrank" in md
    assert built.timings["source"] > 0
    nb = paprof.compare(["v2", "v3"], runs=SOURCE_RUNS)
    frame = nb.hotspots
    assert list(frame.columns[:3]) == ["variant", "where", "text"]
    assert frame.iloc[0]["where"] == "v2_vectorized.cu:36" and frame.iloc[0]["top_stall"] == "long_scoreboard"
    assert set(nb.roofline["level"]) == {"dram", "l2", "l1", "work"}
    assert set(nb.roofs["source"]) == {"measured", "datasheet", "ncu peak"}


def test_the_old_runs_report_has_no_hot_spot_section(tmp_path):
    from paprof.api import write_report

    built = write_report(["v2", "v3"], runs=OLD_RUNS, out=tmp_path / "r.html", markdown=tmp_path / "r.md")
    assert built.comparison.hotspots is None and built.context.hotspots is None
    assert 'id="hotspots"' not in (tmp_path / "r.html").read_text()
    assert "Source hot spots" not in (tmp_path / "r.md").read_text()


def test_several_launches_of_a_kernel_count_as_their_mean():
    one = S.KernelHotspots("k", 100.0, 50.0, [ins(0, 50, line=2)])
    two = S.KernelHotspots("k", 120.0, 60.0, [ins(0, 60, line=2)])
    v = S.variant_hotspots("a", "r", [one, two], Texts({}))
    assert v.duration_us == pytest.approx(110.0) and v.lines[0].time_us == pytest.approx(110.0)
    assert v.lines[0].share == pytest.approx(1.0)
