"""``paprof.explain.compare``: deltas and step stories from synthetic frames.

The frames come from ``helpers``' factories (the loader's frame, one row per kernel, from
a few metrics, with defaults taken from the source documents' v2); ``summed`` goes
through the real ``variant_rows``.
"""

from __future__ import annotations

import math

import pytest

from paprof.errors import UserError

from paprof.explain import compare as C

from helpers import SIDE, V3, comparison, make_row, split_rows


# -- the v2 -> v3 story ---------------------------------------------------------------------
@pytest.fixture
def v2_v3():
    return comparison(make_row("v2"), make_row("v3", **V3))


def test_v2_to_v3_tells_the_sources_story(v2_v3):
    step = v2_v3.steps[0]
    assert (step.before, step.after) == ("v2", "v3")
    assert step.speedup == pytest.approx(4950 / 3350)
    assert step.headline == "v3 is 1.48x faster than v2"
    assert (step.bottleneck_before, step.bottleneck_after) == ("latency-bound", "dram-bound")
    s = step.sentences
    assert "duration 4.95 ms -> 3.35 ms: 1.48x faster" in s
    assert "grid 2,048 -> 512 CTAs, block 32 -> 128 threads, waves per SM 0.97 -> 0.78" in s
    assert "registers 64 -> 39 per thread" in s
    assert "shared memory 0 B -> 16 KiB per block" in s
    assert ("theoretical occupancy 50 % -> 41.7 %, now limited by shared memory (5 blocks per SM)"
            in s)
    assert "DRAM throughput 57.4 % -> 84.9 %: the kernel is now dram-bound" in s
    assert "L2 throughput 55 % -> 80 %" in s
    assert "DRAM bytes (2.15 GB) and DRAM active cycles (39.1 M) unchanged: the same traffic in less time" in s
    # the conclusion is drawn once, on the DRAM sentence, not again as its own sentence
    assert not any(x.startswith("now ") for x in s)
    assert any(x.startswith("achieved bandwidth 434 GB/s -> 641 GB/s, 9.6 % -> 14.1 % of the "
                            "measured 4.53 TB/s ceiling") for x in s)
    # the order of the story: the cause and what limits it now first (no ncu rules here, so
    # nothing would move it next), then duration, launch, resources, occupancy, units
    assert s[0] == step.cause and step.cause.startswith("DRAM throughput rises 57.4 % -> 84.9 % of peak")
    assert s[1] == step.limit and step.limit.startswith("v3 is limited by DRAM bandwidth now: 84.9 % of peak")
    assert step.next_move is None
    assert s.index("duration 4.95 ms -> 3.35 ms: 1.48x faster") == 2
    assert s.index("registers 64 -> 39 per thread") < s.index(
        "DRAM throughput 57.4 % -> 84.9 %: the kernel is now dram-bound")


def test_summary_is_one_paragraph(v2_v3):
    summary = v2_v3.steps[0].summary
    assert summary.startswith("DRAM throughput rises 57.4 % -> 84.9 % of peak (641 GB/s, ")
    assert "; v3 is limited by DRAM bandwidth now: " in summary
    assert summary.endswith(".")


def test_unmoved_metrics_say_nothing(v2_v3):
    s = " | ".join(v2_v3.steps[0].sentences)
    assert "SM throughput" not in s  # 17 -> 20: under the 5-point threshold
    assert "L1 throughput" not in s  # 30 -> 33
    assert "achieved occupancy 37.6 % -> 40.1 %" in s  # 2.5 pts: past the 2-point threshold


def test_achieved_occupancy_moves_past_its_threshold():
    cmp = comparison(make_row("a"), make_row("b", achieved_occupancy_pct=40.0))
    assert "achieved occupancy 37.6 % -> 40 %" in cmp.steps[0].sentences


