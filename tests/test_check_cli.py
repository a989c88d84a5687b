"""``paprof check`` and ``paprof baseline update`` through the command line.

Two kinds of test: wiring on synthetic tables (``gate.load_table`` and
``recheck.profile_current`` replaced), and the real thing on the recorded H200 runs
(tests/data, ``helpers.recorded``).
"""

from __future__ import annotations

import errno
import json
import os
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from paprof import gate
from paprof.measure import recheck
from helpers import EXAMPLES, make_rows, make_table, recorded, shipped


# -- wiring, on synthetic tables -------------------------------------------------------


@pytest.fixture
def runs_table(monkeypatch):
    """Replace the loader: ``runs_table.rows`` is what 'the runs' hold."""

    class Holder:
        rows = make_rows()
        seen = []

    def fake_load(paths, variants=None, scan=None):
        Holder.seen.append((str(paths), list(variants or [])))
        return make_table(Holder.rows)

    def fake_runs(paths, variants=None, scan=None):
        return None, fake_load(paths, variants, scan)

    monkeypatch.setattr(gate, "load_table", fake_load)
    monkeypatch.setattr(gate, "load_runs", fake_runs)
    monkeypatch.setattr(gate.measurement, "load_runs", fake_runs)
    return Holder


@pytest.fixture
def baseline_file(invoke, tmp_path, runs_table):
    path = tmp_path / "perf" / "baseline.json"
    result = invoke("baseline", "update", "--runs", "runs", "--variant", "v3", "--out", path)
    assert result.exit_code == 0, result.output
    return path


def test_update_writes_a_versioned_baseline(baseline_file, runs_table):
    data = json.loads(baseline_file.read_text())
    assert data["schema"] == 3 and data["kind"] == "paprof-baseline"
    (entry,) = data["entries"]
    assert set(entry["metrics"]) == {"dram_throughput_pct", "duration_us", "dram_bytes"}
    assert entry["provenance"]["gpu"] == "NVIDIA H200"
    assert runs_table.seen == [("runs", ["v3"])]


def test_update_refuses_to_overwrite_without_force(invoke, baseline_file):
    before = baseline_file.read_text()
    result = invoke("baseline", "update", "--out", baseline_file)
    assert result.exit_code == 2
    assert "--force" in result.stderr and "Traceback" not in result.output
    assert baseline_file.read_text() == before
    assert invoke("baseline", "update", "--out", baseline_file, "--force").exit_code == 0


def test_check_passes_on_the_same_runs(invoke, baseline_file, runs_table, tmp_path):
    junit, md = tmp_path / "check.xml", tmp_path / "summary.md"
    result = invoke("check", "--baseline", baseline_file, "--junit", junit, "--markdown", md)
    assert result.exit_code == 0, result.output
    assert "PASS" in result.stdout and "dram_throughput_pct" in result.stdout
    assert runs_table.seen[-1] == ("runs", ["paged_decode/v3"])  # only the baseline's variants
    assert ET.parse(junit).getroot().get("failures") == "0"
    assert md.read_text().startswith("## paprof check: PASS")


def test_check_fails_with_exit_1_naming_the_regression(invoke, baseline_file, runs_table, tmp_path):
    runs_table.rows = make_rows(dram=(57.0,))
    junit = tmp_path / "check.xml"
    result = invoke("check", "--baseline", baseline_file, "--junit", junit)
    assert result.exit_code == 1
    line = next(l for l in result.stdout.splitlines() if l.startswith("REGRESSION"))
    for part in ("paged_decode/v3", "dram_throughput_pct", "DRAM throughput", "baseline 80 %",
                 "now 57 %", "allowed >= 77 %"):
        assert part in line
    assert ET.parse(junit).getroot().get("failures") == "1"


