"""The cause in words first (``paprof.explain.causes``), on synthetic rows: each
rule fires on the counters it reads and stays quiet without them. The shipped H200 runs'
causes are checked in test_compare_h200.py."""

from __future__ import annotations

import math

import pytest

from paprof.explain import causes

from helpers import SIDE, V3, comparison, make_row, recorded

# a latency-bound kernel on an H200-like GPU with the traffic counters of the default preset
BASE = dict(
    duration_us=1000.0, dram_bytes=2.0e9, dram_throughput_pct=40.0, l1_throughput_pct=30.0,
    l2_throughput_pct=30.0, sm_throughput_pct=40.0, issue_slots_busy_pct=40.0,
    achieved_bandwidth_gbs=2000.0, instructions_executed=1.0e9, l1_global_load_bytes=4.0e9,
    l2_to_l1_bytes=2.0e9, global_load_instructions=8.0e6, l1_global_load_hit_rate_pct=10.0,
    shared_load_wavefronts=0.0, shared_store_wavefronts=0.0, shared_load_instructions=0.0,
    shared_store_instructions=0.0, stall_barrier=0.0, stall_long_scoreboard=6.0,
    warps_active_per_sm=16.0, sm_count=132, grid_size=512, waves_per_sm=0.97,
    bottleneck="latency-bound",
)


def step(before: dict, after: dict, **kw):
    cmp = comparison(make_row("a", **dict(BASE, **before)), make_row("b", **dict(BASE, **after)), **kw)
    return cmp.steps[0]


# -- drivers -------------------------------------------------------------------------------
def test_instructions_that_fall_at_a_busy_issue_level_are_the_cause():
    s = step({"issue_slots_busy_pct": 60.0}, {"instructions_executed": 1.6e8, "duration_us": 400.0})
    assert s.cause.startswith("warp instructions fall 6.25x, 1 G -> 160 M (0.5 -> 0.08 "
                              "instructions per DRAM byte)")
    assert s.cause.endswith("for the same DRAM bytes (2 GB)")
    assert s.sentences[0] == s.cause


def test_a_change_under_the_factor_or_against_the_time_is_no_cause():
    # the moved counters' sentence (``traffic``); the cause then falls back to the busiest
    # unit's work (these rows have no warp-state counters) and says what is missing
    small = step({}, {"instructions_executed": 0.85e9, "duration_us": 800.0})  # 1.18x
    assert small.traffic is None and small.limit in small.sentences
    assert small.cause.startswith("less DRAM work: DRAM busy time at its peak rate 400 us -> 320 us")
    assert "no WarpStateStats, SchedulerStats or InstructionStats counters" in small.cause
    wrong_way = step({}, {"instructions_executed": 0.25e9, "duration_us": 1300.0})  # slower
    assert wrong_way.traffic is None


def test_a_busy_level_outweighs_a_bigger_change_at_an_idle_one():
    # L2->SM falls 4x with L2 at 10 %; instructions fall 2x with issue slots at 80 %
    idle_l2 = {"l2_to_l1_bytes": 0.5e9, "instructions_executed": 0.5e9, "duration_us": 500.0,
               "l2_throughput_pct": 10.0, "issue_slots_busy_pct": 80.0}
    s = step({"l2_throughput_pct": 10.0, "issue_slots_busy_pct": 80.0}, idle_l2)
    assert s.cause.startswith("warp instructions fall 2x")
    busy_l2 = dict(idle_l2, l2_throughput_pct=90.0, issue_slots_busy_pct=20.0)
    s = step({"l2_throughput_pct": 90.0, "issue_slots_busy_pct": 20.0}, busy_l2)
    assert s.cause.startswith("L2->SM traffic falls 4x, 2 GB -> 500 MB (1 -> 0.25 bytes per DRAM byte)")