def test_thresholds_are_one_dataclass_that_decides_what_moved():
    strict = C.Thresholds(throughput_pts=50.0)
    cmp = comparison(make_row("v2"), make_row("v3", **V3), thresholds=strict)
    s = cmp.steps[0].sentences
    assert not any(x.startswith("DRAM throughput 57.4 %") for x in s)
    # the cause (DRAM crossed its 70 % mark) and the limit do not depend on the thresholds
    assert s[0].startswith("DRAM throughput rises 57.4 % -> 84.9 % of peak")
    assert s[1].startswith("v3 is limited by DRAM bandwidth now")
    assert cmp.thresholds is strict


def test_every_threshold_field_has_a_docstring():
    import inspect

    source = inspect.getsource(C.Thresholds)
    for name in C.Thresholds.__dataclass_fields__:
        assert f'{name}:' in source
        after = source.split(f"{name}:", 1)[1].splitlines()[1].strip()
        assert after.startswith('"""'), name


def test_slower_step_says_slower():
    cmp = comparison(make_row("v3", **V3), make_row("v4", **dict(V3, duration_us=3920.0)))
    assert cmp.steps[0].headline == "v4 is 1.17x slower than v3"
    assert "duration 3.35 ms -> 3.92 ms: 1.17x slower" in cmp.steps[0].sentences


def test_within_threshold_is_as_fast():
    cmp = comparison(make_row("a"), make_row("b", duration_us=4990.0))
    assert cmp.steps[0].headline == "b is as fast as a (0.992x)"
    assert cmp.steps[0].cause == "the same work as a: DRAM traffic 2.15 GB -> 2.15 GB"
    assert "duration 4.95 ms -> 4.99 ms: as fast (within 2 %)" in cmp.steps[0].sentences


def test_same_bottleneck_says_what_limits_it_now():
    cmp = comparison(make_row("a", **V3), make_row("b", **dict(V3, duration_us=3000.0)))
    assert cmp.steps[0].limit == ("b is limited by DRAM bandwidth now: 84.9 % of peak, 641 GB/s "
                                  "(14.1 % of the measured 4.53 TB/s ceiling)")
    # no counter but the duration moved: the cause is the busiest unit's work (DRAM busy the
    # same share of a shorter time: less of its work), saying what the rows lack
    assert cmp.steps[0].traffic is None and cmp.steps[0].limit in cmp.steps[0].sentences
    assert cmp.steps[0].cause.startswith("less DRAM work: DRAM busy time at its peak rate")
    assert not any(x.startswith("still ") for x in cmp.steps[0].sentences)


def test_limiter_change_without_occupancy_change():
    cmp = comparison(make_row("a"), make_row("b", occupancy_limiter="registers",
                                             block_limit_registers=16, block_limit_blocks=24))
    assert ("theoretical occupancy 50 %, now limited by registers (16 blocks per SM) "
            "instead of the blocks-per-SM limit") in cmp.steps[0].sentences


def test_tied_block_limits_are_named_together():
    cmp = comparison(make_row("a", **V3), make_row("b", block_limit_shared_mem=16, occupancy_limiter="shared_mem",
                                                   shared_mem_per_block_bytes=12288))
    assert ("theoretical occupancy 41.7 % -> 50 %, now limited by shared memory and the "
            "blocks-per-SM limit (16 blocks per SM)") in cmp.steps[0].sentences


def test_zero_bytes_of_shared_memory_is_never_named_a_limit():
    # 1-warp CTAs using no shared memory: the driver's 1 KiB reserve per block ties the
    # shared-memory limit with the 32-blocks cap; only the cap is the limit
    cmp = comparison(make_row("a", **V3), make_row("b", block_limit_shared_mem=16, block_limit_blocks=16,
                                                   occupancy_limiter="blocks", shared_mem_per_block_bytes=0))
    said = next(s for s in cmp.steps[0].sentences if s.startswith("theoretical occupancy"))
    assert said.endswith("now limited by the blocks-per-SM limit (16 blocks per SM)")


def test_dram_traffic_that_moved_is_quoted():
    cmp = comparison(make_row("a", dram_bytes=4.29e9, dram_active_cycles=78e6), make_row("b"))
    assert "DRAM bytes 4.29 GB -> 2.15 GB, DRAM active cycles 78 M -> 39.1 M" in cmp.steps[0].sentences


