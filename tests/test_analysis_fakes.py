"""The stand-ins for ncu_report's IAction/IMetric/IRuleResult and the row factories
(``helpers``) behave like ncu_report where the loader relies on it (absent metrics are
``None``)."""

from __future__ import annotations

from paprof.read import metrics as M

from helpers import make_action, make_metrics


def test_fake_action_reports_absent_metrics_as_none():
    action = make_action(dram_throughput_pct=None)
    dram = M.BY_COLUMN["dram_throughput_pct"].ncu_name
    assert action.metric_by_name(dram) is None
    assert action.metric_by_name(M.BY_COLUMN["duration_us"].ncu_name).as_double() == 600e3


def test_make_metrics_defaults_are_well_under_peak():
    row = make_metrics()
    assert max(row["dram_throughput_pct"], row["l1_throughput_pct"], row["fma_pipe_pct"]) < 60
