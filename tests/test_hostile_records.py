"""Hostile records and reports: each refused in one line (exit 2, the file and the field
named) and quickly, never a traceback or a hang (issue 38, items 5 and 6)."""

from __future__ import annotations

import json
import os
import shutil
import time

import pytest

from paprof.read import ncu_fastread, ncu_reader
from paprof.errors import UserError
from helpers import shipped


def _zero_tailed(tmp_path, zeros: int = 40 << 20):
    """A real report followed by ``zeros`` bytes of zeros, written sparse."""
    report = tmp_path / "zeros.ncu-rep"
    shutil.copy(shipped("v1"), report)
    os.truncate(report, report.stat().st_size + zeros)
    return report


def test_a_zero_filled_tail_is_refused_at_once_by_both_readers(tmp_path):
    report = _zero_tailed(tmp_path)
    start = time.perf_counter()
    with pytest.raises(ncu_fastread.Corrupt, match="empty blocks"):
        ncu_fastread.read_report(report, ["gpu__time_duration.sum"])
    with pytest.raises(UserError, match="corrupt.*empty blocks.*zero-filled"):
        ncu_reader.check_framing(report)
    with pytest.raises(UserError, match="corrupt.*empty blocks") as err:
        ncu_reader.open_report(report)
    assert "\n" not in str(err.value)
    assert time.perf_counter() - start < 0.5


def test_the_cli_says_a_zero_filled_report_is_damaged(tmp_path, invoke):
    report = _zero_tailed(tmp_path)
    start = time.perf_counter()
    result = invoke("table", report)
    assert result.exit_code == 2, result.output
    assert "empty blocks" in result.output and "Traceback" not in result.output
    assert time.perf_counter() - start < 5


# -- records read with limits (item 5) ---------------------------------------------------

DEEP = "[" * 100_000 + "]" * 100_000


def _store(tmp_path, variants=("v1", "v2")):
    root = tmp_path / "runs"
    for variant in variants:
        report = shipped(variant)
        folder = root / "nvidia-h200" / "paged_decode" / variant
        folder.mkdir(parents=True)
        shutil.copy(report, folder / report.name)
        shutil.copy(report.with_suffix(".json"), folder / report.with_suffix(".json").name)
    return root


def _sidecar(root, variant="v1"):
    return next((root / "nvidia-h200" / "paged_decode" / variant).glob("*.json"))


def _one_line_exit_2(result, *words):
    assert result.exit_code == 2, result.output
    assert result.output.count("\n") == 1 and "Traceback" not in result.output, result.output
    for word in words:
        assert word in result.output, result.output


@pytest.mark.parametrize("value, field", [
    (DEEP, "nested deeper than 64"),
    ('{"bytes": 1e400, "flops": 1}', "'work.bytes'"),
    ('{"bytes": 1' + "0" * 400 + ', "flops": 1}', "'work.bytes'"),
    ('{"bytes": -5, "flops": 1}', "'work.bytes'"),
    ('{"bytes": 5, "flops": Infinity}', "'work.flops'"),
    # no call per number unless one may be huge (jsonsafe._finite): each shape still caught
    ('{"bytes": 1' + "0" * 310 + '.5, "flops": 1}', "'work.bytes'"),
    ('{"bytes": ' + "9" * 250 + 'e99, "flops": 1}', "'work.bytes'"),
    ('{"bytes": 1E+0400, "flops": 1}', "'work.bytes'"),
    ('{"bytes": 5, "flops": -Infinity}', "'work.flops'"),
])
def test_a_hostile_sidecar_is_one_line_naming_the_file_and_field(tmp_path, invoke, value, field):
    root = _store(tmp_path, ("v1",))
    side = _sidecar(root)
    text = side.read_text()
    start = text.index('"work":')
    end = text.index("}", start) + 1
    side.write_text(text[:start] + '"work": ' + value + text[end:])
    _one_line_exit_2(invoke("table", root), str(side), field)


def test_a_sidecar_nested_deep_anywhere_is_refused(tmp_path, invoke):
    root = _store(tmp_path, ("v1",))
    side = _sidecar(root)
    side.write_text(side.read_text().rstrip().rstrip("}") + ', "extra": ' + DEEP + "}")
    _one_line_exit_2(invoke("table", root), str(side), "nested deeper than 64")


def test_a_measured_time_of_1e308_does_not_break_compare(tmp_path, invoke):
    root = _store(tmp_path)
    side = _sidecar(root, "v2")
    data = json.loads(side.read_text())
    data["duration_us_event"] = 1e308
    side.write_text(json.dumps(data))
    result = invoke("compare", "v1", "v2", "--runs", root, "--out", tmp_path / "r.html")
    assert result.exit_code in (0, 2), result.output
    assert "Traceback" not in result.output
    if result.exit_code == 2:
        _one_line_exit_2(result, str(side), "duration_us_event")