def test_stall_and_issue_sentence():
    cmp = comparison(make_row("a"), make_row("b", top_stall_reason="barrier", top_stall_cycles=3.2,
                                             issue_active_pct=40.0))
    assert ("top warp stall long scoreboard -> barrier (3.2 cycles per issued instruction), "
            "schedulers issue in 20 % -> 40 % of active cycles") in cmp.steps[0].sentences


# -- several variants, split variants -------------------------------------------------------
def test_any_number_of_variants_each_step_its_story():
    cmp = comparison(make_row("v2"), make_row("v3", **V3), *split_rows("v4"))
    assert [v.label for v in cmp.variants] == ["v2", "v3", "v4"]
    assert [(s.before, s.after) for s in cmp.steps] == [("v2", "v3"), ("v3", "v4")]


def test_split_variant_is_compared_as_its_sum_with_its_kernels():
    cmp = comparison(make_row("v3", **V3), *split_rows("v4"))
    v4 = cmp.variant("v4")
    assert v4.multi_kernel
    assert v4.get("duration_us") == pytest.approx(3920.0 + 22.6)
    assert v4.get("dram_bytes") == pytest.approx(2.22e9)
    assert [k.kernel for k in v4.kernels] == ["paged_decode_v4_partial", "paged_decode_v4_merge"]
    assert v4.kernels[1].share == pytest.approx(22.6 / 3942.6)
    # launch configuration comes from the dominant (longest) kernel
    assert v4.get("grid_size") == 8192
    step = cmp.steps[0]
    assert step.headline == "v4 is 1.18x slower than v3"
    assert ("v4 runs 2 kernels, compared as their sum: paged_decode_v4_partial 3.92 ms (99.4 %) + "
            "paged_decode_v4_merge 22.6 us (0.6 %)") in step.sentences


def test_a_step_of_many_launches_is_listed_by_kernel_the_longest_first():
    report = "/runs/nvidia-h200/command/compiled/command.ncu-rep"
    # a program's step: a GEMM launched 4 times, 5 small kernels once each
    launches = [("gemm", 100.0)] * 4 + [(f"small_{i}", 10.0 + i) for i in range(5)]
    rows = [make_row("compiled", kernel=name, report=report, duration_us=us, grid_size=132,
                     block_size=384) for name, us in launches]
    cmp = comparison(make_row("eager", **V3), *rows)
    line = next(x for x in cmp.steps[0].sentences if "compared as their sum" in x)
    assert line.startswith("compiled runs 9 launches of 6 kernels, compared as their sum: gemm x4 400 us (")
    # the longest four kernels by name, then the other two as one
    assert line.count(" + ") == 4 and line.endswith("2 more kernels 21 us (4.6 %)"), line
    assert "small_4 14 us" in line and "small_0" not in line


def test_order_follows_the_paths_given():
    rows = [make_row("v3", **V3), make_row("v2")]
    order = [rows[1]["report_path"], rows[0]["report_path"]]
    cmp = comparison(*rows, order=order)
    assert [v.label for v in cmp.variants] == ["v2", "v3"]


def test_repeated_ids_get_unique_labels():
    a = make_row("v3", **V3, report="/a/v3.ncu-rep")
    b = make_row("v3", **V3, report="/b/v3.ncu-rep", sidecar=dict(SIDE, variant="v3", shape="batch=1", shape_slug="b1"))
    with pytest.raises(UserError, match=r"not comparable \(parameters differ: v3 at batch=64.*v3 at batch=1\)"):
        comparison(a, b)
    cmp = comparison(a, b, cross=True)
    assert [v.label for v in cmp.variants] == [f"v3 [{SIDE['shape']}]", "v3 [batch=1]"]
    assert cmp.cross == [f"parameters differ: v3 at {SIDE['shape']}, v3 at batch=1"]
    assert cmp.steps[0].headline.startswith("cross comparison (batch 64 -> 1, q_heads 32 -> -, ")


