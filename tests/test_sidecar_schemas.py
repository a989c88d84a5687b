"""Schema-1 sidecars (the shipped H200 runs, made before families) and schema-2 ones
(params, work model, source) both load; the work model gives work_tbs / work_tflops."""

from __future__ import annotations

import json
import math
import shutil

import pytest

from paprof.analysis import load

try:
    from conftest import EXAMPLES
except ImportError:  # tests/ became a package
    from tests.conftest import EXAMPLES

RUN = EXAMPLES / "nvidia-h200" / "paged_decode"
SLUG = "b64_ctx4096_h32x8_d128_p16_fp32"
KV_BYTES = 2 * 64 * 4096 * 8 * 128 * 4


def _copy_as_schema2(tmp_path, variant):
    folder = tmp_path / "runs" / "nvidia-h200" / "paged_decode" / variant
    folder.mkdir(parents=True)
    shutil.copy(RUN / variant / f"{SLUG}.ncu-rep", folder)
    side = json.loads((RUN / variant / f"{SLUG}.json").read_text())
    assert side["schema"] == 1 and "work" not in side
    side.update(schema=2, kind="cuda", params={"batch": 64}, verified=True,
                work={"bytes": KV_BYTES, "flops": 4 * 64 * 4096 * 32 * 128, "flop_kind": "fp32"},
                source={"repo": None, "path": "/x", "commit": None, "dirty": None})
    for old in ("shape_fields", "kv_bytes"):
        side.pop(old, None)
    (folder / f"{SLUG}.json").write_text(json.dumps(side))
    return tmp_path / "runs"


def test_schema_1_runs_load_without_a_work_model():
    df = load.load_reports(RUN / "v3")
    assert df["sidecar"][0]["schema"] == 1
    assert math.isnan(df["work_bytes"][0]) and math.isnan(df["work_tbs"][0])
    assert "work_bytes" not in df.attrs["missing"]  # not an ncu section's to supply


def test_schema_2_work_model_gives_useful_bandwidth(tmp_path):
    df = load.load_reports(_copy_as_schema2(tmp_path, "v3"))
    row = df.iloc[0]
    assert row["work_bytes"] == KV_BYTES and row["work_flops"] == 4 * 64 * 4096 * 32 * 128
    assert row["work_tbs"] == pytest.approx(KV_BYTES / row["duration_us"] / 1e6)
    assert row["work_tflops"] == pytest.approx(row["work_flops"] / row["duration_us"] / 1e6)
    # v3 reads its K/V once: the useful bandwidth is ncu's DRAM bandwidth, within a few %
    assert row["work_tbs"] * 1e3 / row["achieved_bandwidth_gbs"] == pytest.approx(1.0, abs=0.03)


def test_a_variant_of_two_kernels_gets_its_work_rate_over_both(tmp_path):
    df = load.load_reports(_copy_as_schema2(tmp_path, "v4"))
    assert len(df) == 2 and df["work_tbs"].isna().all()  # neither kernel alone did the work
    (row,) = load.variant_rows(df).to_dict("records")
    assert row["work_tbs"] == pytest.approx(KV_BYTES / row["duration_us"] / 1e6)
    assert row["duration_us"] == pytest.approx(df["duration_us"].sum())


def test_the_gate_holds_the_work_model(tmp_path):
    from paprof.analysis import regress

    runs = _copy_as_schema2(tmp_path, "v3")
    base = regress.make_baseline(runs, metrics=("work_tbs",))
    (entry,) = base.entries
    assert entry.metrics["work_tbs"].value == pytest.approx(
        load.load_reports(runs)["work_tbs"][0])


def test_the_family_hint_picks_the_gate_metrics(tmp_path):
    from paprof.analysis import regress

    runs = _copy_as_schema2(tmp_path, "v3")
    side_path = next(runs.rglob("*.json"))
    side = json.loads(side_path.read_text())
    side["gate_metrics"] = ["work_tbs", "duration_us"]
    side_path.write_text(json.dumps(side))
    (entry,) = regress.make_baseline(runs).entries
    assert list(entry.metrics) == ["work_tbs", "duration_us"]
    (old,) = regress.make_baseline(RUN / "v3").entries  # schema 1: the gate's defaults
    assert list(old.metrics) == list(regress.DEFAULT_METRICS)
