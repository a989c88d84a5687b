"""The exact ncu and launcher command lines, and the presets."""

from __future__ import annotations

import pytest

from paprof.errors import UserError
from paprof import registry
from paprof.measure.argv import NcuSettings, launcher_argv, ncu_argv, report_path, verify_argv
from paprof.measure.presets import METRICS_ONLY, PRESETS, get_preset, metrics_of

from helpers import lab_shape

pytestmark = pytest.mark.lab  # the lab's paged_decode is the sample plugin



def the_shape():
    return lab_shape("batch=64,context=4096")
SPEC = "batch=64,q_heads=32,kv_heads=8,head_dim=128,page=16,context=4096,dtype=fp32"
BASIC_SECTIONS = [
    "--section", "SpeedOfLight",
    "--section", "MemoryWorkloadAnalysis",
    "--section", "Occupancy",
    "--section", "LaunchStats",
    "--section", "WorkloadDistribution",
    "--section", "ComputeWorkloadAnalysis",
    "--section", "SchedulerStats",
    "--section", "WarpStateStats",
]  # fmt: skip
# the default: the memory tables, memory chart and roofline chart for the catalogue's
# metrics only, one --metrics list after the sections
DEFAULT_SECTIONS = BASIC_SECTIONS + [
    "--section", "InstructionStats",
    "--section", "SpeedOfLight_HierarchicalTensorRooflineChart",
    "--metrics", ",".join(metrics_of(METRICS_ONLY)),
]  # fmt: skip


def settings(**kw):
    return NcuSettings(ncu="/opt/ncu", python="/py", **kw)


def test_spec_is_what_the_launcher_gets():
    assert the_shape().spec() == SPEC


def test_ncu_argv_default():
    argv = ncu_argv(settings(), registry.get("v3"), the_shape(), "/runs/.x.tmp-1.ncu-rep", "/runs/r.json")
    assert argv == [
        "/opt/ncu",
        "-o", "/runs/.x.tmp-1.ncu-rep",
        "--force-overwrite",
        "--clock-control", "none",
        "--target-processes", "all",
        *DEFAULT_SECTIONS,
        "--nvtx", "--nvtx-include", "paged_decode.v3/",
        "-k", "regex:paged_decode_v3",
        "--launch-count", "1",
        "/py", "-m", "paprof.measure.kernels.launch",
        "--variant", "v3", "--family", "paged_decode", "--shape", SPEC,
        "--profile-launches", "1", "--result", "/runs/r.json", "--time", "0", "--no-check",
    ]  # fmt: skip


def test_ncu_argv_full_set_base_clocks_two_kernels_three_launches_seed():
    s = settings(preset="full", clock_control="base", launches=3, kernels_per_launch=2, seed=7)
    argv = ncu_argv(s, registry.get("v4"), the_shape(), "out", "r.json")
    assert argv == [
        "/opt/ncu",
        "-o", "out.ncu-rep",
        "--force-overwrite",
        "--clock-control", "base",
        "--target-processes", "all",
        "--set", "full",
        "--nvtx", "--nvtx-include", "paged_decode.v4/",
        "-k", "regex:paged_decode_v4_(partial|merge)",
        "--launch-count", "6",
        "/py", "-m", "paprof.measure.kernels.launch",
        "--variant", "v4", "--family", "paged_decode", "--shape", SPEC,
        "--profile-launches", "3", "--result", "r.json", "--time", "0",
        "--seed", "7", "--no-check",
    ]  # fmt: skip


def test_ncu_argv_memory_preset_without_filters():
    s = settings(preset="memory", nvtx_filter=False, kernel_filter=False)
    argv = ncu_argv(s, registry.get("v2"), the_shape(), "o.ncu-rep", "r.json")
    assert argv[: argv.index("/py")] == [
        "/opt/ncu", "-o", "o.ncu-rep", "--force-overwrite", "--clock-control", "none",
        "--target-processes", "all",
        "--section", "SpeedOfLight", "--section", "MemoryWorkloadAnalysis",
        "--section", "Occupancy", "--section", "LaunchStats",
        "--launch-count", "1",
    ]  # fmt: skip


def test_verify_argv_runs_the_launcher_alone():
    argv = verify_argv(settings(seed=3), registry.get("v3"), the_shape(), "/tmp/v.json")
    assert argv == [
        "/py", "-m", "paprof.measure.kernels.launch",
        "--variant", "v3", "--family", "paged_decode", "--shape", SPEC,
        "--profile-launches", "0", "--result", "/tmp/v.json", "--time", "20",
        "--seed", "3",
    ]  # fmt: skip


def test_launcher_argv_ragged_shape_round_trips():
    shape = lab_shape("context=1:17:1000:4096")
    argv = launcher_argv(
        registry.get("v5"), shape, python="py", result="r", profile_launches=1, time_launches=0
    )
    assert lab_shape(argv[argv.index("--shape") + 1]) == shape


def test_unresolved_ncu_and_bad_clock_control_are_bugs():
    with pytest.raises(ValueError, match="find_ncu"):
        ncu_argv(NcuSettings(), registry.get("v3"), the_shape(), "o", "r")
    with pytest.raises(ValueError, match="clock_control"):
        ncu_argv(settings(clock_control="max"), registry.get("v3"), the_shape(), "o", "r")


def test_report_path_appends_the_suffix_ncu_would():
    assert str(report_path("a/b")) == "a/b.ncu-rep"
    assert str(report_path("a/b.ncu-rep")) == "a/b.ncu-rep"


def test_presets():
    assert list(PRESETS) == ["default", "tables", "source", "basic", "memory", "full"]
    assert get_preset("full").ncu_args() == ["--set", "full"]
    assert get_preset("basic").ncu_args() == BASIC_SECTIONS
    default = get_preset("default").ncu_args()
    assert default[: len(BASIC_SECTIONS)] == BASIC_SECTIONS
    assert "InstructionStats" in default and "MemoryWorkloadAnalysis_Tables" not in default
    tables = get_preset("tables").ncu_args()
    assert tables[: len(BASIC_SECTIONS)] == BASIC_SECTIONS and "--metrics" not in tables
    assert "MemoryWorkloadAnalysis_Tables" in tables and "InstructionStats" in tables
    source = get_preset("source")
    assert source.lineinfo and not get_preset("default").lineinfo
    metrics = default.index("--metrics")
    assert source.ncu_args() == default[:metrics] + ["--section", "SourceCounters"] + default[metrics:]
    with pytest.raises(UserError, match="known: default, tables, source, basic, memory, full"):
        get_preset("fast")


def test_progress_finished_on_its_own_line_after_a_warning():
    from paprof.measure.ncu_log import NcuLog

    log = NcuLog()
    for line in [
        '==PROF== Profiling "paged_decode_baseline": 0%.',
        "==WARNING== Launching the workload is taking more time than expected.",
        "...50%....100% - 20 passes",
    ]:
        log.add_line(line)
    assert [k.passes for k in log.kernels] == [20]
    assert log.replay_passes == 20
    assert not log.program