def test_several_launches_of_one_run_show_the_median_one():
    rows = [make_row("v3", **dict(V3, duration_us=d), launch=i) for i, d in enumerate((3300.0, 3500.0, 3350.0))]
    cmp = comparison(make_row("v2"), *rows)
    assert cmp.variant("v3").get("duration_us") == 3350.0
    assert any("3 profiled steps" in n for n in cmp.notes)


# -- rules -----------------------------------------------------------------------------------
def _rule(rid, pct, title=None):
    return {"id": rid, "title": title or rid, "type": "OPTIMIZATION", "message": f"{rid} says", "speedup_pct": pct}


def test_rules_that_appeared_disappeared_or_changed():
    before = make_row("a", rules=[_rule("UncoalescedGlobal", 40.0), _rule("Occupancy", 30.0),
                                  _rule("SOLBottleneck", math.nan)])
    after = make_row("b", rules=[_rule("Occupancy", 10.0), _rule("DRAMBound", 12.0, "DRAM Bound"),
                                 _rule("SOLBottleneck", math.nan)])
    step = comparison(before, after).steps[0]
    assert [(c.id, c.after_pct) for c in step.rules_appeared] == [("DRAMBound", 12.0)]
    assert [(c.id, c.before_pct) for c in step.rules_disappeared] == [("UncoalescedGlobal", 40.0)]
    assert [(c.id, c.before_pct, c.after_pct) for c in step.rules_changed] == [("Occupancy", 30.0, 10.0)]
    texts = [C.rule_change_text(c) for c in step.rule_changes]
    assert "ncu rule appeared: DRAM Bound (estimated speedup 12 %)" in texts
    assert "ncu rule gone: UncoalescedGlobal (had estimated 40 %)" in texts
    assert "ncu rule Occupancy: estimated speedup 30 % -> 10 %" in texts


def test_a_split_variants_rules_are_weighted_by_each_kernels_time_and_name_their_kernel():
    rows = split_rows("v4")  # partial 3920 us, merge 22.6 us
    rows[0]["rules"] = [_rule("Occupancy", 5.0)]
    rows[1]["rules"] = [_rule("Occupancy", 25.0), _rule("AchievedOccupancy", 87.0),
                        _rule("AchievedOccupancy", 12.0)]
    cmp = comparison(make_row("v3", **V3), *rows)
    total = 3920.0 + 22.6
    hit = cmp.variant("v4").rules["Occupancy"]
    assert hit.speedup_pct == pytest.approx((5.0 * 3920.0 + 25.0 * 22.6) / total)
    assert hit.kernel == "paged_decode_v4_partial"
    assert [k for k, _, _ in hit.per_kernel] == ["paged_decode_v4_partial", "paged_decode_v4_merge"]
    merge_only = cmp.variant("v4").rules["AchievedOccupancy"]  # the merge's 87 %, not the variant's
    assert merge_only.speedup_pct == pytest.approx(87.0 * 22.6 / total)
    assert merge_only.kernel == "paged_decode_v4_merge"
    change = next(c for c in cmp.steps[0].rule_changes if c.id == "AchievedOccupancy")
    assert change.kernel == "paged_decode_v4_merge"
    assert C.rule_change_text(change).startswith("ncu rule appeared: AchievedOccupancy (in paged_decode_v4_merge)")


def test_a_single_kernel_keeps_ncus_estimate_and_names_no_kernel():
    cmp = comparison(make_row("v2", rules=[_rule("Occupancy", 30.0), _rule("Occupancy", 10.0)]),
                     make_row("v3", **V3))
    assert cmp.variant("v2").rules["Occupancy"].speedup_pct == 30.0
    assert cmp.steps[0].rule_changes[0].kernel is None


# -- provenance --------------------------------------------------------------------------------
def test_matching_provenance_gives_no_warning(v2_v3):
    assert v2_v3.warnings == []
    assert v2_v3.notes == []
    row = v2_v3.provenance[0]
    assert row.gpu == "NVIDIA H200" and row.ncu_version == "2025.3.1.0"
    assert row.clock_control == "none" and row.verified is True


