"""The real point runners without a GPU: bench_point over a stand-in run_bench, and
paprof sweep --profile end to end through the fake ncu and launcher."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from paprof import registry
from paprof.family import Work
from paprof.measure.kernels import bench
from paprof.sweep import manifest as M
from paprof.sweep import results
from paprof.sweep.run import SweepSettings, bench_point

from helpers import real_report

pytestmark = pytest.mark.lab  # the lab's paged_decode is the sample plugin


def test_bench_point_stores_a_record_per_passing_variant(tmp_path, monkeypatch):
    fam = registry.family("paged_decode")
    params = fam.parse("batch=4,context=32768,dtype=fp16")
    variants = registry.resolve(["v5", "v6"], fam.name)

    def fake_run_bench(family, chosen, p, launches, rounds, seed, progress=None):
        progress("timing")
        rows = [bench.BenchRow("v5", "cuda", ["paged_decode_v5"], {"splits": 8}, [200.0, 202.0], 1e-4, True,
                               words={"said": ["split each sequence 8 ways"]}),
                bench.BenchRow("v6", "cuda", ["paged_decode_v6"], {}, [], 0.5, False)]
        return bench.BenchResult(family.name, p, Work(536870912, 0), "NVIDIA H200", 4.5, launches, 1, rows)

    monkeypatch.setattr(bench, "run_bench", fake_run_bench)
    said = []
    out = bench_point(fam, variants, params, tmp_path, SweepSettings(launches=50, rounds=2, seed=3), said.append)
    assert said == ["timing"]
    assert [(o.variant, o.status) for o in out] == [("v5", "done"), ("v6", "failed")]
    assert "relative error 5.00e-01" in out[1].reason
    rec = results.read_bench(out[0].result)
    assert out[0].result == results.bench_path(tmp_path, "nvidia-h200", "paged_decode", "v5", params.slug())
    assert (rec["median_us"], rec["launches"], rec["rounds"], rec["seed"]) == (201.0, 50, 2, 3)
    assert rec["shape_slug"] == params.slug() and rec["gpu_slug"] == "nvidia-h200"
    assert abs(rec["tbs"] - 536870912 / 201.0 / 1e6) < 1e-9 and rec["read_ceiling_tbs"] == 4.5
    assert rec["created"] and rec["paprof_version"]
    # the launcher's choices, raw and in the family's words, as a profiled run keeps them
    assert (rec["details"], rec["launch_words"]) == ({"splits": 8}, {"said": ["split each sequence 8 ways"]})


def test_bench_says_the_launch_choices_in_the_familys_words(paprof_cli, monkeypatch):
    """``paprof bench`` prints a variant's launch choices in its family's words where the
    launcher gave them, else the raw details."""
    def fake_run_bench(family, chosen, p, launches, rounds, seed, progress=None):
        rows = [bench.BenchRow("v5", "cuda", ["paged_decode_v5"], {"splits": 8}, [200.0, 202.0], 1e-4, True,
                               words={"said": ["split each sequence 8 ways", "merged at the end"]}),
                bench.BenchRow("v6", "cuda", ["paged_decode_v6_split"], {"splits": 4}, [150.0], 1e-4, True)]
        return bench.BenchResult(family.name, p, Work(536870912, 0), "NVIDIA H200", 4.5, launches, 1, rows)

    monkeypatch.setattr(bench, "run_bench", fake_run_bench)
    result = CliRunner().invoke(paprof_cli, ["bench", "--variant", "v5", "--variant", "v6", "--shape",
                                             "batch=4,context=32768,dtype=fp16"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    lines = {line.split()[0]: line for line in result.output.splitlines() if line.startswith(("v5 ", "v6 "))}
    assert lines["v5"].endswith("paged_decode_v5; split each sequence 8 ways; merged at the end")
    assert lines["v6"].endswith("paged_decode_v6_split, splits 4")


def test_sweep_profile_end_to_end_with_the_fake_ncu(paprof_cli, fake_bin, fake_launcher, tmp_path,
                                                    monkeypatch):
    monkeypatch.setenv("FAKE_NCU_REPORT", str(real_report()))
    runs = tmp_path / "runs"
    args = ["sweep", "--variant", "v3", "--grid", "batch=8,16", "--shape", "context=1024",
            "--profile", "--preset", "memory", "--runs", str(runs)]
    result = CliRunner().invoke(paprof_cli, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "2 variant-points measured now" in result.output
    reports = sorted(p.name for p in runs.rglob("*.ncu-rep"))
    assert reports == ["b16_ctx1024_h32x8_d128_p16_fp32.ncu-rep", "b8_ctx1024_h32x8_d128_p16_fp32.ncu-rep"]
    side = json.loads(next(runs.rglob("b8_*.json")).read_text())
    assert side["preset"] == "memory" and side["params"]["batch"] == 8
    assert M.status_counts(M.find(runs))["done"] == 2
    again = CliRunner().invoke(paprof_cli, args, catch_exceptions=False)
    assert "0 variant-points measured now, 2 already stored" in again.output
    assert len(fake_launcher.calls) == 2
    report = CliRunner().invoke(paprof_cli, ["sweep-report", "--runs", str(runs), "--out",
                                             str(tmp_path / "r.html"), "--markdown", "-"])
    assert report.exit_code == 0, report.output
    assert "duration under ncu" in report.output
