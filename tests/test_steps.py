"""The one model of what is compared (``paprof.model.steps``): a run holds steps, a
step is the launches of one repetition, found from the report's NVTX pushes or the
profiler's record, never from kernel names."""

from __future__ import annotations

from pathlib import Path

import pytest

from paprof.model import steps
from paprof.model.load import load_reports, variant_rows
from helpers import recorded

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
"""For the custom_family example's whole-program report only (6 MB, 439 KB packed: not
copied into tests/data)."""
D = "<default domain>"


def test_each_push_of_the_step_range_is_one_step():
    nvtx = [((D, "step", 10),), ((D, "step", 10),), ((D, "step", 31),), ((D, "step", 52),),
            ((D, "step", 52),)]
    got = steps.plan(["gemm", "silu", "gemm", "gemm", "silu"], nvtx, None, "step")
    assert got.steps == (0, 0, 1, 2, 2) and got.source == steps.FROM_RANGE and got.count == 3


def test_a_command_runs_range_is_its_step_and_the_users_range_wins():
    nvtx = [((D, "outer", 1), (D, "step", 5)), ((D, "outer", 1), (D, "step", 9))]
    record = {"kind": "command", "nvtx_range": "step"}
    assert steps.plan(["a", "a"], nvtx, record).steps == (0, 1)
    assert steps.plan(["a", "a"], nvtx, record, step_range="outer").steps == (0, 0)
    assert steps.plan(["a", "a"], nvtx, {"step_range": "step"}).steps == (0, 1)
    assert steps.plan(["a", "a"], nvtx, None, step_range="Domain@step").source == steps.ONE_STEP


def test_names_without_push_ids_are_one_step_and_say_why():
    nvtx = [((D, "step", None),), ((D, "step", None),)]
    got = steps.plan(["a", "a"], nvtx, {"kind": "command", "nvtx_range": "step"})
    assert got.steps == (0, 0) and got.source == steps.ONE_STEP and "push ids" in got.note


def test_the_profilers_record_splits_repeats_of_one_kernel_sequence():
    kernels = ["partial", "merge"] * 3
    got = steps.plan(kernels, [None] * 6, {"launches": 3})
    assert got.steps == (0, 0, 1, 1, 2, 2) and got.source == steps.FROM_RECORD
    # not repeats of one sequence: never guessed
    assert steps.plan(["a", "b", "b", "a"], [None] * 4, {"launches": 2}).source == steps.ONE_STEP
    assert steps.plan(["a", "b", "c"], [None] * 3, {"launches": 2}).source == steps.ONE_STEP


def test_a_foreign_report_is_one_step_whatever_its_kernel_names():
    got = steps.plan(["k1", "k2", "k1", "k2"], [None] * 4, None)
    assert got.steps == (0, 0, 0, 0) and got.source == steps.ONE_STEP


def test_the_shipped_whole_program_has_three_steps_of_one_kernel():
    # paprof run --cmd "python3 whole_program.py --steps 3" --nvtx-range softmax_step: each
    # step one push of softmax_step; the fast reader reads which push each launch sat in
    df = load_reports([EXAMPLES / "custom_family/runs/nvidia-h200/command/whole_program"])
    assert list(df["step"]) == [0, 1, 2] and set(df["steps_from"]) == {"range"}
    rows = variant_rows(df)
    assert len(rows) == 3
    assert list(rows["duration_us"]) == pytest.approx(list(df["duration_us"]))


def test_a_split_variant_is_one_step_of_two_kernels():
    df = load_reports([recorded("h200") / "nvidia-h200/paged_decode/v4"])
    rows = variant_rows(df)
    assert len(rows) == 1 and rows.iloc[0]["kernels"] == ["paged_decode_v4_partial", "paged_decode_v4_merge"]
    assert rows.iloc[0]["duration_us"] == pytest.approx(df["duration_us"].sum())


def _three_steps(where):
    """A private copy: the test below rewrites its record."""
    from helpers import extract

    return next(extract(Path(__file__).parent / "data" / "v4-three-steps.tar.xz", where).rglob("*.ncu-rep"))


def test_the_launcher_pushes_its_range_once_a_step_under_ncu(tmp_path):
    # paprof run --variant v4 --shape batch=8,context=4096 --launches 3 on the H200
    # (2026-12-02, ncu 2025.3.1): three pushes of paged_decode.v4, two kernels in each
    import json

    from paprof.read import ncu_fastread

    report = _three_steps(tmp_path)
    results = ncu_fastread.read_report(report, ["gpu__time_duration.sum"])
    pushes = [r.nvtx[-1][2] for r in results]
    assert [r.nvtx[-1][1] for r in results] == ["paged_decode.v4"] * 6
    assert pushes[0] == pushes[1] != pushes[2] == pushes[3] != pushes[4] == pushes[5]
    # that run's record predates step_range: its own record of 3 launches splits it alike
    df = load_reports([report])
    assert list(df["step"]) == [0, 0, 1, 1, 2, 2] and set(df["steps_from"]) == {"record"}
    # with the record paprof now writes (step_range: the variant's range), the pushes do
    sidecar = report.with_name(report.name.replace(".ncu-rep", ".json"))
    record = json.loads(sidecar.read_text())
    record["step_range"] = record["nvtx_range"]
    sidecar.write_text(json.dumps(record))
    df = load_reports([report])
    assert list(df["step"]) == [0, 0, 1, 1, 2, 2] and set(df["steps_from"]) == {"range"}
    rows = variant_rows(df)
    assert len(rows) == 3 and all(k == ["paged_decode_v4_partial", "paged_decode_v4_merge"]
                                  for k in rows["kernels"])