@pytest.mark.parametrize("key,value,plural", [
    ("gpu", "NVIDIA H100 80GB HBM3", "GPUs"),
    ("ncu_version", "2025.1.0.0", "ncu versions"),
    ("clock_control", "base", "clock settings"),
    ("shape_slug", "b1_ctx32768_h32x8_d128_p16_fp32", "shapes"),
])
def test_mismatched_provenance_is_a_visible_warning(key, value, plural):
    other = dict(SIDE, variant="v3", **{key: value})
    cmp = comparison(make_row("v2"), make_row("v3", sidecar=other, **V3), cross=True)
    assert len(cmp.warnings) == 1
    assert cmp.warnings[0].startswith(f"Profiled with different {plural}: ")
    shown = other["shape"] if key == "shape_slug" else value
    assert f"{shown} (v3)" in cmp.warnings[0]


def test_failed_verification_is_a_warning():
    bad = dict(SIDE, variant="v3", verification={"passed": False, "rel_error": 0.3})
    cmp = comparison(make_row("v2"), make_row("v3", sidecar=bad, **V3))
    assert any("v3 failed verification" in w for w in cmp.warnings)


def test_a_report_without_sidecar_is_a_note_not_a_warning():
    cmp = comparison(make_row("v2"), make_row("v3", sidecar=None, **V3))
    assert cmp.warnings == []
    assert cmp.notes and "no provenance sidecar" in cmp.notes[0]


def test_ceiling_comes_from_the_gpu_table_or_the_sidecar():
    cmp = comparison(make_row("v2"), make_row("v3", sidecar=dict(SIDE, variant="v3", read_ceiling_tbs=4.0), **V3))
    assert cmp.variant("v2").ceiling.tbs == 4.53
    assert cmp.variant("v3").ceiling.tbs == 4.0
    # different ceilings: the sentence quotes the after one only
    bw = next(x for x in cmp.steps[0].sentences if x.startswith("achieved bandwidth"))
    assert bw.endswith("16 % of the measured 4 TB/s ceiling")


def test_unknown_gpu_has_no_ceiling():
    side = dict(SIDE, gpu="Some Future GPU")
    cmp = comparison(make_row("v2", sidecar=dict(side, variant="v2")),
                     make_row("v3", sidecar=dict(side, variant="v3"), **V3))
    assert cmp.variant("v3").ceiling is None
    assert "achieved bandwidth 434 GB/s -> 641 GB/s" in cmp.steps[0].sentences


def test_missing_metrics_are_none_and_skipped():
    cmp = comparison(make_row("a", registers_per_thread=math.nan), make_row("b", registers_per_thread=40))
    assert cmp.variant("a").get("registers_per_thread") is None
    assert not any("registers" in x for x in cmp.steps[0].sentences)


def test_labels_read_the_same_in_table_and_compare():
    """``table`` prints the label, ``compare`` its sentence form: one spelling."""
    from paprof.model.bottleneck import LABELS, UNKNOWN
    from paprof.explain.compare import BOUND_WORDS

    assert set(BOUND_WORDS) == set(LABELS) - {UNKNOWN}
    for label, words in BOUND_WORDS.items():
        assert words == label


# -- code paths --------------------------------------------------------------------------------
# A stand-in family ("scan"): the tool reads the words a family recorded with the run
# (``launch_words``) and knows no family's details or kernel names.
def _launched(variant, details=None, words=None, kernel=None, **metrics):
    side = dict(SIDE, family="scan", variant=variant, schema=2, launch_details=details or {},
                **({"launch_words": words} if words is not None else {}))
    return make_row(variant, kernel=kernel or f"scan_{variant}", sidecar=side, sm_count=132, **metrics)


FILLS = {"said": ["ran its one-pass kernel scan_whole (passes 1)"],
         "why": "the grid already fills the GPU, 512 CTAs for 132 SMs"}