@pytest.mark.parametrize("tolerance, code", [("23", 0), ("22.9375", 1)])
def test_tolerance_option_edges(invoke, baseline_file, runs_table, tolerance, code):
    runs_table.rows = make_rows(dram=(57.0,))
    result = invoke("check", "--baseline", baseline_file, "--metric", "dram_throughput_pct",
                    "--tolerance", f"dram_throughput_pct={tolerance}")
    assert result.exit_code == code, result.output


def test_mismatched_gpu_is_exit_2_not_a_verdict(invoke, baseline_file, runs_table, tmp_path):
    runs_table.rows = make_rows(dram=(57.0,), gpu="NVIDIA A100-SXM4-80GB")
    junit = tmp_path / "check.xml"
    result = invoke("check", "--baseline", baseline_file, "--junit", junit)
    assert result.exit_code == 2
    assert "NVIDIA A100-SXM4-80GB" in result.stderr and "--allow-mismatch" in result.stderr
    assert "REGRESSION" not in result.output and not junit.exists()
    allowed = invoke("check", "--baseline", baseline_file, "--allow-mismatch")
    assert allowed.exit_code == 1
    assert "mismatch allowed" in allowed.stdout


@pytest.mark.parametrize(
    "args, words",
    [
        (["--profiled-launches", "3"], "--profiled-launches needs --profile"),
        (["--tolerance", "lots"], "is not [METRIC=]NUMBER[%]"),
        (["--metric", "grid_size"], "no direction declared"),
        (["--profiled-launches", "0", "--profile"], "--profiled-launches"),
    ],
)
def test_bad_options_exit_2(invoke, baseline_file, runs_table, args, words):
    result = invoke("check", "--baseline", baseline_file, *args)
    assert result.exit_code == 2
    assert words in result.stderr


def test_corrupt_and_missing_baselines_exit_2(invoke, tmp_path, runs_table):
    bad = tmp_path / "bad.json"
    bad.write_text('{"kind": "paprof-baseline", "schema": 1, "entries": [')
    result = invoke("check", "--baseline", bad)
    assert result.exit_code == 2 and "corrupt" in result.stderr
    bad.write_text('{"kind": "paprof-baseline", "schema": 7, "entries": []}')
    result = invoke("check", "--baseline", bad)
    assert result.exit_code == 2 and "schema 7" in result.stderr
    result = invoke("check", "--baseline", tmp_path / "none.json")
    assert result.exit_code == 2 and "does not exist" in result.stderr


def test_impossible_baseline_is_exit_2_not_a_regression(invoke, baseline_file, runs_table):
    data = json.loads(baseline_file.read_text())
    data["entries"][0]["metrics"]["duration_us"]["value"] = -1.0
    baseline_file.write_text(json.dumps(data))
    result = invoke("check", "--baseline", baseline_file)
    assert result.exit_code == 2 and "REGRESSION" not in result.output
    assert "corrupt" in result.stderr and "cannot be negative" in result.stderr


def _fail_with(monkeypatch, call: str, code: int) -> None:
    from paprof import outputs

    def fail(*args, **kwargs):
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(outputs.tempfile if call == "mkstemp" else outputs.os, call, fail)


def _one_line(result, code=2) -> str:
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    (line,) = result.stderr.splitlines()
    assert line.startswith("paprof: error: ")
    return line


@pytest.mark.parametrize("call, code, words", [
    ("mkstemp", errno.EROFS, "Read-only file system"),
    ("fsync", errno.ENOSPC, "No space left on device"),
    ("replace", errno.EACCES, "Permission denied"),
])
def test_failed_baseline_write_is_one_line_exit_2(invoke, runs_table, tmp_path, monkeypatch,
                                                   call, code, words):
    _fail_with(monkeypatch, call, code)
    out = tmp_path / "b.json"
    assert words in _one_line(invoke("baseline", "update", "--variant", "v3", "--out", out))
    assert list(tmp_path.iterdir()) == []


def test_baseline_under_a_regular_file_is_one_line_exit_2(invoke, runs_table, tmp_path):
    (tmp_path / "file").write_text("x")
    line = _one_line(invoke("baseline", "update", "--out", tmp_path / "file" / "b.json"))
    assert "cannot write" in line