def test_a_second_driver_is_named_when_it_weighs_half_as_much():
    s = step({"issue_slots_busy_pct": 60.0, "l1_throughput_pct": 60.0},
             {"instructions_executed": 0.25e9, "l1_global_load_bytes": 1.0e9, "duration_us": 300.0})
    assert s.cause.startswith("SM<-L1 global-load traffic falls 4x, 4 GB -> 1 GB") or \
        s.cause.startswith("warp instructions fall 4x")
    assert "and warp instructions 4x" in s.cause or "and SM<-L1 global-load traffic 4x" in s.cause
    alone = step({"issue_slots_busy_pct": 60.0, "l1_throughput_pct": 5.0},
                 {"instructions_executed": 0.25e9, "l1_global_load_bytes": 3.0e9, "duration_us": 300.0})
    assert "SM<-L1" not in alone.cause  # 1.33x at an idle L1: too light to name


def test_the_same_traffic_at_two_levels_is_said_once_at_the_outer_one():
    both = step({"l2_throughput_pct": 60.0, "l1_throughput_pct": 60.0},
                {"l1_global_load_bytes": 1.0e9, "l2_to_l1_bytes": 0.5e9, "duration_us": 400.0})
    assert both.cause.startswith("L2->SM traffic falls 4x, 2 GB -> 500 MB (1 -> 0.25 bytes per "
                                 "DRAM byte; and SM<-L1 global-load traffic with it, 4 GB -> 1 GB)")
    l1_only = step({"l1_throughput_pct": 60.0, "l1_global_load_hit_rate_pct": 90.0},
                   {"l1_global_load_bytes": 0.5e9, "duration_us": 400.0})
    assert l1_only.cause.startswith("SM<-L1 global-load traffic falls 8x, 4 GB -> 500 MB (2 -> 0.25 "
                                    "bytes per DRAM byte; 90 % L1 hits: the same bytes re-read)")
    misses = step({"l1_throughput_pct": 60.0}, {"l1_global_load_bytes": 0.5e9, "duration_us": 400.0})
    assert "re-read" not in misses.cause  # 10 % hits: not re-reads


def test_for_the_same_dram_bytes_only_when_they_stayed():
    same = step({"issue_slots_busy_pct": 60.0}, {"instructions_executed": 0.2e9, "duration_us": 400.0,
                                                 "dram_bytes": 2.05e9})
    assert "for the same DRAM bytes (2.05 GB)" in same.cause
    halved = step({"issue_slots_busy_pct": 60.0}, {"instructions_executed": 0.2e9, "duration_us": 400.0,
                                                   "dram_bytes": 1.0e9})
    assert "same DRAM bytes" not in halved.cause


def test_redundant_work_that_kept_a_level_busy_while_dram_idled():
    idle = {"dram_throughput_pct": 0.9, "l1_throughput_pct": 66.0, "issue_slots_busy_pct": 55.0,
            "l1_global_load_hit_rate_pct": 97.0}
    s = step(idle, {"l1_global_load_bytes": 0.2e9, "instructions_executed": 0.2e9, "duration_us": 200.0,
                    "dram_throughput_pct": 5.0, "l1_throughput_pct": 15.0})
    assert s.cause.endswith("a's redundant work, which kept L1 and the SM's issue slots busy "
                            "(66 %, 55 % of peak) while DRAM idled (0.9 % of peak), is gone")
    busy_dram = step(dict(idle, dram_throughput_pct=40.0),
                     {"l1_global_load_bytes": 0.2e9, "instructions_executed": 0.2e9, "duration_us": 200.0})
    assert "redundant" not in busy_dram.cause
    # a tensor-core kernel idles DRAM by design: the instructions it sheds are not "redundant work"
    tensor = step(dict(idle, tensor_pipe_pct=64.7),
                  {"l1_global_load_bytes": 0.2e9, "instructions_executed": 0.2e9, "duration_us": 200.0,
                   "dram_throughput_pct": 5.0, "l1_throughput_pct": 15.0, "tensor_pipe_pct": 76.6})
    assert "for the same DRAM bytes" in tensor.cause and "redundant" not in tensor.cause