def test_a_run_says_its_launch_in_its_familys_words_after_what_the_counters_say():
    """Issue 37: the launcher's words never lead the cause (a headline would look right
    because the family's own label names it); they follow it, once."""
    cmp = comparison(make_row("a", grid_size=512), _launched(
        "b", {"passes": 1}, FILLS, kernel="scan_whole", grid_size=512))
    said = [s for s in cmp.steps[0].sentences if "one-pass" in s]
    assert said == [cmp.steps[0].cause]  # the cause names it: not said twice
    assert said[0].startswith("the same work as a")
    assert said[0].endswith("(launch: b ran its one-pass kernel scan_whole (passes 1): its 512 CTAs "
                            "already fill 97 % of the 528 resident-CTA slots)")
    assert C.code_path(cmp.variant("b")) == (
        "b ran its one-pass kernel scan_whole (passes 1): the grid already fills the GPU, 512 CTAs "
        "for 132 SMs")
    assert C.code_path(cmp.variant("b"), reason=False) == "b ran its one-pass kernel scan_whole (passes 1)"


def test_the_reason_follows_the_first_clause_and_each_clause_reads_after_the_label():
    words = {"said": ["cut the rows into 66 tiles (scan_tiles)", "chose order longest"],
             "why": "66 tiles fill 132 SMs twice"}
    cmp = comparison(make_row("a", grid_size=32, waves_per_sm=0.06), _launched(
        "b", {"tiles": 66, "order": "longest"}, words, grid_size=528, duration_us=900.0))
    assert C.code_path(cmp.variant("b")) == (
        "b cut the rows into 66 tiles (scan_tiles): 66 tiles fill 132 SMs twice; b chose order longest")
    assert cmp.steps[0].cause.startswith("the grid grows 16.5x")  # the counters first (issue 37)
    assert cmp.steps[0].cause.endswith(
        "(launch: b cut the rows into 66 tiles (scan_tiles); b chose order longest)")


def test_a_run_without_words_says_its_raw_launch_details():
    cmp = comparison(make_row("a"), _launched("b", {"tile": 64, "order": "longest"}))
    assert cmp.steps[0].cause.endswith("(launch: b chose tile 64, order longest: its 2,048 CTAs already "
                                       "fill 97 % of the 2,111 resident-CTA slots)")
    assert C.code_path(cmp.variant("b")) == C.code_path(cmp.variant("b"), reason=False)


def test_nothing_recorded_nothing_said_and_kernel_names_are_not_read():
    """No words and no details (a schema-1 run, a family that gives none): no code path,
    whatever the kernel is called."""
    schema1 = comparison(make_row("a"), make_row("b", kernel="scan_nosplit"))
    assert C.code_path(schema1.variant("b")) is None
    assert schema1.steps[0].cause.startswith("the same work as a")
    bare = comparison(make_row("a"), _launched("b", kernel="scan_nosplit"))
    assert C.code_path(bare.variant("b")) is None
    assert not [s for s in bare.steps[0].sentences if "kernel" in s or "chose" in s]


def test_the_words_read_after_the_label_a_comparison_gives():
    cmp = comparison(make_row("a", grid_size=512), _launched(
        "b", {"passes": 1}, FILLS, kernel="scan_whole", grid_size=512))
    b = cmp.variant("b")
    b.label = "b@abc1234"
    assert C.code_path(b, reason=False) == "b@abc1234 ran its one-pass kernel scan_whole (passes 1)"


# -- ties ----------------------------------------------------------------------------------------
def test_a_label_won_by_a_fraction_of_a_point_is_reported_as_a_tie():
    tied = dict(dram_throughput_pct=20.0, l2_throughput_pct=76.9, issue_slots_busy_pct=77.0,
                l1_throughput_pct=30.0, bottleneck="issue-bound")
    cmp = comparison(make_row("v2"), make_row("v3", **tied))
    v3 = cmp.variant("v3")
    assert v3.tie is not None and (v3.tie.label, v3.tie.other) == ("issue-bound", "l2-bound")
    assert v3.tie.text == "issue slots 77.0 % ~ L2 throughput 76.9 %: a tie (within 1 pt)"
    assert C.verdict_words(v3) == ("issue-bound (a tie with l2-bound: issue slots 77.0 % ~ "
                                   "L2 throughput 76.9 %)")
    clear = comparison(make_row("v2"), make_row("v3", **dict(tied, issue_slots_busy_pct=80.0)))
    assert clear.variant("v3").tie is None


