"""paprof sweep / sweep-report / merge wiring: options, exit codes 0/1/2, one-line errors."""

from __future__ import annotations

import json
import os

import pytest
from click.testing import CliRunner

from paprof.sweep import gpus as gpus_module
from paprof.sweep import manifest as M
from paprof.sweep import run as run_module

from helpers import FakeRunner

SWEEP = ["sweep", "--variant", "v5", "--variant", "v6", "--grid", "batch=1,4,16,64",
         "--grid", "context=4096,32768", "--shape", "dtype=fp16"]


@pytest.fixture
def fake_bench(monkeypatch):
    fake = FakeRunner()
    monkeypatch.setitem(run_module.RUNNERS, "bench", fake)
    return fake


def invoke(cli, *args):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_help_names_every_option(paprof_cli):
    out = invoke(paprof_cli, "sweep", "--help").output
    for option in ("--variant", "--grid", "--shape", "--bench", "--profile", "--runs", "--force",
                   "--shard", "--gpus", "--name", "--list", "--report", "K from 1 to N"):
        assert option in out
    assert "sweep-report" in invoke(paprof_cli, "--help").output
    assert "--out" in invoke(paprof_cli, "merge", "--help").output


@pytest.mark.lab
def test_list_needs_no_gpu(paprof_cli, tmp_path):
    result = invoke(paprof_cli, *SWEEP, "--list", "--shard", "2/3", "--runs", str(tmp_path))
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert len(lines) == 4 and "batch 1, context 32768" in lines[0] and lines[0].endswith("to do")
    assert lines[-1].endswith("8 points; shard 2/3 holds 3")


@pytest.mark.parametrize("args, message", [
    (("--grid", "page=1..64"), "paprof: error: range '1..64' needs a step"),
    (("--grid", "page=0"), "paprof: error: --grid page=0: page must be at least 1, got 0"),
    (("--shard", "0/4"), "paprof: error: --shard 0/4: K must be between 1 and N"),
    (("--gpus", "0,0"), "paprof: error: --gpus 0,0: a GPU is named twice"),
])
@pytest.mark.lab
def test_bad_input_exits_2_with_one_line(paprof_cli, tmp_path, fake_bench, args, message):
    result = invoke(paprof_cli, *SWEEP, *args, "--runs", str(tmp_path))
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [result.output.strip()]
    assert result.output.startswith(message)
    assert fake_bench.calls == []


@pytest.mark.lab
def test_sweep_resume_and_report(paprof_cli, tmp_path, fake_bench):
    runs = tmp_path / "runs"
    result = invoke(paprof_cli, *SWEEP, "--runs", str(runs), "--report", str(tmp_path / "s.html"))
    assert result.exit_code == 0, result.output
    assert "8 points; 16 variant-points measured now, 0 already stored" in result.output
    assert "crossover: v6 is faster than v5 by 3x below batch 16 at context 4096" in result.output
    for name in ("s.html", "s.md", "s.regime.json"):
        assert (tmp_path / name).is_file()
    again = invoke(paprof_cli, *SWEEP, "--runs", str(runs))
    assert "0 variant-points measured now, 16 already stored" in again.output
    assert len(fake_bench.calls) == 8
    # the Markdown again, the regime on stdout: no HTML (its charts are the cost) asked for
    report = invoke(paprof_cli, "sweep-report", "--runs", str(runs), "--markdown", str(tmp_path / "s.md"),
                    "--json", "-", "--noise", "1")
    assert report.exit_code == 0, report.output
    assert json.loads(report.stdout)["kind"] == "paprof-regime"
    assert f"wrote {tmp_path / 's.md'} (replaced the earlier paprof report there)" in report.stderr


@pytest.mark.lab
def test_failed_verification_exits_1(paprof_cli, tmp_path, monkeypatch):
    monkeypatch.setitem(run_module.RUNNERS, "bench", FakeRunner(fail=("v5",)))
    result = invoke(paprof_cli, *SWEEP, "--runs", str(tmp_path))
    assert result.exit_code == 1
    assert result.output.splitlines()[-1].startswith("paprof: error: 8 variant-point(s) failed verification")


@pytest.mark.lab
def test_gpus_spawn_workers_that_run_the_same_sweep(paprof_cli, tmp_path, fake_bench, monkeypatch):
    seen = []

    class Done:
        returncode = 0

        def poll(self):
            return 0

    def spawner(argv, env, log):
        seen.append(env["CUDA_VISIBLE_DEVICES"])
        assert argv[1:4] == ["-m", "paprof", "sweep"]
        child = CliRunner().invoke(paprof_cli, argv[3:], catch_exceptions=False)
        assert child.exit_code == 0, child.output
        return Done()

    monkeypatch.setattr(gpus_module, "spawn", spawner)
    monkeypatch.setattr(gpus_module.run_on_gpus, "__kwdefaults__",
                        dict(gpus_module.run_on_gpus.__kwdefaults__, spawner=spawner, poll_s=0))
    runs = tmp_path / "runs"
    result = invoke(paprof_cli, *SWEEP, "--runs", str(runs), "--gpus", "0,1,2")
    assert result.exit_code == 0, result.output
    assert seen == ["0", "1", "2"]
    assert "merged 3 shard stores" in result.output and "16 done" in result.output
    assert M.status_counts(M.find(runs))["done"] == 16
    assert sorted(p.name for p in (tmp_path / "runs-shards").iterdir() if p.is_dir()) == \
        ["shard-1", "shard-2", "shard-3"]


@pytest.mark.lab
def test_one_gpu_is_the_same_as_none(paprof_cli, tmp_path, fake_bench, monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    result = invoke(paprof_cli, *SWEEP, "--runs", str(tmp_path / "runs"), "--gpus", "3")
    assert result.exit_code == 0 and os.environ["CUDA_VISIBLE_DEVICES"] == "3"
    assert not (tmp_path / "runs-shards").exists() and len(fake_bench.calls) == 8


@pytest.mark.lab
def test_merge_cli(paprof_cli, tmp_path, fake_bench):
    for k in (1, 2):
        assert invoke(paprof_cli, *SWEEP, "--shard", f"{k}/2", "--runs", str(tmp_path / f"s{k}")).exit_code == 0
    result = invoke(paprof_cli, "merge", str(tmp_path / "s1"), str(tmp_path / "s2"), "--out", str(tmp_path / "all"))
    assert result.exit_code == 0, result.output
    assert "16 results copied, 0 already there, 0 kept twice, 0 conflicts" in result.output
    missing = invoke(paprof_cli, "merge", str(tmp_path / "nope"), "--out", str(tmp_path / "all"))
    assert missing.exit_code == 2
    data = json.loads(next((tmp_path / "all" / "sweeps").glob("*.json")).read_text())
    assert len(data["shards"]) == 2