def test_shared_memory_and_barriers_that_vanish_are_named_when_they_were_real_work():
    before = {"shared_load_wavefronts": 6e7, "shared_store_wavefronts": 3e7,
              "shared_load_instructions": 3e7, "shared_store_instructions": 3e7,  # 6 % of the instructions
              "stall_barrier": 2.0, "issue_slots_busy_pct": 60.0}
    after = {"instructions_executed": 0.2e9, "duration_us": 300.0}
    s = step(before, after)
    assert s.cause.endswith("; the 90 M shared-memory wavefronts and the barrier stalls (2 cycles per "
                            "instruction, 25 % of the stall cycles) are gone")
    few = dict(before, shared_load_instructions=2e6, shared_store_instructions=2e6, stall_barrier=0.05)
    s = step(few, after)  # 0.4 % of the instructions, 0.8 % of the stall cycles
    assert "shared-memory" not in s.cause and "barrier" not in s.cause
    appear = step({}, dict(before, duration_us=2000.0))  # slower: they appear
    assert appear.cause.endswith("the barrier stalls (2 cycles per instruction, 25 % of the stall "
                                 "cycles) appear")


# -- filling the GPU, reaching DRAM's ceiling, as fast ------------------------------------------
def test_a_grid_that_left_slots_empty_and_grew_is_the_cause():
    s = step({"grid_size": 32, "waves_per_sm": 0.06}, {"grid_size": 512, "waves_per_sm": 0.97,
                                                       "duration_us": 200.0})
    assert s.cause.startswith("the grid grows 16x, 32 -> 512 CTAs, filling 97 % of the 528 "
                              "resident-CTA slots instead of 6 % (0.06 -> 0.97 waves)")
    full = step({"grid_size": 1024, "waves_per_sm": 1.5}, {"grid_size": 4096, "waves_per_sm": 6.0,
                                                           "duration_us": 700.0})
    assert full.cause is None or "the grid grows" not in full.cause  # it was full already


def test_reaching_drams_ceiling_with_the_bytes_each_warp_keeps_in_flight():
    after = {"dram_throughput_pct": 88.0, "bottleneck": "dram-bound", "duration_us": 450.0,
             "achieved_bandwidth_gbs": 4400.0, "warps_active_per_sm": 8.0}
    s = step({}, after)
    # 4,400 GB/s over 8 warps per SM against 2,000 over 16: 4.4x per warp
    assert s.cause == ("DRAM throughput rises 40 % -> 88 % of peak (4.4 TB/s, 97.1 % of the measured "
                       "4.53 TB/s ceiling): each resident warp moves 4.4x the DRAM bytes per second "
                       "(16 -> 8 warps per SM), so by Little's law it keeps 4.4x the bytes in flight")
    assert "bytes in flight" not in step({}, dict(after, warps_active_per_sm=math.nan)).cause
    assert step({"dram_throughput_pct": 75.0, "bottleneck": "dram-bound"}, after).traffic is None
    assert step({}, dict(after, bottleneck="l1-bound")).traffic is None


def test_as_fast_says_whether_the_work_stayed_and_the_code_path_with_the_slots():
    s = step({}, {"duration_us": 1005.0})
    assert s.cause == ("the same work as a: warp instructions 1 G -> 1 G, L2->SM traffic 2 GB -> 2 GB, "
                       "DRAM traffic 2 GB -> 2 GB")
    moved = step({}, {"duration_us": 1005.0, "instructions_executed": 0.5e9})
    assert moved.cause.startswith("the work moved but not the time: warp instructions 1 G -> 500 M")
    side = dict(SIDE, variant="b", schema=2, launch_details={"passes": 1},
                launch_words={"said": ["ran its one-pass kernel k_whole (passes 1)"], "why": "a reason"})
    cmp = comparison(make_row("a", **BASE), make_row("b", sidecar=side, kernel="k_whole",
                                                    **dict(BASE, duration_us=1001.0)))
    assert cmp.steps[0].cause == ("the same work as a: warp instructions 1 G -> 1 G, L2->SM traffic 2 GB -> "
                                  "2 GB, DRAM traffic 2 GB -> 2 GB (launch: b ran its one-pass kernel k_whole "
                                  "(passes 1): its 512 CTAs already fill 97 % of the 528 resident-CTA slots)")