def test_a_runs_label_over_several_launches_is_the_median_launchs():
    launches = [make_row("v3", launch=i, duration_us=d, bottleneck=b, **{k: v for k, v in V3.items()
                if k not in ("duration_us", "bottleneck")})
                for i, (d, b) in enumerate([(3300.0, "compute-bound"), (3350.0, "dram-bound"),
                                            (3400.0, "compute-bound")])]
    cmp = comparison(make_row("v2"), *launches)
    assert cmp.variant("v3").bottleneck == "dram-bound"


def test_five_launches_show_median_and_half_range():
    from paprof.render.context import build_context

    durations = (3300.0, 3500.0, 3350.0, 3420.0, 3200.0)
    occupancy = (40.0, 41.0, 40.5, 39.0, 40.2)
    rows = [make_row("v3", launch=i, **dict(V3, duration_us=d, achieved_occupancy_pct=o))
            for i, (d, o) in enumerate(zip(durations, occupancy))]
    cmp = comparison(make_row("v2"), *rows)
    v3 = cmp.variant("v3")
    assert v3.launches == 5
    assert v3.get("duration_us") == 3350.0 and v3.spread["duration_us"] == 150.0
    assert v3.get("achieved_occupancy_pct") == 40.2 and v3.spread["achieved_occupancy_pct"] == 1.0
    assert v3.spread["grid_size"] == 0.0  # the same launch configuration each time
    assert v3.kernels[0].duration_us == 3350.0  # the median-duration launch's kernel
    assert cmp.variant("v2").spread == {} and cmp.variant("v2").launches == 1
    assert any("5 profiled steps" in n and "median" in n for n in cmp.notes)
    ctx = build_context(cmp, charts=False)
    dur = ctx.row("duration_us").cells
    assert dur[0].spread is None and "±" not in dur[0].text
    assert dur[1].text == "3.35 ms ± 150 us" and dur[1].spread == 150.0
    assert ctx.row("achieved_occupancy_pct").cells[1].text.endswith("± 1 %")
    assert "±" not in ctx.row("bottleneck").cells[1].text
    grid = ctx.row("grid_size").cells[1]
    assert grid.spread == 0.0 and "±" not in grid.text  # every launch agrees: no "± 0"


def test_the_reports_kernel_lists_group_a_programs_step_as_the_sentence_does():
    from paprof.render.run_views import variant_view

    report = "/runs/nvidia-h200/command/compiled/command.ncu-rep"
    launches = [("gemm", 100.0)] * 4 + [(f"small_{i}", 10.0 + i) for i in range(5)]
    rows = [make_row("compiled", kernel=name, report=report, duration_us=us, grid_size=132,
                     block_size=384) for name, us in launches]
    view = variant_view(comparison(make_row("eager", **V3), *rows).variant("compiled"))
    assert view.kernels_words == "9 launches of 6 kernels"
    listed = view.listed
    assert [k.name for k in listed] == ["gemm x4", "small_4", "small_3", "small_2", "2 more kernels"]
    assert listed[0].duration == "400 us" and listed[0].grid == "132"
    assert listed[-1].duration == "21 us" and listed[-1].grid == ""  # two shapes: none shown
    # a split variant of two kernels: each launch, as before
    two = variant_view(comparison(make_row("v3", **V3), *split_rows("v4")).variant("v4"))
    assert two.kernels_words == "2 kernels" and [k.name for k in two.listed] == [
        "paged_decode_v4_partial", "paged_decode_v4_merge"]
