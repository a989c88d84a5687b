"""Stand-ins for ncu_report's IAction/IMetric/IRuleResult, and factories for rows.

Other analysis tests import these; the few tests here check the stand-ins behave like
ncu_report where the loader relies on it (absent metrics are ``None``).
"""

from __future__ import annotations

import math

from paprof.analysis import metrics as M

#: A v3-like kernel on the H200: the value (in the catalogue's column unit) per column.
V3_COLUMNS = {
    "gpu": "NVIDIA H200",
    "duration_us": 600.0,
    "elapsed_cycles": 1.19e6,
    "sm_throughput_pct": 22.0,
    "memory_throughput_pct": 86.0,
    "dram_throughput_pct": 84.9,
    "l1_throughput_pct": 40.0,
    "l2_throughput_pct": 60.0,
    "dram_active_cycles": 1.6e6,
    "registers_per_thread": 39.0,
    "theoretical_occupancy_pct": 41.7,
    "achieved_occupancy_pct": 38.0,
    "block_limit_registers": 12.0,
    "block_limit_shared_mem": 5.0,
    "block_limit_warps": 16.0,
    "block_limit_blocks": 32.0,
    "waves_per_sm": 0.78,
    "grid_size": 512.0,
    "block_size": 128.0,
    "dram_bytes_per_second": 3.6e12,
    "shared_mem_static_bytes": 0.0,
    "shared_mem_dynamic_bytes": 16384.0,
    "sm_count": 132.0,
    "sm_active_cycles": 1.1e6,
    "lsu_pipe_pct": 12.0,
    "fma_pipe_pct": 8.0,
    "alu_pipe_pct": 6.0,
    "fp64_pipe_pct": 0.0,
    "xu_pipe_pct": 2.0,
    "tensor_pipe_pct": 0.0,
    "issue_slots_busy_pct": 15.0,
    "issue_active_pct": 16.0,
    "warps_active_per_scheduler": 6.1,
    "warps_eligible_per_scheduler": 0.2,
    "warp_cycles_per_issue": 38.0,
    "l1_hit_rate_pct": 1.0,
    "l2_hit_rate_pct": 5.0,
    "stall_long_scoreboard": 30.0,
    "stall_barrier": 3.0,
    "stall_selected": 1.0,
}


class FakeMetric:
    """An IMetric with one value in ncu's unit."""

    def __init__(self, value, unit):
        self._value, self._unit = value, unit

    def has_value(self):
        return self._value is not None

    def as_double(self):
        return float(self._value)

    def as_string(self):
        return str(self._value)

    def unit(self):  # ncu 2025.3.1's own module segfaults here: paprof must never call it
        raise AssertionError("IMetric.unit() crashes the ncu_report of Nsight Compute 2025.3.1")


class FakeRule:
    """An IRuleResult with a message and an optional speedup estimate."""

    def __init__(self, rule_id, message, kind=3, title=None, speedup=None):
        self.rule_id, self.message, self.kind = rule_id, message, kind
        self.title, self.speedup = title or rule_id, speedup

    def rule_identifier(self):
        return self.rule_id

    def name(self):
        return self.title

    def has_rule_message(self):
        return self.message is not None

    def rule_message(self):
        return {"title": self.title, "message": self.message, "type": self.kind}

    def has_speedup_estimation(self):
        return self.speedup is not None

    def speedup_estimation(self):
        return {"type": 2, "speedup": self.speedup}


class FakeAction:
    """An IAction: metrics by ncu name, rule results, a kernel name."""

    def __init__(self, name, metrics, rules=()):
        self._name, self._metrics, self._rules = name, metrics, list(rules)
        self.lookups = 0

    def name(self):
        return self._name

    def metric_by_name(self, name):
        self.lookups += 1
        return self._metrics.get(name)

    def rule_results(self):
        return self._rules


def make_action(kernel="paged_decode_v3", rules=(), **columns) -> FakeAction:
    """A fake action with V3_COLUMNS overridden by ``columns`` (None: metric absent).

    Values are given in the catalogue's unit and stored in ncu's unit (1/scale).
    """
    values = dict(V3_COLUMNS, **columns)
    metrics = {}
    for entry in M.MEASURED:
        value = values.get(entry.column)
        if value is None:
            continue
        stored = value if entry.text else value / entry.scale
        metrics[entry.ncu_name] = FakeMetric(stored, entry.ncu_unit)
    return FakeAction(kernel, metrics, rules)


def make_metrics(dram_pct=30.0, sm_pct=30.0, l1_pct=30.0, l2_pct=30.0, lsu_pct=20.0,
                 fma_pct=20.0, alu_pct=10.0, tensor_pct=0.0, issue_pct=25.0,
                 memory_pct=None, occ_pct=60.0, waves=8.0, grid=4096.0, sms=132.0,
                 rules=None, **extra) -> dict:
    """A row (dict of columns) for the bottleneck rules; defaults: a latency-bound
    kernel with every unit well under its peak and plenty of blocks."""
    row = {
        "dram_throughput_pct": dram_pct, "sm_throughput_pct": sm_pct,
        "l1_throughput_pct": l1_pct, "l2_throughput_pct": l2_pct,
        "memory_throughput_pct": (max((v for v in (dram_pct, l1_pct, l2_pct)
                                       if v is not None), default=None)
                                  if memory_pct is None else memory_pct),
        "lsu_pipe_pct": lsu_pct, "fma_pipe_pct": fma_pct, "alu_pipe_pct": alu_pct,
        "fp64_pipe_pct": 0.0, "xu_pipe_pct": 3.0, "tensor_pipe_pct": tensor_pct,
        "issue_slots_busy_pct": issue_pct, "issue_active_pct": issue_pct,
        "achieved_occupancy_pct": occ_pct, "waves_per_sm": waves, "grid_size": grid,
        "sm_count": sms, "top_stall_reason": "long_scoreboard", "top_stall_cycles": 25.0,
        "rules": rules or [],
    }
    row.update(extra)
    return {k: (math.nan if v is None else v) for k, v in row.items()}


def test_fake_action_reports_absent_metrics_as_none():
    action = make_action(dram_throughput_pct=None)
    dram = M.BY_COLUMN["dram_throughput_pct"].ncu_name
    assert action.metric_by_name(dram) is None
    assert action.metric_by_name(M.BY_COLUMN["duration_us"].ncu_name).as_double() == 600e3


def test_make_metrics_defaults_are_well_under_peak():
    row = make_metrics()
    assert max(row["dram_throughput_pct"], row["l1_throughput_pct"], row["fma_pipe_pct"]) < 60
