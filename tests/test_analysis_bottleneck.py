"""The bottleneck rules: factory rows -> labels and evidence."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import math

import pytest

from paprof.model import bottleneck as B
from paprof.model.bottleneck import Thresholds, classify

from helpers import make_metrics


def label(**kw):
    return classify(make_metrics(**kw))[0]


def test_high_dram_is_dram_bound_with_the_number_as_evidence():
    name, evidence = classify(make_metrics(dram_pct=92, sm_pct=20))
    assert name == "dram-bound"
    assert "DRAM throughput 92.0 % of peak" in evidence[0]


@pytest.mark.parametrize("dram, expected", [(70.0, "dram-bound"), (69.9, "latency-bound")])
def test_dram_threshold_is_inclusive(dram, expected):
    assert label(dram_pct=dram) == expected


def test_memory_throughput_alone_is_never_dram_evidence():
    # A tensor-core GEMM: Memory % 95 from L1/shared traffic, DRAM idle.
    name, evidence = classify(make_metrics(memory_pct=95, dram_pct=8, tensor_pct=90))
    assert name == "compute-bound"
    assert not any("Memory" in e and "throughput" in e.lower() and "95" in e for e in evidence)
    # Memory % high with every unit it summarises low cannot make a bound label either.
    assert label(memory_pct=95) == "latency-bound"


def test_l1_near_peak_with_dram_low_is_cache_bound():
    name, evidence = classify(make_metrics(l1_pct=92, sm_pct=88, dram_pct=3))
    assert name == "l1-bound"  # the unit at its limit: L1, not L2 (issue 37)
    assert evidence[0].startswith("L1/TEX throughput 92.0 %")
    assert any("DRAM throughput 3.0 %" in e for e in evidence)


def test_lsu_pipe_near_peak_is_cache_bound():
    assert label(lsu_pct=80) == "l1-bound"


def test_streaming_kernel_with_l2_slightly_above_dram_stays_dram_bound():
    assert label(dram_pct=85, l2_pct=88) == "dram-bound"


def test_cache_far_busier_than_a_busy_dram_wins():
    name, evidence = classify(make_metrics(dram_pct=72, l1_pct=95))
    assert name == "l1-bound"
    assert any("not the limiter" in e for e in evidence)


@pytest.mark.parametrize("pipe", ["fma_pct", "alu_pct", "tensor_pct"])
def test_a_compute_pipe_near_peak_is_compute_bound(pipe):
    assert label(**{pipe: 85}) == "compute-bound"


def test_issue_slots_near_peak_with_no_pipe_near_its_own_is_issue_bound():
    # the schedulers issue nearly every cycle, no pipe near its peak: the limit is issue
    # (the handbook of paged_decode: issue slots 63 %, FP32 2 %; issue 37)
    name, evidence = classify(make_metrics(issue_pct=85, fma_pct=5))
    assert name == "issue-bound" and evidence[0].startswith("issue slots 85.0 %")


def test_sm_throughput_stands_in_when_no_pipe_was_recorded():
    row = make_metrics(sm_pct=85, fma_pct=None, alu_pct=None, tensor_pct=None,
                       issue_pct=None, fp64_pipe_pct=None, xu_pipe_pct=None)
    assert classify(row)[0] == "compute-bound"


def test_grid_smaller_than_the_gpu_is_launch_bound_first():
    name, evidence = classify(make_metrics(grid=64, dram_pct=20))
    assert name == "occupancy/launch-bound"
    assert "grid of 64 blocks for 132 SMs: 68 SMs get no work" in evidence[0]


def test_under_one_wave_with_no_unit_near_peak_is_occupancy_bound():
    name, evidence = classify(make_metrics(waves=0.48, grid=2048, dram_pct=55))
    assert name == "occupancy/launch-bound"
    assert "0.48 waves per SM" in evidence[0]


def test_under_one_wave_but_dram_saturated_is_dram_bound():
    # v3 in the sources: 512 CTAs, ~5 per SM, DRAM 84.9 %.
    assert label(waves=0.78, grid=512, dram_pct=84.9) == "dram-bound"


def test_very_low_achieved_occupancy_is_occupancy_bound():
    assert label(occ_pct=8) == "occupancy/launch-bound"


def test_everything_well_under_peak_with_enough_blocks_is_latency_bound():
    name, evidence = classify(make_metrics(dram_pct=40, l2_pct=45))
    assert name == "latency-bound"
    assert "busiest is L2 throughput at 45.0 %" in evidence[0]
    assert any("long scoreboard" in e for e in evidence)


def test_no_speed_of_light_metrics_is_unknown_naming_the_section():
    row = make_metrics(dram_pct=None, sm_pct=None, l1_pct=None, l2_pct=None)
    name, evidence = classify(row)
    assert name == "unknown"
    assert "SpeedOfLight" in evidence[0] and "dram_throughput_pct" in evidence[0]


def test_a_missing_decision_input_is_named_in_the_evidence():
    name, evidence = classify(make_metrics(dram_pct=92, lsu_pct=None))
    assert name == "dram-bound"
    assert any(e.startswith("not recorded: lsu_pipe_pct") for e in evidence)


def test_rule_messages_that_decided_are_quoted():
    rules = [
        {"id": "SOLBottleneck", "type": "WARNING", "speedup_pct": math.nan,
         "message": "The memory is more heavily utilized than Compute: look at the "
                    "@section:MemoryWorkloadAnalysis:Memory Workload Analysis@ section. "
                    "Second sentence."},
        {"id": "SharedMemoryConflicts", "type": "OPTIMIZATION", "message": "Unrelated."},
    ]
    name, evidence = classify(make_metrics(dram_pct=90, rules=rules))
    assert name == "dram-bound"
    quoted = [e for e in evidence if e.startswith("ncu ")]
    assert quoted == ["ncu SOLBottleneck: The memory is more heavily utilized than Compute: "
                      "look at the Memory Workload Analysis section."]


def test_thresholds_are_one_dataclass_and_change_the_label():
    assert label(dram_pct=92) == "dram-bound"
    strict = Thresholds(dram_bound_pct=95)
    assert classify(make_metrics(dram_pct=92), strict)[0] == "latency-bound"


def test_every_threshold_field_has_a_docstring():
    tree = ast.parse(inspect.getsource(Thresholds))
    body = tree.body[0].body
    documented = {
        stmt.target.id for stmt, after in zip(body, body[1:])
        if isinstance(stmt, ast.AnnAssign) and isinstance(after, ast.Expr)
        and isinstance(after.value, ast.Constant) and isinstance(after.value.value, str)
    }
    assert documented == {f.name for f in dataclasses.fields(Thresholds)}


def test_every_label_is_one_of_the_documented_ones():
    rows = [make_metrics(dram_pct=92), make_metrics(l1_pct=90), make_metrics(l2_pct=90),
            make_metrics(fma_pct=90), make_metrics(issue_pct=90), make_metrics(), make_metrics(grid=10),
            make_metrics(dram_pct=None, sm_pct=None, l1_pct=None, l2_pct=None)]
    assert {classify(r)[0] for r in rows} == set(B.LABELS)


def test_classify_accepts_a_pandas_series():
    pd = pytest.importorskip("pandas")
    assert classify(pd.Series(make_metrics(dram_pct=92)))[0] == "dram-bound"


def test_l2_busier_than_dram_but_missing_in_l2_is_dram_traffic():
    # v5 on the H200: DRAM 75 %, L2 87.5 % with a 0.5 % L2 hit rate.
    row = make_metrics(dram_pct=75.1, l2_pct=87.5, l2_hit_rate_pct=0.5,
                       achieved_bandwidth_gbs=3612.2)
    name, evidence = classify(row)
    assert name == "dram-bound"
    assert evidence[0] == "DRAM throughput 75.1 % of peak (3,612 GB/s), at or above 70 %"
    assert evidence[1] == ("L2 throughput 87.5 % is that DRAM traffic passing through "
                           "(L2 hit rate 0.5 %)")


def test_l2_serving_reuse_out_ranks_a_busy_dram():
    assert label(dram_pct=72, l2_pct=95, l2_hit_rate_pct=80) == "l2-bound"
    assert label(dram_pct=72, l2_pct=95, l2_hit_rate_pct=None) == "l2-bound"


def test_cache_and_compute_marks_follow_ncus_sixty_percent_line():
    assert label(l1_pct=60) == "l1-bound"
    assert label(l1_pct=59.9) == "latency-bound"
    assert label(issue_pct=62.5) == "issue-bound"


def test_ncus_notes_about_its_own_collection_are_not_evidence():
    rules = [{"id": "CPIStall", "type": "WARNING", "speedup_pct": math.nan,
              "message": "The optional metric smsp__pcsamp_sample_count could not be found."},
             {"id": "CPIStall", "type": "OPTIMIZATION", "speedup_pct": 35.7,
              "message": "On average, each warp spends 9.6 cycles stalled. More."}]
    _, evidence = classify(make_metrics(rules=rules))
    assert [e for e in evidence if e.startswith("ncu ")] == [
        "ncu CPIStall: On average, each warp spends 9.6 cycles stalled."]


@pytest.mark.parametrize("pipe", ["tensor_pct", "fma_pct", "alu_pct", "fp64_pipe_pct"])
def test_a_math_pipe_near_peak_is_compute_bound_even_with_l1_busier(pipe):
    """A tuned Hopper GEMM: tensor pipe ~80 %, L1/shared ~95 % (its operand path)."""
    name, evidence = classify(make_metrics(l1_pct=95, lsu_pct=70, dram_pct=10, **{pipe: 80}))
    assert name == "compute-bound"
    assert evidence[0].endswith("80.0 % of peak (at or above 60 %)")
    both = next(e for e in evidence if "L1/TEX throughput 95.0 %" in e)
    assert "LSU pipe 70.0 %" in both and "operands" in both


def test_l1_near_peak_without_a_busy_math_pipe_stays_cache_bound():
    assert label(l1_pct=95, tensor_pct=50) == "l1-bound"
    assert label(l1_pct=95, issue_pct=70) == "l1-bound"  # issue slots are not a math pipe


def test_l2_busier_than_the_math_pipe_still_wins():
    assert label(l2_pct=95, l1_pct=90, tensor_pct=80, l2_hit_rate_pct=90) == "l2-bound"


def test_a_margin_under_the_tie_threshold_is_said_to_be_a_tie():
    row = make_metrics(issue_pct=77.0, l2_pct=76.9, dram_pct=20)
    name, evidence = classify(row)
    assert name == "issue-bound"
    assert evidence[0] == "issue slots 77.0 % ~ L2 throughput 76.9 %: a tie (within 1 pt)"
    assert B.tie(row) == B.Tie("issue-bound", "l2-bound", evidence[0])
    assert B.tie(make_metrics(issue_pct=79.0, l2_pct=76.9, dram_pct=20)) is None


def test_dram_against_a_rival_at_the_margin_is_a_tie():
    row = make_metrics(dram_pct=75.0, l1_pct=85.5)  # 10.5 points busier: 0.5 from the margin
    tied = B.tie(row)
    assert tied is not None and tied.other == "dram-bound" and tied.label == classify(row)[0]
    assert B.tie(make_metrics(dram_pct=75.0, l1_pct=80.0)) is None  # DRAM clearly
    assert B.tie(make_metrics(dram_pct=92.0)) is None


def test_a_math_pipe_and_its_operand_unit_are_no_tie():
    assert B.tie(make_metrics(tensor_pct=90.0, l1_pct=90.5, dram_pct=8)) is None


# -- a kernel busy on the tensor pipe (flash_fwd's mma, cuDNN's attention) ---------------


def test_tensor_pipe_busier_than_a_busy_dram_is_compute_bound_on_the_tensor_pipe():
    # DRAM at its mark would have won within the 10-point margin against a cache; against
    # a math pipe it needs to be the busier of the two
    name, evidence = classify(make_metrics(tensor_pct=78, dram_pct=72))
    assert name == "compute-bound"
    assert evidence[0] == "tensor pipe 78.0 % of peak (at or above 60 %)"
    assert any("DRAM throughput 72.0 % (not the limiter)" in e for e in evidence)
    assert B.tie(make_metrics(tensor_pct=78, dram_pct=72)) is None


def test_flash_attention_shape_of_counters_is_compute_bound_on_the_tensor_pipe():
    # shared memory feeding the tensor cores: L1 and the LSU pipe busy too, DRAM low
    row = make_metrics(tensor_pct=71, l1_pct=84, lsu_pct=66, l2_pct=35, dram_pct=14, sm_pct=78,
                       issue_pct=55)
    name, evidence = classify(row)
    assert name == "compute-bound"
    assert evidence[0].startswith("tensor pipe 71.0 %")
    assert "L1/TEX throughput 84.0 %" in evidence[1] and "tensor cores" in evidence[1]


def test_dram_busier_than_the_tensor_pipe_stays_dram_bound():
    assert label(tensor_pct=72, dram_pct=88) == "dram-bound"


@pytest.mark.parametrize("tensor, dram, expected, other", [
    (75.5, 75.0, "compute-bound", "dram-bound"),
    (74.5, 75.0, "dram-bound", "compute-bound"),
])
def test_tensor_pipe_and_dram_within_a_point_are_a_tie(tensor, dram, expected, other):
    row = make_metrics(tensor_pct=tensor, dram_pct=dram)
    name, evidence = classify(row)
    tied = B.tie(row)
    assert name == expected and tied is not None and (tied.label, tied.other) == (expected, other)
    assert evidence[0] == tied.text and "a tie (within 1 pt)" in tied.text


def test_issue_slots_busy_because_a_math_pipe_is_are_not_the_limit():
    # the zoo's barrier_fast: issue slots 93 %, FMA pipe 76 %: the pipe is at its mark
    assert label(issue_pct=93.1, fma_pct=75.7) == "compute-bound"
