"""The example family's H200 runs shipped in examples/custom_family/runs: real schema-2
sidecars, the work model in the table, a story in compare, a command run "not verified"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from paprof.model import load
from paprof.api import write_report

RUNS = Path(__file__).resolve().parents[1] / "examples" / "custom_family" / "runs"
SOFTMAX = RUNS / "nvidia-h200" / "softmax"
MATRIX_BYTES = 2 * 4 * 16384 * 4096


@pytest.fixture(scope="module")
def table():
    return load.variant_rows(load.load_reports(RUNS))


def test_every_variant_and_the_command_run_are_shipped_with_schema_2_sidecars():
    kinds = {}
    for side_path in RUNS.rglob("*.json"):
        side = json.loads(side_path.read_text())
        assert side["schema"] == 2 and side["gpu"] == "NVIDIA H200"
        assert side_path.with_suffix(".ncu-rep").is_file()
        kinds[side["variant"]] = (side["kind"], side["verified"])
    assert kinds == {"naive": ("cuda", True), "block": ("cuda", True), "fused": ("cuda", True),
                     "torch": ("callable", True), "triton": ("callable", True),
                     "whole_program": ("command", False)}


def test_labels_follow_the_story(table):
    labels = dict(zip(table["variant"], table["bottleneck"]))
    assert labels["naive"] == "occupancy/launch-bound"
    assert labels["block"] == "latency-bound"
    assert labels["fused"] == labels["triton"] == "dram-bound"
    assert labels["whole_program"] == labels["torch"]  # the same ATen kernel either way


def test_the_work_model_gives_useful_bandwidth(table):
    fused = table[table["variant"] == "fused"].iloc[0]
    assert fused["work_bytes"] == MATRIX_BYTES
    assert fused["work_tbs"] == pytest.approx(MATRIX_BYTES / fused["duration_us"] / 1e6)
    assert 3.5 < fused["work_tbs"] < 4.8  # near the H200's ceiling
    naive = table[table["variant"] == "naive"].iloc[0]
    # naive moves twice the bytes it must: its second and third passes miss the caches
    assert naive["dram_bytes"] / naive["work_bytes"] == pytest.approx(2.0, rel=0.05)
    command = table[table["variant"] == "whole_program"]
    assert command["work_tbs"].isna().all()  # a program has no work model


def test_compare_tells_the_story_and_flags_the_command(tmp_path):
    text = write_report(["naive", "block", "fused"], runs=RUNS, out=None, markdown="-").markdown_text
    assert "**occupancy/launch-bound** → **latency-bound**" in text
    assert "**latency-bound** → **dram-bound**" in text
    text = write_report(["torch", "whole_program"], runs=RUNS, out=None, markdown="-").markdown_text
    assert "whole\\_program is not verified" in text


def test_compare_says_the_useful_bandwidth_from_the_work_model():
    text = write_report(["block", "fused"], runs=RUNS, out=None, markdown="-").markdown_text
    assert ("useful bandwidth (the work model's 537 MB) 2.35 TB/s -> 4.2 TB/s, 51.8 % -> 92.7 % "
            "of the measured 4.53 TB/s ceiling; useful FLOP rate 1.47 TFLOP/s -> 2.62 TFLOP/s") in text
    assert "| Useful bandwidth | 2.35 TB/s | 4.2 TB/s (+78.9 %) |" in text


def test_family_notes_reach_the_report(tmp_path):
    import shutil

    store = tmp_path / "runs"
    shutil.copytree(SOFTMAX, store / "nvidia-h200" / "softmax")
    for side_path in store.rglob("*.json"):
        side = json.loads(side_path.read_text())
        side["family_notes"] = ["rows are independent", "  "]
        side_path.write_text(json.dumps(side))
    text = write_report(["block", "fused"], runs=store, out=None, markdown="-").markdown_text
    assert text.count("softmax: rows are independent") == 1


def test_the_family_of_a_users_repository_gets_causes_from_its_own_counters():
    """The runs hold no traffic tables (basic sections): the causes come from what they do
    hold, by the same rules as paged_decode's, and name no variant of the built-in family."""
    cmp = write_report(["naive", "block", "fused", "triton", "torch"], runs=RUNS, out=None,
                       markdown=None).comparison
    causes = {(s.before, s.after): s.cause for s in cmp.steps}
    # naive: 128 CTAs, one per 128 rows, one warp a scheduler; block: a CTA per row
    assert causes[("naive", "block")].startswith(
        "more warps in flight: per scheduler 0.999 -> 15.2 (grid size 128 blocks -> 16.4 k blocks) "
        "(warps in flight -1.93 ms; net -1.39 ms); partly offset by more instructions")
    # fused: one pass, a third of block's instructions
    assert causes[("block", "fused")].startswith(
        "fewer instructions: integer and address arithmetic (IMAD, IADD3, LOP3, SHF) 49.2 M -> 6.03 M "
        "(instructions issued -205 us; net -101 us)")
    traffic = {(s.before, s.after): s.traffic for s in cmp.steps}
    assert traffic[("naive", "block")].startswith(
        "the grid grows 128x, 128 -> 16,384 CTAs, filling 100 % of the 1,056 resident-CTA "
        "slots instead of 6.1 % (0.06 -> 15.52 waves); with DRAM traffic down 2.07x, "
        "1.07 GB -> 517 MB")  # naive's second and third passes missed the caches
    assert traffic[("block", "fused")].startswith(
        "DRAM throughput rises 47 % -> 83 % of peak (3.99 TB/s, 88.1 % of the measured 4.53 TB/s "
        "ceiling): each resident warp moves 2.85x the DRAM bytes per second")
    assert causes[("fused", "triton")] == ("the same work as fused: warp instructions 28.7 M -> "
                                           "29.5 M, DRAM traffic 511 MB -> 511 MB")
    assert causes[("triton", "torch")].startswith(
        "more instructions: integer and address arithmetic (IMAD, IADD3, LOP3, SHF) 2.23 M -> 42.5 M, "
        "FP32 math (FFMA, FADD, FMUL) 18 M -> 52.2 M")
    fused = next(s for s in cmp.steps if s.after == "fused")
    assert fused.next_move.startswith(
        "ncu's estimates for what would move fused next, none of them about its dram-bound limit: ")
