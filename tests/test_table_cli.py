"""``paprof table`` wiring: formats, --out, --columns, --per-variant, errors (exit 2)."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from paprof.render import export
from paprof.model import load
from paprof.cli import main

from helpers import make_action


@pytest.fixture
def reports(tmp_path, monkeypatch):
    """Two placeholder reports (v3: one kernel; v4: partial + merge) the loader reads
    through a stand-in open_report."""
    actions = {
        "v3.ncu-rep": [make_action("paged_decode_v3", dram_bytes_read=None)],
        "v4.ncu-rep": [make_action("partial", duration_us=800.0),
                       make_action("merge", duration_us=20.0, grid_size=2048.0)],
    }
    for name in actions:
        (tmp_path / name).write_bytes(b"NVR\x00")
    monkeypatch.setattr(load, "open_report", lambda path: (None, actions[Path(path).name]))
    return tmp_path


def run(*args):
    result = CliRunner().invoke(main, ["table", *map(str, args)])
    assert "Traceback" not in result.output, result.output
    return result


def test_text_is_a_table_with_the_bottleneck_and_why(reports):
    result = run(reports / "v3.ncu-rep", reports / "v4.ncu-rep")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    header = lines[0].split()
    for name in ("variant", "kernel", "time_us", "dram%", "GB/s", "limiter", "bottleneck"):
        assert name in header
    assert sum("dram-bound" in line for line in lines[1:4]) == 3
    assert any(line.startswith("v3: dram-bound: DRAM throughput 84.9 %") for line in lines)
    assert "note: not recorded" not in result.stderr  # dram_bytes_read is not a text column


def test_csv_has_every_scalar_column(reports):
    result = run(reports / "v3.ncu-rep", "--format", "csv")
    assert result.exit_code == 0, result.output
    df = pd.read_csv(io.StringIO(result.stdout))
    expected = [c for c in load.columns() if c not in ("rules", "sidecar")]
    assert list(df.columns) == expected
    assert df.loc[0, "duration_us"] == pytest.approx(600.0)
    assert df.loc[0, "bottleneck_evidence"].startswith("DRAM throughput 84.9 % of peak")


def test_json_records_with_null_for_missing(reports):
    result = run(reports / "v3.ncu-rep", "--format", "json")
    assert result.exit_code == 0, result.output
    (record,) = json.loads(result.stdout)
    assert record["variant"] == "v3" and record["bottleneck"] == "dram-bound"
    assert record["dram_bytes_read"] is None
    assert "rules" not in record and "sidecar" not in record


def test_columns_option_selects_and_orders(reports):
    result = run(reports / "v3.ncu-rep", "--format", "csv", "--columns", "bottleneck,duration_us",
                 "--columns", "variant")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0] == "bottleneck,duration_us,variant"


def test_unknown_column_exits_2(reports):
    result = run(reports / "v3.ncu-rep", "--columns", "nope")
    assert result.exit_code == 2
    assert "paprof: error: unknown column(s): nope" in result.stderr


def test_per_variant_combines_the_split_kv_kernels(reports):
    result = run(reports / "v4.ncu-rep", "--per-variant", "--format", "csv")
    assert result.exit_code == 0, result.output
    df = pd.read_csv(io.StringIO(result.stdout))
    assert len(df) == 1
    assert df.loc[0, "kernels"] == "partial | merge"
    assert df.loc[0, "duration_us"] == pytest.approx(820.0)


def test_out_writes_a_file(reports, tmp_path):
    out = tmp_path / "t.csv"
    result = run(reports / "v4.ncu-rep", "--format", "csv", "--out", out)
    assert result.exit_code == 0, result.output
    assert result.stdout == ""
    assert len(pd.read_csv(out)) == 2
    assert f"wrote 2 rows to {out}" in result.stderr


def test_parquet_needs_out(reports):
    result = run(reports / "v3.ncu-rep", "--format", "parquet")
    assert result.exit_code == 2
    assert "give --out FILE.parquet" in result.stderr


def test_parquet_round_trips(reports, tmp_path):
    pytest.importorskip("pyarrow")
    out = tmp_path / "t.parquet"
    result = run(reports / "v3.ncu-rep", reports / "v4.ncu-rep", "--format", "parquet",
                 "--out", out)
    assert result.exit_code == 0, result.output
    df = pd.read_parquet(out)
    assert list(df["variant"]) == ["v3", "v4", "v4"]
    assert df["grid_size"].dtype == "float64"


@pytest.fixture
def no_pyarrow(monkeypatch):
    """pyarrow hidden as if the parquet extra were not installed: ``import pyarrow`` (and
    every pyarrow submodule) raises ImportError."""
    for name in [m for m in sys.modules if m == "pyarrow" or m.startswith("pyarrow.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "pyarrow", None)


def test_parquet_without_pyarrow_exits_2_naming_the_extra(reports, tmp_path, no_pyarrow):
    out = tmp_path / "t.parquet"
    result = run(reports / "v3.ncu-rep", "--format", "parquet", "--out", out)
    assert result.exit_code == 2
    assert result.stderr == ("paprof: error: --format parquet needs pyarrow, which paprof "
                             "installs only with its parquet extra: pip install 'paprof[parquet]'\n")
    assert not out.exists()


def test_other_formats_need_no_pyarrow(reports, tmp_path, no_pyarrow):
    for fmt in ("text", "csv", "json"):
        result = run(reports / "v3.ncu-rep", "--format", fmt)
        assert result.exit_code == 0, (fmt, result.output)


def test_missing_metrics_get_a_note_on_stderr(tmp_path, monkeypatch):
    (tmp_path / "x.ncu-rep").write_bytes(b"NVR\x00")
    action = make_action(dram_throughput_pct=None, achieved_occupancy_pct=None)
    monkeypatch.setattr(load, "open_report", lambda path: (None, [action]))
    result = run(tmp_path / "x.ncu-rep")
    assert result.exit_code == 0, result.output
    assert ("note: not recorded in these reports, shown as NaN/-: dram_throughput_pct "
            "(section SpeedOfLight); achieved_occupancy_pct (section Occupancy)") in result.stderr


def test_a_text_file_exits_2_naming_it(tmp_path):
    bad = tmp_path / "notes.txt"
    bad.write_text("not a report")
    result = run(bad)
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        f"paprof: error: {bad}: not an Nsight Compute report (no 'NVR' file signature)")


def test_no_argument_is_a_usage_error():
    result = run()
    assert result.exit_code == 2


def test_pyarrow_is_the_parquet_extra_not_a_dependency():
    """pyarrow (170 MB) only for --format parquet: 'pip install paprof[parquet]'; the test
    extra keeps it so that the parquet tests run."""
    import tomllib

    project = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())
    names = lambda reqs: [r.split(">")[0].split("=")[0].split(";")[0].strip() for r in reqs]
    extras = project["project"]["optional-dependencies"]
    assert "pyarrow" not in names(project["project"]["dependencies"])
    assert names(extras["parquet"]) == ["pyarrow"]
    assert "pyarrow" in names(extras["test"])