def test_a_slower_step_whose_grid_grew_says_though():
    s = step({"l2_throughput_pct": 50.0}, {"l2_to_l1_bytes": 8.0e9, "grid_size": 8192, "waves_per_sm": 1.94,
                                           "duration_us": 1300.0})
    assert s.cause.startswith("L2->SM traffic rises 4x, 2 GB -> 8 GB")
    assert s.cause.endswith(", though the grid grows 16x (512 -> 8,192 CTAs, 0.97 -> 1.94 waves)")


def test_no_counter_no_cause_and_no_variant_name_in_the_rules():
    """A family of its own, other ids: the same counters give the same words."""
    bare = {k: math.nan for k in ("instructions_executed", "l1_global_load_bytes", "l2_to_l1_bytes")}
    s = step(bare, dict(bare, duration_us=500.0))
    assert s.traffic is None  # nothing recorded moved
    nothing = dict(bare, dram_bytes=math.nan, achieved_bandwidth_gbs=math.nan)
    assert step(nothing, dict(nothing, duration_us=1001.0)).traffic is None  # as fast, no work recorded
    side = dict(SIDE, family="softmax")
    mine = comparison(make_row("naive", sidecar=dict(side, variant="naive"), **dict(BASE, issue_slots_busy_pct=60.0)),
                      make_row("fused", sidecar=dict(side, variant="fused"),
                               **dict(BASE, instructions_executed=1.6e8, duration_us=400.0)))
    ours = step({"issue_slots_busy_pct": 60.0}, {"instructions_executed": 1.6e8, "duration_us": 400.0})
    assert mine.steps[0].cause == ours.cause


# -- what limits it now -----------------------------------------------------------------------
def test_the_limit_follows_the_label_and_its_counters():
    dram = step({}, {"bottleneck": "dram-bound", "dram_throughput_pct": 90.0, "achieved_bandwidth_gbs": 4200.0})
    assert dram.limit == ("b is limited by DRAM bandwidth now: 90 % of peak, 4.2 TB/s (92.7 % of the "
                          "measured 4.53 TB/s ceiling): only fewer DRAM bytes make it faster")
    short = step({}, {"bottleneck": "dram-bound", "dram_throughput_pct": 75.0, "achieved_bandwidth_gbs": 3500.0})
    assert short.limit.endswith("(77.3 % of the measured 4.53 TB/s ceiling)")
    launch = step({}, {"bottleneck": "occupancy/launch-bound", "grid_size": 32, "waves_per_sm": 0.06})
    assert launch.limit == "b is limited by its launch now: 32 CTAs for 132 SMs leave 100 SMs without work"
    warps = step({}, {"bottleneck": "occupancy/launch-bound", "waves_per_sm": 0.32, "achieved_occupancy_pct": 23.8,
                      "warps_active_per_sm": 15.2})
    assert warps.limit.startswith("b is limited by too few warps now: 512 CTAs fill 32 % of the 1,600 "
                                  "resident-CTA slots (0.32 waves), 15.2 warps per SM (23.8 % achieved occupancy)")
    latency = step({}, {"stall_barrier": 3.0, "issue_active_pct": 40.0, "top_stall_reason": "long_scoreboard",
                        "top_stall_cycles": 6.0})
    assert latency.limit == ("b is limited by latency now: no unit passes 40 % of peak (DRAM); warps wait "
                             "6 cycles per issued instruction on long scoreboard and 3 on barriers, and "
                             "the schedulers issue in 40 % of active cycles")
    cache = step({}, {"bottleneck": "l1-bound", "l1_throughput_pct": 66.3, "dram_throughput_pct": 0.9})
    assert cache.limit == "b is limited by L1/TEX throughput now: 66.3 % of peak, DRAM 0.9 %"
    issue = step({}, {"bottleneck": "compute-bound", "issue_slots_busy_pct": 63.0, "instructions_executed": 2.57e9})
    assert issue.limit == ("b is limited by instruction issue now: issue slots 63 % of peak, 2.57 G warp "
                           "instructions (1.28 per DRAM byte)")
    # a tensor-core kernel: the tensor pipe busier than issue decides (cuDNN's flash kernel on the H200)
    tensor = step({}, {"bottleneck": "compute-bound", "issue_slots_busy_pct": 44.2, "tensor_pipe_pct": 77.0,
                       "fma_pipe_pct": 20.0, "instructions_executed": 2.47e9})
    assert tensor.limit == "b is limited by its tensor pipe now: 77 % of peak (issue slots 44.2 %)"
    # ... and issue busier than every math pipe keeps the issue sentence
    busy = step({}, {"bottleneck": "compute-bound", "issue_slots_busy_pct": 63.0, "fma_pipe_pct": 40.0})
    assert busy.limit.startswith("b is limited by instruction issue now: issue slots 63 % of peak")