def _sweep(tmp_path):
    from helpers import recorded

    root = tmp_path / "bench"
    shutil.copytree(recorded("sweeps/h200-bench"), root)
    return root, next((root / "sweeps").glob("*.json"))


def test_a_deep_bench_record_and_manifest_are_refused(tmp_path):
    from paprof.sweep import manifest, results

    root, file = _sweep(tmp_path)
    bench = next(root.rglob("*.bench.json"))
    bench.write_text(bench.read_text().rstrip().rstrip("}") + ', "extra": ' + DEEP + "}")
    with pytest.raises(UserError, match="nested deeper than 64"):
        results.read_bench(bench)
    file.write_text(file.read_text().rstrip().rstrip("}") + ', "extra": ' + DEEP + "}")
    with pytest.raises(UserError, match="nested deeper than 64"):
        manifest.load(file)


def test_a_sweep_point_without_coords_is_refused_by_report_merge_and_load(tmp_path, invoke):
    root, file = _sweep(tmp_path)
    data = json.loads(file.read_text())
    del data["points"][2]["coords"]
    file.write_text(json.dumps(data))
    _one_line_exit_2(invoke("sweep-report", "--runs", root, "--out", tmp_path / "s.html"),
                     str(file), "point 2", "'coords'")
    _one_line_exit_2(invoke("merge", root, "--out", tmp_path / "merged"), "'coords'")
    assert not (tmp_path / "merged" / "sweeps").is_dir() or not any((tmp_path / "merged" / "sweeps").iterdir())


@pytest.mark.parametrize("text, field", [
    (DEEP, "nested deeper than 64"),
    ('{"kind": "paprof-baseline", "x": 1e999}', "'x' must be a finite number"),
])
def test_a_hostile_baseline_or_calibration_is_one_line(tmp_path, invoke, text, field):
    from paprof.gate import calibration

    path = tmp_path / "b.json"
    path.write_text(text)
    _one_line_exit_2(invoke("check", "--baseline", path, "--runs", _store(tmp_path, ("v1",))),
                     str(path), field)
    with pytest.raises(UserError, match=field.replace("'", ".")):
        calibration.load(path)


def test_a_record_larger_than_the_limit_is_refused(tmp_path, monkeypatch):
    from paprof import jsonsafe
    from paprof.read.record import RunRecord

    path = tmp_path / "big.json"
    path.write_text('{"pad": "' + "x" * 2000 + '"}')
    monkeypatch.setattr(jsonsafe, "MAX_BYTES", 1000)
    with pytest.raises(UserError, match=f"{path}.*larger than"):
        RunRecord.read(path)


def test_no_command_writes_inside_a_store_s_folders(tmp_path, invoke):
    """A report or baseline inside ``sweeps/`` (or a run's folder) would be read back as a
    record: a second regime file there made every later sweep-report fail (item 8)."""
    root, _file = _sweep(tmp_path)
    before = sorted(p.name for p in (root / "sweeps").iterdir())
    _one_line_exit_2(invoke("sweep-report", "--runs", root, "--out", root / "sweeps" / "r.html"),
                     "inside the run store")
    runs = _store(tmp_path, ("v1", "v2"))
    run_folder = runs / "nvidia-h200" / "paged_decode" / "v1"
    _one_line_exit_2(invoke("compare", "v1", "v2", "--runs", runs, "--out", run_folder / "r.html"),
                     "inside the run store")
    _one_line_exit_2(invoke("baseline", "update", "--runs", runs, "--out", runs / "sweeps" / "b.json"),
                     "inside the run store")
    assert sorted(p.name for p in (root / "sweeps").iterdir()) == before
    assert not (runs / "sweeps").exists() and not (run_folder / "r.html").exists()


@pytest.mark.parametrize("value", [0, -5, 1e-300])
def test_a_time_of_zero_or_less_or_absurdly_short_is_one_line(tmp_path, invoke, value):
    """A measured time of 0, -5 or 1e-300 us: the comparison said 'faster by' a number of
    300 digits, and a sweep's map dropped the point in silence."""
    root = _store(tmp_path, ("v1", "v2"))
    side = _sidecar(root)
    data = json.loads(side.read_text())
    data["duration_us_event"] = value
    side.write_text(json.dumps(data))
    _one_line_exit_2(invoke("compare", "v1", "v2", "--runs", root, "--out", tmp_path / "r.html"),
                     str(side), "'duration_us_event'")
    root, _file = _sweep(tmp_path / "sweep")
    record = sorted(root.rglob("*.bench.json"))[0]
    data = json.loads(record.read_text())
    data["median_us"] = value
    record.write_text(json.dumps(data))
    _one_line_exit_2(invoke("sweep-report", "--runs", root, "--out", tmp_path / "s.html"),
                     str(record), "'median_us'")
