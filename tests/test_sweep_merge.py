"""paprof merge and --gpus: shards joined, overlaps kept twice, provenance conflicts named."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from rich.console import Console

from paprof import registry
from paprof.sweep import grid as G
from paprof.sweep import manifest as M
from paprof.sweep import results
from paprof.sweep.gpus import parse_gpus, run_on_gpus, shards_folder
from paprof.sweep.merge import merge_stores
from paprof.sweep.run import run_sweep

from helpers import EXAMPLES, FakeRunner, GPU, record, write_record

QUIET = Console(stderr=True, force_terminal=False, width=200)


def _sweep(runs, shard=(1, 1), runner=None, grid=("batch=1,4,16,64", "context=4096,32768")):
    fam = registry.family("paged_decode")
    variants = registry.resolve(["v5", "v6"], fam.name)
    g = G.make_grid(fam.params, list(grid), "dtype=fp16")
    run_sweep(fam, variants, g, runs, shard=shard, runner=runner or FakeRunner(), gpu_name=GPU, console=QUIET)
    return g


@pytest.mark.lab
def test_shards_merge_into_the_whole_sweep(tmp_path):
    for k in (1, 2, 3):
        _sweep(tmp_path / f"s{k}", shard=(k, 3))
    res = merge_stores([tmp_path / f"s{k}" for k in (1, 2, 3)], tmp_path / "all")
    assert (res.copied, res.identical, res.kept_both, res.conflicts) == (16, 0, [], [])
    data = M.find(tmp_path / "all")
    assert M.status_counts(data)["done"] == 16
    assert sorted((s["shard"], s["of"]) for s in data["shards"]) == [(1, 3), (2, 3), (3, 3)]
    again = merge_stores([tmp_path / "s1"], tmp_path / "all")  # merging again changes nothing
    assert (again.copied, again.identical) == (0, 6)
    assert len(list((tmp_path / "all").rglob("*.bench.json"))) == 16


@pytest.mark.lab
def test_the_same_point_twice_keeps_both_and_reports_a_provenance_conflict(tmp_path):
    fam = registry.family("paged_decode")
    params = fam.parse("batch=4,context=32768,dtype=fp16")
    write_record(tmp_path / "a", record("paged_decode", "v6", params, 100.0))
    write_record(tmp_path / "b", record("paged_decode", "v6", params, 90.0,
                                        created="2026-12-02T10:00:00+00:00"))
    write_record(tmp_path / "c", record("paged_decode", "v6", params, 80.0, driver="575.1",
                                        created="2026-12-03T10:00:00+00:00"))
    res = merge_stores([tmp_path / "a", tmp_path / "b", tmp_path / "c"], tmp_path / "out")
    assert res.copied == 3 and len(res.kept_both) == 2
    assert res.conflicts == [res.conflicts[0]] and "driver 580.159.04 vs 575.1" in res.conflicts[0]
    assert "paged_decode/v6 at b4_ctx32768_h32x8_d128_p16_fp16" in res.conflicts[0]
    files = sorted(p.name for p in (tmp_path / "out").rglob("*.bench.json"))
    assert len(files) == 3 and "b4_ctx32768_h32x8_d128_p16_fp16.bench.json" in files
    newest = results.latest(results.find_records(tmp_path / "out", "bench"))
    assert [r.data["median_us"] for r in newest.values()] == [80.0]


def test_profiled_runs_merge_with_their_sidecars_and_compare_reads_the_result(tmp_path):
    src = EXAMPLES.parent / "sweeps" / "h200-profile" / "nvidia-h200" / "paged_decode"  # real runs
    for name, variant in (("a", "v5"), ("b", "v6")):
        folder = tmp_path / name / "nvidia-h200" / "paged_decode" / variant
        folder.mkdir(parents=True)
        for f in (src / variant).glob("b4_ctx16384_*"):
            shutil.copy(f, folder / f.name)
    side = tmp_path / "b" / "nvidia-h200" / "paged_decode" / "v6" / "b4_ctx16384_h32x8_d128_p16_fp16.json"
    dup = tmp_path / "c" / "nvidia-h200" / "paged_decode" / "v6"
    shutil.copytree(side.parent, dup)
    data = json.loads((dup / side.name).read_text())
    data.update(ncu_version="2025.2.0.0", created="2027-01-01T00:00:00+00:00")
    (dup / side.name).write_text(json.dumps(data))
    res = merge_stores([tmp_path / n for n in "abc"], tmp_path / "out")
    assert res.copied == 3 and len(res.kept_both) == 1
    assert "ncu_version 2025.3.1.0 vs 2025.2.0.0" in res.conflicts[0]
    reports = sorted(p.name for p in (tmp_path / "out").rglob("*.ncu-rep"))
    assert len(reports) == 3
    kept = [p for p in (tmp_path / "out").rglob("*.ncu-rep") if p.name.count(".") == 2]
    assert kept and kept[0].with_name(kept[0].name.replace(".ncu-rep", ".json")).is_file()

    from paprof.read import store
    from paprof.api import write_report

    assert store.latest(tmp_path / "out", "v6").sidecar["ncu_version"] == "2025.2.0.0"
    out = write_report(["v5", "v6"], runs=tmp_path / "out", out=None, markdown="-")
    assert "v6" in out.markdown_text


@pytest.mark.lab
def test_different_sweeps_under_one_name_are_a_conflict(tmp_path):
    _sweep(tmp_path / "a", runner=FakeRunner())
    _sweep(tmp_path / "b", grid=("batch=1,2",))
    name = M.find(tmp_path / "a")["name"]
    other = M.load(M.path(tmp_path / "b", M.find(tmp_path / "b")["name"]))
    other["name"] = name
    M.save(tmp_path / "b", other)
    res = merge_stores([tmp_path / "a", tmp_path / "b"], tmp_path / "out")
    assert any("different sweeps under one name" in c for c in res.conflicts)


@pytest.mark.lab
def test_merge_refuses_an_out_inside_a_source(tmp_path):
    import pytest

    from paprof.errors import UserError

    _sweep(tmp_path / "a", grid=("batch=1",))
    with pytest.raises(UserError, match="lies inside"):
        merge_stores([tmp_path / "a"], tmp_path / "a" / "merged")
    with pytest.raises(UserError, match="no such run store"):
        merge_stores([tmp_path / "nope"], tmp_path / "out")


class FakeProcess:
    def __init__(self, code):
        self.code = code

    def poll(self):
        return self.code


@pytest.mark.lab
def test_gpus_spawn_one_pinned_worker_per_gpu_then_merge(tmp_path, monkeypatch):
    monkeypatch.setenv("NCCL_NVLS_ENABLE", "0")
    spawned = []

    def spawner(argv, env, log):
        spawned.append((argv, env["CUDA_VISIBLE_DEVICES"], env.get("NCCL_NVLS_ENABLE")))
        k, n = map(int, argv[argv.index("--shard") + 1].split("/"))
        _sweep(Path(argv[argv.index("--runs") + 1]), shard=(k, n))
        return FakeProcess(0)

    runs = tmp_path / "runs"
    workers, merged = run_on_gpus(["--variant", "v5"], parse_gpus("0,1,2,3"), runs, spawner=spawner,
                                  console=QUIET, poll_s=0)
    assert [gpu for _, gpu, _ in spawned] == ["0", "1", "2", "3"]
    assert all(nvls == "0" for _, _, nvls in spawned)
    argv = spawned[1][0]
    assert argv[1:4] == ["-m", "paprof", "sweep"] and argv[argv.index("--shard") + 1] == "2/4"
    assert argv[argv.index("--runs") + 1] == str(shards_folder(runs) / "shard-2")
    assert not shards_folder(runs).is_relative_to(runs)
    assert [w.returncode for w in workers] == [0] * 4 and merged.copied == 16
    assert M.status_counts(M.find(runs))["done"] == 16


def test_gpus_inside_a_matrix_shard(tmp_path):
    spawned = []

    def spawner(argv, env, log):
        spawned.append(argv[argv.index("--shard") + 1])
        return FakeProcess(1 if len(spawned) == 2 else 0)

    workers, _ = run_on_gpus([], ["0", "1"], tmp_path / "runs", shard=(2, 3), spawner=spawner,
                             console=QUIET, poll_s=0)
    assert spawned == ["2/6", "5/6"] and [w.returncode for w in workers] == [0, 1]


def test_parse_gpus_errors():
    import pytest

    from paprof.errors import UsageError

    assert parse_gpus("0, 1") == ["0", "1"]
    for bad in ("", "0,,1", "0,0"):
        with pytest.raises(UsageError):
            parse_gpus(bad)