# -- what would move it next ------------------------------------------------------------------
def _rule(rid, pct, message="A message. More.", kind="OPTIMIZATION", title=None):
    return {"id": rid, "title": title or rid, "type": kind, "message": message, "speedup_pct": pct}


def test_next_takes_ncus_estimates_that_bear_on_the_label_largest_first():
    rules = [_rule("AchievedOccupancy", 40.0), _rule("TheoreticalOccupancy", 25.0),
             _rule("HighPipeUtilization", 80.0, "All compute pipelines are under-utilized. Or."),
             _rule("CPIStall", 0.5), _rule("IssueSlotUtilization", 30.0, kind="OK")]
    cmp = comparison(make_row("a", **BASE), make_row("b", rules=rules, **dict(
        BASE, bottleneck="occupancy/launch-bound", achieved_occupancy_pct=24.0,
        theoretical_occupancy_pct=50.0)))
    said = cmp.steps[0].next_move
    assert said == ("ncu's estimates for what would move b next: AchievedOccupancy, up to 40 % of its "
                    "time (achieved occupancy 24 % of a theoretical 50 %); TheoreticalOccupancy, up to "
                    "25 % of its time (theoretical occupancy 50 %, limited by the blocks-per-SM limit "
                    "(16 blocks per SM))")
    # no rule bears on latency-bound here: the largest estimates then, whatever they are about
    other = comparison(make_row("a", **BASE), make_row("b", rules=[rules[1], rules[2]], **BASE))
    assert other.steps[0].next_move.startswith("ncu's estimates for what would move b next, none "
                                               "of them about its latency-bound limit: "
                                               "HighPipeUtilization, up to 80 % of its time "
                                               "(All compute pipelines are under-utilized.)")
    none = comparison(make_row("a", **BASE), make_row("b", rules=[_rule("CPIStall", 0.5)], **BASE))
    assert none.steps[0].next_move is None  # under 1 %: not worth a sentence


def test_the_compression_estimate_is_never_a_move():
    # L2 compression pays only for allocations made compressible through the driver's
    # virtual-memory API: advice the kernel's author cannot act on, whatever ncu estimates
    message = ("Out of the 1147040.0 bytes sent to the L2 Compression unit only 0.00% were "
               "successfully compressed. To increase this success rate, ...")
    cmp = comparison(make_row("a", **BASE), make_row("b", rules=[_rule("MemoryL2Compression", 90.1, message)],
                                                     **dict(BASE, bottleneck="dram-bound", dram_throughput_pct=90.2)))
    assert cmp.steps[0].next_move is None


def test_a_split_variants_rules_name_their_kernel():
    from helpers import split_rows
    rows = split_rows()
    rows[0]["rules"] = [_rule("CPIStall", 45.0)]
    rows[0]["bottleneck"] = "latency-bound"
    cmp = comparison(make_row("v3", **V3), *rows)
    assert "CPIStall in paged_decode_v4_partial, up to " in cmp.steps[0].next_move


