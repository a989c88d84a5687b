"""Schema-1 sidecars (runs made before families: one kept in ``tests/data/schema1``, v3 of
the H200 runs shipped until 2026-12-01) and schema-2 ones (params, work model, source: the
recorded H200 runs of tests/data) both load; the work model gives work_tbs / work_tflops."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

from paprof.model import load

from helpers import EXAMPLES

RUN = EXAMPLES / "nvidia-h200" / "paged_decode"
SCHEMA1 = Path(__file__).resolve().parent / "data" / "schema1" / "nvidia-h200" / "paged_decode"
SLUG = "b64_ctx4096_h32x8_d128_p16_fp32"
KV_BYTES = 2 * 64 * 4096 * 8 * 128 * 4
FLOPS = 2 * 64 * 32 * 4096 * 128 * 2  # Q.K and P.V, a multiply-add each


def _copy(tmp_path, variant):
    folder = tmp_path / "runs" / "nvidia-h200" / "paged_decode" / variant
    folder.mkdir(parents=True)
    for suffix in (".ncu-rep", ".json"):
        shutil.copy(RUN / variant / f"{SLUG}{suffix}", folder)
    return tmp_path / "runs"


def test_schema_1_runs_load_without_a_work_model():
    df = load.load_reports(SCHEMA1 / "v3")
    side = df["sidecar"][0]
    assert side["schema"] == 1 and "work" not in side and side["kv_bytes"] == KV_BYTES
    assert math.isnan(df["work_bytes"][0]) and math.isnan(df["work_tbs"][0])
    assert "work_bytes" not in df.attrs["missing"]  # not an ncu section's to supply
    # the basic sections of those runs have no traffic tables: NaN, and the loader says where from
    assert math.isnan(df["l2_to_l1_bytes"][0])
    assert df.attrs["missing"]["l2_to_l1_bytes"] == "MemoryWorkloadAnalysis_Chart"
    assert df.attrs["missing"]["l1_global_load_bytes"] == "MemoryWorkloadAnalysis_Tables"


def test_schema_2_work_model_gives_useful_bandwidth():
    df = load.load_reports(RUN / "v3")
    row = df.iloc[0]
    assert row["sidecar"]["schema"] == 2
    assert row["work_bytes"] == KV_BYTES and row["work_flops"] == FLOPS
    assert row["work_tbs"] == pytest.approx(KV_BYTES / row["duration_us"] / 1e6)
    assert row["work_tflops"] == pytest.approx(row["work_flops"] / row["duration_us"] / 1e6)
    # v3 reads its K/V once: the useful bandwidth is ncu's DRAM bandwidth, within a few %
    assert row["work_tbs"] * 1e3 / row["achieved_bandwidth_gbs"] == pytest.approx(1.0, abs=0.03)


def test_a_variant_of_two_kernels_gets_its_work_rate_over_both():
    df = load.load_reports(RUN / "v4")
    assert len(df) == 2 and df["work_tbs"].isna().all()  # neither kernel alone did the work
    (row,) = load.variant_rows(df).to_dict("records")
    assert row["work_tbs"] == pytest.approx(KV_BYTES / row["duration_us"] / 1e6)
    assert row["duration_us"] == pytest.approx(df["duration_us"].sum())
    # the traffic counters add up over the two kernels
    assert row["l2_to_l1_bytes"] == pytest.approx(df["l2_to_l1_bytes"].sum())


def test_the_gate_holds_the_work_model():
    from paprof import gate

    base = gate.make_baseline(RUN / "v3", metrics=("work_tbs",))
    (entry,) = base.entries
    assert entry.metrics["work_tbs"].value == pytest.approx(
        load.load_reports(RUN / "v3")["work_tbs"][0])


def test_the_family_hint_picks_the_gate_metrics(tmp_path):
    from paprof import gate

    runs = _copy(tmp_path, "v3")
    side_path = next(runs.rglob("*.json"))
    side = json.loads(side_path.read_text())
    assert side["gate_metrics"] == ["dram_throughput_pct", "duration_us", "dram_bytes"]
    side["gate_metrics"] = ["work_tbs", "duration_us"]
    side_path.write_text(json.dumps(side))
    (entry,) = gate.make_baseline(runs).entries
    assert list(entry.metrics) == ["work_tbs", "duration_us"]
    (old,) = gate.make_baseline(SCHEMA1 / "v3").entries  # schema 1: the gate's defaults
    assert list(old.metrics) == list(gate.DEFAULT_METRICS)
