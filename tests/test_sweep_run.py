"""The sweep loop: resume after an interrupt, skipped and invalid points, the manifest."""

from __future__ import annotations

import json

import pytest
from rich.console import Console

from paprof import registry
from paprof.sweep import grid as G
from paprof.sweep import manifest as M
from paprof.sweep import results
from paprof.sweep.run import SweepSettings, run_sweep, visible_gpu

from helpers import FakeRunner, GPU


def _setup(variants=("v5", "v6"), grid=("batch=1,4,16,64", "context=4096,32768"), shape="dtype=fp16"):
    fam = registry.family("paged_decode")
    return fam, registry.resolve(list(variants), fam.name), G.make_grid(fam.params, list(grid), shape)


def _quiet():
    return Console(stderr=True, force_terminal=False, width=200)


@pytest.mark.lab
def test_resume_after_an_interrupt_loses_only_the_point_in_flight(tmp_path, capsys):
    fam, variants, grid = _setup()
    runs = tmp_path / "runs"
    first = FakeRunner(interrupt_at=3)
    with pytest.raises(KeyboardInterrupt) as stop:
        run_sweep(fam, variants, grid, runs, runner=first, gpu_name=GPU, console=_quiet())
    stored = sorted(p.name for p in runs.rglob("*.bench.json"))
    assert len(stored) == 4  # two points x two variants; the third point was in flight
    assert {s.split(".")[0] for s in stored} == {grid.points[0].slug, grid.points[1].slug}
    data = M.find(runs)
    states = [{v: s["status"] for v, s in p["variants"].items()} for p in data["points"]]
    assert states[:3] == [{"v5": "done", "v6": "done"}] * 2 + [{"v5": "pending", "v6": "pending"}]
    assert "stopped at batch 4, context 4096" in str(stop.value)  # the CLI's one line says it
    assert "stopped at" not in capsys.readouterr().err  # not a second line

    again = FakeRunner()
    res = run_sweep(fam, variants, grid, runs, runner=again, gpu_name=GPU, console=_quiet())
    assert [slug for slug, _ in again.calls] == [p.slug for p in grid.points[2:]]
    assert (res.measured, res.resumed, res.points) == (12, 4, 8)
    assert M.status_counts(M.find(runs)) == {"done": 16, "failed": 0, "skipped": 0, "invalid": 0, "pending": 0}
    err = capsys.readouterr().err
    assert "[1/6] batch 4, context 4096: v5 ok, v6 ok (ETA" in err

    nothing = FakeRunner()
    res = run_sweep(fam, variants, grid, runs, runner=nothing, gpu_name=GPU, console=_quiet())
    assert nothing.calls == [] and res.resumed == 16
    forced = FakeRunner()
    run_sweep(fam, variants, grid, runs, SweepSettings(force=True), runner=forced, gpu_name=GPU,
              console=_quiet())
    assert len(forced.calls) == 8


@pytest.mark.lab
def test_a_variant_that_cannot_take_a_point_is_skipped_with_its_reason(tmp_path):
    fam, variants, grid = _setup(("v3", "v5"), ("dtype=fp32,fp16",), "batch=4")
    runner = FakeRunner()
    res = run_sweep(fam, variants, grid, tmp_path, runner=runner, gpu_name=GPU, console=_quiet())
    assert runner.calls == [(grid.points[0].slug, ["v3", "v5"]), (grid.points[1].slug, ["v5"])]
    assert res.skipped == ["v3 at dtype fp16: v3 reads fp32 K/V only (dtype=fp16); v5 and v6 read fp16/bf16/fp8"]
    state = M.find(tmp_path)["points"][1]["variants"]["v3"]
    assert state["status"] == "skipped" and "fp32 K/V only" in state["reason"]


@pytest.mark.lab
def test_invalid_points_and_failed_verification_are_recorded(tmp_path):
    fam, variants, grid = _setup(("v5",), ("q_heads=32,64", "kv_heads=8,64"), "dtype=fp16")
    res = run_sweep(fam, variants, grid, tmp_path, runner=FakeRunner(fail=("v5",)), gpu_name=GPU,
                    console=_quiet())
    assert res.invalid == ["q_heads 32, kv_heads 64: q_heads (32) must be a multiple of kv_heads (64)"]
    assert len(res.failed) == 3 and res.failed[0].startswith("v5 at q_heads 32, kv_heads 8: relative error")
    assert not list(tmp_path.rglob("*.bench.json"))  # a failed variant stores nothing
    counts = M.status_counts(M.find(tmp_path))
    assert (counts["invalid"], counts["failed"], counts["done"]) == (1, 3, 0)


@pytest.mark.lab
def test_a_shard_runs_only_its_points_and_its_manifest_knows_the_grid(tmp_path):
    fam, variants, grid = _setup()
    runner = FakeRunner()
    run_sweep(fam, variants, grid, tmp_path, shard=(2, 3), runner=runner, gpu_name=GPU, console=_quiet())
    assert [slug for slug, _ in runner.calls] == [p.slug for p in G.shard(grid.points, 2, 3)]
    data = M.find(tmp_path)
    assert len(data["points"]) == 8 and data["shards"] == [{"shard": 2, "of": 3}]
    assert [p["shard"] for p in data["points"]] == [G.shard_of(i, 3) for i in range(8)]
    assert data["grid"] == ["batch=1,4,16,64", "context=4096,32768"] and data["fixed_spec"] == "dtype=fp16"


@pytest.mark.lab
def test_another_sweep_under_the_same_name_is_refused(tmp_path):
    fam, variants, grid = _setup()
    run_sweep(fam, variants, grid, tmp_path, name="s", runner=FakeRunner(), gpu_name=GPU, console=_quiet())
    _, _, other = _setup(grid=("batch=1,2",))
    with pytest.raises(Exception, match="holds another sweep named 's'"):
        run_sweep(fam, variants, other, tmp_path, name="s", runner=FakeRunner(), gpu_name=GPU,
                  console=_quiet())


@pytest.mark.lab
def test_stored_results_are_found_without_knowing_the_gpu(tmp_path):
    fam, variants, grid = _setup(("v5",), ("batch=1,4",))
    run_sweep(fam, variants, grid, tmp_path, runner=FakeRunner(), gpu_name=GPU, console=_quiet())
    runner = FakeRunner()
    run_sweep(fam, variants, grid, tmp_path, runner=runner, gpu_name="", console=_quiet())
    assert runner.calls == []
    rec = results.find_records(tmp_path, "bench")[0]
    assert rec.data["variant"] == "v5" and json.loads(rec.path.read_text())["gpu_slug"] == "nvidia-h200"


def test_visible_gpu_follows_cuda_visible_devices(monkeypatch):
    from paprof.measure import provenance

    monkeypatch.setattr(provenance, "query_gpus", lambda: [("NVIDIA H200", "580"), ("NVIDIA A100", "580")])
    assert visible_gpu({}) is None
    assert visible_gpu({"CUDA_VISIBLE_DEVICES": "1"}) == "NVIDIA A100"
    assert visible_gpu({"CUDA_VISIBLE_DEVICES": "0"}) == "NVIDIA H200"