def test_the_rules_name_no_variant_and_no_family():
    """Only the documentation may quote the shipped runs: no string the code compares or
    prints names a variant or a family."""
    import ast
    import inspect

    tree = ast.parse(inspect.getsource(causes))
    prose = {id(node.value) for node in ast.walk(tree)
             if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)}
    code = [node.value for node in ast.walk(tree) if isinstance(node, ast.Constant)
            and isinstance(node.value, str) and id(node) not in prose]
    for word in ("v1", "v2", "v3", "v4", "v5", "v6", "handbook", "baseline", "paged", "softmax"):
        assert not [c for c in code if word in c], word


# -- math pipes ----------------------------------------------------------------------------
def test_work_moving_from_the_fp32_pipe_to_the_tensor_cores_is_said_first():
    before = {"fma_pipe_pct": 28.1, "tensor_pipe_pct": 0.0, "fp64_pipe_pct": 0.0}
    after = {"fma_pipe_pct": 18.1, "tensor_pipe_pct": 28.6, "fp64_pipe_pct": 0.0,
             "instructions_executed": 1.0e8, "duration_us": 100.0}
    s = step(before, after)
    assert s.cause.startswith("the math moves from the FP32 (FMA) pipe to the tensor cores "
                              "(tensor cores 0 % -> 28.6 % of peak, FP32 (FMA) pipe 28.1 % -> 18.1 %); "
                              "with warp instructions down 10x")
    back = step(after, dict(before, duration_us=1500.0))  # and the other way, slower
    assert back.cause.startswith("the math moves from the tensor cores to the FP32 (FMA) pipe")


def test_no_pipe_shift_when_both_use_the_same_pipes_or_the_counters_are_absent():
    same = step({"fma_pipe_pct": 20.0, "tensor_pipe_pct": 30.0},
                {"fma_pipe_pct": 10.0, "tensor_pipe_pct": 40.0, "instructions_executed": 1.0e8,
                 "duration_us": 100.0})
    assert "math moves" not in (same.cause or "")
    idle = step({"fma_pipe_pct": 2.0, "tensor_pipe_pct": 0.0},  # nothing busy before
                {"fma_pipe_pct": 1.0, "tensor_pipe_pct": 30.0, "instructions_executed": 1.0e8,
                 "duration_us": 100.0})
    assert "math moves" not in (idle.cause or "")
    absent = step({}, {"instructions_executed": 1.0e8, "duration_us": 100.0})
    assert "math moves" not in (absent.cause or "")


def test_the_shipped_flash_runs_say_the_fp32_pipe_gives_way_to_the_tensor_cores():
    from paprof.explain.compare import compare_reports

    root = recorded("h200-flash_fwd") / "nvidia-h200" / "flash_fwd"
    reports = [next((root / v).glob("*.ncu-rep")) for v in ("handbook", "mma")]
    (s,) = compare_reports(reports, cross=True).steps  # fp32 against bf16: a cross comparison
    # the cause: the math moved from FFMA to the tensor cores' HMMA (issue 37)
    assert s.cause.startswith("warp-level tensor-core MMA (HMMA, IMMA) instead of FP32 math (FFMA, "
                              "FADD, FMUL): FP32 math (FFMA, FADD, FMUL) 79.8 G -> 1.57 G, warp-level "
                              "tensor-core MMA (HMMA, IMMA) 0 -> 1.07 G (instructions issued -182 ms")
    assert s.traffic.startswith("the math moves from the FP32 (FMA) pipe to the tensor cores (tensor cores 0 % -> ")
    assert "with warp instructions down 11.9x" in s.traffic


