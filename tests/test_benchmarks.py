"""Every script in benchmarks/ runs, at a tiny size in a temporary folder, and meets its
budgets (scaled down with the size, with room for a loaded machine: ``--slack``), so that
none of them rots (benchmarks/README.md: how to run them at full size, what they
measured last). The two that time a dozen fresh processes each are slow tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import ROOT, recorded

BENCH = ROOT / "benchmarks"
SLACK = "10"
"""The budgets' room in these runs: a tiny store on a shared CI machine."""


def _run(script: str, *args, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               PAPROF_JOBS="1")
    done = subprocess.run([sys.executable, str(BENCH / script), *map(str, args)], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{script}: exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done


def test_every_script_is_tested():
    tested = {"make_big_store.py", "make_big_sweep.py", "bench_load.py", "bench_compare.py",
              "bench_scale.py"}
    assert {p.name for p in BENCH.glob("*.py")} == tested


def test_make_big_store(tmp_path):
    _run("make_big_store.py", tmp_path / "store", "--runs", 5, cwd=tmp_path)
    sidecars = sorted((tmp_path / "store").rglob("*.json"))
    assert len(sidecars) == 5 and len(list((tmp_path / "store").rglob("*.ncu-rep"))) == 5
    assert len({json.loads(p.read_text())["variant"] for p in sidecars}) == 5
    # stored as paprof stores a run: each report's summary beside it, good for loading
    from paprof.read import store, summary

    reports = store.report_paths(tmp_path / "store")
    assert all(summary.read(r) is not None for r in reports)
    _run("make_big_store.py", tmp_path / "bare", "--runs", 2, "--no-summaries", cwd=tmp_path)
    assert not list((tmp_path / "bare").rglob("*" + summary.SUFFIX))


@pytest.mark.lab
def test_make_big_sweep(tmp_path):
    _run("make_big_sweep.py", tmp_path / "sweep", "--points", 4, "--batches", 2, cwd=tmp_path)
    assert len(list((tmp_path / "sweep").rglob("*.ncu-rep"))) == 8  # v5 and v6 at 4 points


def test_bench_load(tmp_path):
    done = _run("bench_load.py", recorded("h200"), "--results", 20, "--budget", 2.0 * float(SLACK),
                cwd=tmp_path)
    assert "1 report x 20 results: 20 kernel results" in done.stdout, done.stdout


@pytest.mark.slow
def test_bench_compare(tmp_path):
    done = _run("bench_compare.py", "--runs", recorded("h200"), "--repeat", 1, "--no-warm",
                "--slack", SLACK, "--json", cwd=tmp_path)
    results = json.loads(done.stdout)["results"]
    assert [r["case"] for r in results] == ["2 variants", "all shipped variants"]


@pytest.mark.slow
@pytest.mark.lab
def test_bench_scale(tmp_path):
    done = _run("bench_scale.py", "--dest", tmp_path / "scale", "--runs", 20, "--many", 5,
                "--repeat", 1, "--no-warm", "--slack", SLACK, "--json", cwd=tmp_path, timeout=300)
    results = {r["case"]: r for r in json.loads(done.stdout)["results"]}
    assert {"baseline update, 20 runs", "check, 20 runs", "load 20 results",
            "load 20 results, no summaries", "baseline update / load",
            "check / load"} <= set(results)
    assert not any(r.get("over_budget") for r in results.values())
    timed = [r for r in results.values() if "median_s" in r]  # each with its CPU and load
    assert timed and all(r["cpu_median_s"] > 0 and len(r["load_average"]) == 2 for r in timed)