def test_concurrent_baseline_updates_do_not_collide(baseline_v3_entries, tmp_path, monkeypatch):
    """Both updates' temporary files exist at once (the renames wait for each other)."""
    import threading

    from paprof import outputs

    barrier, real, errors = threading.Barrier(2, timeout=120), os.replace, []  # a guard, not a limit

    def replace(src, dst):
        barrier.wait()
        return real(src, dst)

    monkeypatch.setattr(outputs.os, "replace", replace)
    path = tmp_path / "b.json"

    def save():
        try:
            gate.save_baseline(baseline_v3_entries, path, force=True)
        except BaseException as err:  # noqa: BLE001 (reported below)
            errors.append(err)

    threads = [threading.Thread(target=save) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert gate.load_baseline(path) == baseline_v3_entries
    assert [p.name for p in tmp_path.iterdir()] == ["b.json"]


@pytest.fixture
def baseline_v3_entries(runs_table):
    return gate.make_baseline(make_table(runs_table.rows), variants=["v3"])


@pytest.mark.parametrize("option", ["--junit", "--markdown"])
def test_check_outputs_fail_as_one_line_before_any_work(invoke, baseline_file, runs_table,
                                                        tmp_path, monkeypatch, option):
    runs_table.seen.clear()
    (tmp_path / "file").write_text("x")
    line = _one_line(invoke("check", "--baseline", baseline_file, option, tmp_path / "file" / "x"))
    assert "cannot write" in line and runs_table.seen == []  # refused before loading the runs
    line = _one_line(invoke("check", "--baseline", baseline_file, option, baseline_file, "--force"))
    assert "inputs" in line and json.loads(baseline_file.read_text())["kind"] == "paprof-baseline"
    _fail_with(monkeypatch, "fsync", errno.ENOSPC)
    out = tmp_path / "out"
    assert "No space left" in _one_line(invoke("check", "--baseline", baseline_file, option, out))
    assert not out.exists() and [p.name for p in tmp_path.iterdir()] == ["file", "perf"]


@pytest.mark.parametrize("option", ["--junit", "--markdown"])
def test_check_outputs_replace_only_empty_own_or_forced_files(invoke, baseline_file, runs_table,
                                                              tmp_path, option):
    out = tmp_path / "summary"
    out.write_text("")  # as $GITHUB_STEP_SUMMARY is at the start of a step
    assert invoke("check", "--baseline", baseline_file, option, out).exit_code == 0
    assert invoke("check", "--baseline", baseline_file, option, out).exit_code == 0  # our own
    out.write_text("someone's notes")
    assert "--force" in _one_line(invoke("check", "--baseline", baseline_file, option, out))
    assert out.read_text() == "someone's notes"
    assert invoke("check", "--baseline", baseline_file, option, out, "--force").exit_code == 0
    assert "paprof check" in out.read_text()


def test_profile_uses_the_profiler_with_repeat_launches(invoke, baseline_file, monkeypatch):
    calls = []

    def fake_profile(baseline, launches, runs=None, **kwargs):
        calls.append((launches, runs, [e.variant for e in baseline.entries]))
        return make_table(make_rows(dram=(80.5, 80.0, 79.5, 80.25, 79.75)))

    monkeypatch.setattr(recheck, "profile_current", fake_profile)
    result = invoke("check", "--baseline", baseline_file, "--profile", "--profiled-launches", "5")
    assert result.exit_code == 0, result.output
    assert calls == [(5, None, ["v3"])]
    assert "± 0.5 pts" in result.stdout


def _event_rows(center, n=30, seed=0, **sidecar):
    times = list(np.random.default_rng(seed).normal(center, 0.5, n))
    return make_rows(duration_us_event=float(np.median(times)), duration_us_event_all=times,
                     gate_metrics=["duration_us_event", "dram_bytes"], **sidecar)


@pytest.mark.parametrize("factor, code, word", [(1.0, 0, "same"), (1.10, 1, "regressed"),
                                                (0.9, 0, "improved")])
def test_event_timed_samples_from_the_sidecar_are_gated(invoke, runs_table, tmp_path, factor,
                                                        code, word):
    runs_table.rows = _event_rows(300)
    path = tmp_path / "b.json"
    assert invoke("baseline", "update", "--out", path).exit_code == 0
    stored = json.loads(path.read_text())["entries"][0]["metrics"]["duration_us_event"]
    assert len(stored["samples"]) == 30
    runs_table.rows = _event_rows(300 * factor, seed=1)
    result = invoke("check", "--baseline", path)
    assert result.exit_code == code, result.output
    assert word in result.stdout
    if code:
        assert "REGRESSION softmax" not in result.stdout and "% CI)" in result.stdout


def test_profile_remeasures_an_ambiguous_decision(invoke, runs_table, tmp_path, monkeypatch):
    runs_table.rows = _event_rows(300)
    path = tmp_path / "b.json"
    assert invoke("baseline", "update", "--out", path).exit_code == 0
    tables = [make_table(_event_rows(306, n=6, seed=s)) for s in (3, 4, 5)]  # 2 % slower
    calls = []

    def fake_profile(baseline, launches, runs=None, time_launches=None, ceiling=True):
        calls.append((launches, time_launches, ceiling))
        return tables[len(calls) - 1]

    monkeypatch.setattr(recheck, "profile_current", fake_profile)
    result = invoke("check", "--baseline", path, "--profile", "--timed-launches", "6", "--rounds", "3")
    assert result.exit_code == 0, result.output
    assert calls == [(1, 6, True)] * 3
    assert "ambiguous after 3 measurements" in result.stdout
    calls.clear()
    result = invoke("check", "--baseline", path, "--profile", "--timed-launches", "6", "--rounds", "2",
                    "--fail-ambiguous")
    assert result.exit_code == 1 and len(calls) == 2, result.output


def test_help_documents_exit_codes_and_tolerances(invoke):
    text = invoke("check", "--help").output
    for word in ("0 pass", "1 regression", "2 bad input", "dram_throughput_pct=3",
                 "--allow-mismatch", "GITHUB_STEP_SUMMARY"):
        assert word in text
    assert "--out" in invoke("baseline", "update", "--help").output


# -- on the shipped H200 runs ----------------------------------------------------------


def test_shipped_v3_baseline_records_provenance(v3_baseline):
    data = json.loads(v3_baseline.read_text())
    (entry,) = data["entries"]
    assert (entry["family"], entry["variant"]) == ("paged_decode", "v3")
    assert "batch=64" in entry["shape"] and "context=4096" in entry["shape"]
    prov = entry["provenance"]
    assert prov["gpu"] == "NVIDIA H200"
    assert prov["ncu_version"] and prov["clock_control"] and prov["sections"]
    for metric in ("dram_throughput_pct", "duration_us", "dram_bytes"):
        assert entry["metrics"][metric]["value"] > 0


def test_shipped_v3_passes_its_own_baseline(invoke, v3_baseline, tmp_path):
    junit = tmp_path / "check.xml"
    result = invoke("check", "--baseline", v3_baseline, "--runs", EXAMPLES, "--junit", junit)
    assert result.exit_code == 0, result.output
    root = ET.parse(junit).getroot()
    assert (root.get("tests"), root.get("failures")) == ("3", "0")


def test_update_and_check_read_each_sidecar_once(invoke, tmp_path, monkeypatch):
    # The store is indexed once per command: for the outputs' inputs and for the runs
    # (a store of 10,000 runs read every sidecar three times).
    from paprof.read import store

    shipped("v3")
    reads = []
    real = store._read_sidecar
    monkeypatch.setattr(store, "_read_sidecar",
                        lambda report: reads.append(str(report)) or real(report))
    held = len(store.find_runs(EXAMPLES))
    reads.clear()
    out = tmp_path / "all.json"
    assert invoke("baseline", "update", "--runs", EXAMPLES, "--out", out).exit_code == 0
    assert len(reads) == len(set(reads)) == held
    reads.clear()
    result = invoke("check", "--baseline", out, "--runs", EXAMPLES)
    assert result.exit_code == 0, result.output
    assert len(reads) == len(set(reads)) == held


def test_shipped_v2_fails_v3_baseline_naming_dram_throughput(
    invoke, v3_baseline, v2_as_v3, tmp_path
):
    junit, md = tmp_path / "check.xml", tmp_path / "summary.md"
    result = invoke("check", "--baseline", v3_baseline, "--runs", v2_as_v3, "--junit", junit,
                    "--markdown", md)
    assert result.exit_code == 1, result.output
    regressions = [l for l in result.stdout.splitlines() if l.startswith("REGRESSION")]
    assert any("dram_throughput_pct (DRAM throughput)" in l and "paged_decode/v3" in l
               for l in regressions)
    failures = ET.parse(junit).getroot().findall(".//failure")
    assert any("dram_throughput_pct" in f.get("message") for f in failures)
    assert "**REGRESSED**" in md.read_text()


def test_shipped_tolerance_edges(invoke, v3_baseline, v2_as_v3):
    base = json.loads(v3_baseline.read_text())["entries"][0]["metrics"]["dram_throughput_pct"]
    now = gate.measure(gate.load_table(v2_as_v3), ["dram_throughput_pct"])[0]
    drop = base["value"] - now.metrics["dram_throughput_pct"].value
    allowance = drop - base["spread"] - now.metrics["dram_throughput_pct"].spread
    assert allowance > 1.0, "v2 should lose DRAM throughput against v3 on the H200"
    for tolerance, code in ((drop + 0.01, 0), (drop - 0.01, 1)):
        result = invoke("check", "--baseline", v3_baseline, "--runs", v2_as_v3,
                        "--metric", "dram_throughput_pct",
                        "--tolerance", f"dram_throughput_pct={tolerance:.6f}")
        assert result.exit_code == code, (tolerance, result.output)


def test_shipped_mismatched_gpu_exits_2(invoke, v3_baseline):
    data = json.loads(v3_baseline.read_text())
    data["entries"][0]["provenance"]["gpu"] = "NVIDIA A100-SXM4-80GB"
    v3_baseline.write_text(json.dumps(data))
    result = invoke("check", "--baseline", v3_baseline, "--runs", EXAMPLES)
    assert result.exit_code == 2
    assert "NVIDIA A100-SXM4-80GB" in result.stderr and "NVIDIA H200" in result.stderr
    allowed = invoke("check", "--baseline", v3_baseline, "--runs", EXAMPLES, "--allow-mismatch")
    assert allowed.exit_code == 0, allowed.output


def test_shipped_corrupt_baseline_exits_2(invoke, v3_baseline):
    v3_baseline.write_text(v3_baseline.read_text()[:-30])
    result = invoke("check", "--baseline", v3_baseline, "--runs", EXAMPLES)
    assert result.exit_code == 2 and "corrupt" in result.stderr


@pytest.mark.lab
def test_shipped_profile_path_end_to_end_with_fake_ncu(
    invoke, v3_baseline, fake_bin, fake_launcher, monkeypatch, tmp_path
):
    """``check --profile --profiled-launches 3`` drives the real profiler (fake ncu copies v3's report)."""
    monkeypatch.setenv("FAKE_NCU_REPORT", str(shipped("v3")))
    argv_file = tmp_path / "ncu-argv.json"
    monkeypatch.setenv("FAKE_NCU_ARGV", str(argv_file))
    runs = tmp_path / "new-runs"
    result = invoke("check", "--baseline", v3_baseline, "--profile", "--profiled-launches", "3",
                    "--runs", runs)
    assert result.exit_code == 0, result.output
    assert "PASS" in result.stdout
    ncu_argv = json.loads(argv_file.read_text())
    assert ncu_argv[ncu_argv.index("--launch-count") + 1] == "3"
    assert ncu_argv[ncu_argv.index("--clock-control") + 1] == "none"
    (sidecar,) = runs.rglob("v3/*.json")
    assert json.loads(sidecar.read_text())["launches"] == 3


@pytest.mark.lab
def test_check_table_keeps_the_dtype_of_each_shape(invoke, tmp_path):
    """v5 runs at fp16 and fp32: the rows must not look the same (the shape was cut)."""
    import shutil

    store = tmp_path / "runs" / "nvidia-h200" / "paged_decode" / "v5"
    store.mkdir(parents=True)
    fp16 = recorded("sweeps/h200-profile") / "nvidia-h200" / "paged_decode" / "v5"
    for source in [*(EXAMPLES / "nvidia-h200" / "paged_decode" / "v5").glob("b64_ctx4096_*_fp32.*"),
                   *fp16.glob("b64_ctx4096_*_fp16.*")]:
        shutil.copy(source, store)
    runs = tmp_path / "runs"
    out = tmp_path / "v5.json"
    assert invoke("baseline", "update", "--runs", runs, "--variant", "v5", "--out", out).exit_code == 0
    result = invoke("check", "--baseline", out, "--runs", runs)
    assert result.exit_code == 0, result.output
    rows = [line for line in result.stdout.splitlines() if "paged_decode/v5" in line]
    assert sum("b64_ctx4096_h32x8_d128_p16_fp16" in r for r in rows) == 3
    assert sum("b64_ctx4096_h32x8_d128_p16_fp32" in r for r in rows) == 3


def test_profile_refuses_a_command_run_in_one_line():
    from paprof.gate import Baseline, Entry, Provenance
    from paprof.errors import UserError

    entry = Entry("command", "mine", "", {}, Provenance())
    with pytest.raises(UserError, match="it is an external command"):
        recheck.profile_current(Baseline([entry]))


def test_analysis_never_imports_the_gpu_side():
    import subprocess
    import sys

    code = ("import sys, paprof.gate, paprof.explain.compare, paprof.model.load, "
            "paprof.render.build, paprof.compare_flow; bad = [m for m in sys.modules if m.startswith(('paprof.measure.kernels', "
            "'paprof.measure.profile', 'paprof.families', 'cupy'))]; print(bad); sys.exit(bool(bad))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_long_verdict_lists_only_what_is_not_the_same():
    from types import SimpleNamespace

    from paprof.commands import check as check_cmd

    def result(i, outcome):
        return SimpleNamespace(
            name=f"fam/v{i}", family="", shape=f"s{i}", shape_now=None, metric="duration_us",
            baseline=1, now=2, delta_text="+1", allowed_text="<= 1", outcome=outcome,
            fmt_stat=str)

    results = [result(i, "same") for i in range(300)] + [result(300, "regressed")]
    table, hidden = check_cmd._verdict_table(SimpleNamespace(results=results))
    assert (table.row_count, hidden) == (1, 300)
    table, hidden = check_cmd._verdict_table(SimpleNamespace(results=results[:150]))
    assert (table.row_count, hidden) == (150, 0)


def test_update_prints_its_first_entries_and_counts_the_rest(invoke, runs_table, tmp_path, monkeypatch):
    from paprof.commands import check as check_command

    path = tmp_path / "base.json"
    shown = invoke("baseline", "update", "--runs", "runs", "--variant", "v3", "--out", path)
    assert shown.exit_code == 0 and "paged_decode/v3 at " in shown.output and "more entries" not in shown.output
    monkeypatch.setattr(check_command, "SHOWN_ENTRIES", 0)
    counted = invoke("baseline", "update", "--runs", "runs", "--variant", "v3", "--out", path, "--force")
    assert counted.exit_code == 0 and "paged_decode/v3 at " not in counted.output
    assert "... and 1 more entries (the file holds every one)" in counted.output
    assert len(json.loads(path.read_text())["entries"]) == 1