def test_mma_to_wgmma2_opens_with_the_tensor_pipe_not_the_loads_tma_hides():
    """Issue 26: mma -> wgmma2 opened with "SM<-L1 global-load traffic falls 257x" (TMA's
    copies are not loads); the mechanism is fewer, larger tensor-core instructions."""
    from paprof.explain.compare import compare_reports

    root = recorded("h200-flash_fwd") / "nvidia-h200" / "flash_fwd"
    (s,) = compare_reports([next((root / v).glob("*.ncu-rep")) for v in ("mma", "wgmma2")]).steps
    assert s.speedup == pytest.approx(2.96, abs=0.01)
    assert s.cause.startswith("warpgroup tensor-core MMA (HGMMA, wgmma) instead of warp-level "
                              "tensor-core MMA (HMMA, IMMA): warp-level tensor-core MMA (HMMA, IMMA) "
                              "1.07 G -> 0, warpgroup tensor-core MMA (HGMMA, wgmma) 0 -> 67.1 M; fewer "
                              "integer and address arithmetic")
    assert "global-load" not in s.cause and "L1" not in s.cause.split(";")[0]
    terms = s.decomposition.terms
    assert sum(t.us for t in terms) == pytest.approx(s.decomposition.delta_us, rel=1e-9)


def test_cache_traffic_falling_to_the_dram_bytes_says_each_byte_reaches_the_sms_once():
    s = step({"l2_throughput_pct": 90.0}, {"l2_to_l1_bytes": 2.0e9, "duration_us": 400.0},)
    assert "each byte" not in (s.cause or "")  # 1 -> 1 per DRAM byte: nothing was re-read before
    four = step({"l2_to_l1_bytes": 8.0e9, "l2_throughput_pct": 90.0},
                {"l2_to_l1_bytes": 2.0e9, "duration_us": 400.0})
    assert "(4 -> 1 bytes per DRAM byte: each byte read from DRAM now reaches the SMs once, not 4 times" in four.cause
    back = step({"l2_to_l1_bytes": 2.0e9, "l2_throughput_pct": 90.0},
                {"l2_to_l1_bytes": 8.0e9, "duration_us": 1500.0})
    assert "now reaches the SMs 4 times, not once" in back.cause
    two = step({"l2_to_l1_bytes": 8.0e9, "l2_throughput_pct": 90.0},
               {"l2_to_l1_bytes": 4.0e9, "duration_us": 600.0})
    assert "each byte" not in two.cause  # 4 -> 2: fewer re-reads, not none


def test_a_report_of_ncus_basic_set_is_split_by_its_busiest_unit_and_says_what_it_lacks():
    """ncu without --set collects SpeedOfLight, LaunchStats and Occupancy only (no stall,
    scheduler or instruction counters): the step is split by the slower kernel's busiest
    unit, its work (throughput x duration) and its throughput, which add up to the
    difference exactly; the line says which counters are missing instead of guessing."""
    from paprof.model.decompose import decompose

    bare = {k: math.nan for k in ("instructions_executed", "l1_global_load_bytes", "l2_to_l1_bytes",
                                  "dram_bytes", "achieved_bandwidth_gbs")}
    slow = dict(bare, duration_us=10_777.0, l1_throughput_pct=99.1, dram_throughput_pct=0.5,
                l2_throughput_pct=1.7, sm_throughput_pct=11.8)
    fast = dict(bare, duration_us=1_398.0, l1_throughput_pct=93.3, dram_throughput_pct=0.7,
                l2_throughput_pct=5.2, sm_throughput_pct=91.2)
    cmp = comparison(make_row("a", **slow), make_row("b", **fast))
    s = cmp.steps[0]
    assert s.cause.startswith("less L1/TEX work: L1/TEX busy time at its peak rate 10.7 ms -> 1.3 ms "
                              "(8.19x less) (L1/TEX work -9.66 ms; net -9.38 ms) (no ")
    assert s.cause.endswith("(no WarpStateStats, SchedulerStats or InstructionStats counters in these "
                            "reports: what the unit did more or less of is not measured; ncu --set "
                            "full, or paprof's default preset, records it)")
    dec = decompose(*cmp.variants)
    assert [t.key for t in dec.terms] == ["unit:work", "unit:busy"]
    assert sum(t.us for t in dec.terms) == pytest.approx(1_398.0 - 10_777.0, rel=1e-9)
