"""The loader on stand-in ncu_report actions: columns, units, provenance, variant rows."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from paprof.model import load
from paprof.read import metrics as M
from paprof.errors import UserError

from helpers import FakeRule, make_action


@pytest.fixture
def fake_reports(tmp_path, monkeypatch):
    """``add(relative_path, *actions, sidecar=None)`` makes a report file whose actions
    the loader will read (open_report is replaced; the file itself is a placeholder)."""
    actions: dict[Path, list] = {}

    def fake_open(path):
        return None, actions[Path(path).resolve()]

    monkeypatch.setattr(load, "open_report", fake_open)

    def add(relative, *acts, sidecar=None):
        path = tmp_path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"NVR\x00")
        actions[path.resolve()] = list(acts)
        if sidecar is not None:
            path.with_name(path.name[: -len(".ncu-rep")] + ".json").write_text(
                json.dumps(sidecar))
        return path

    return add


def test_one_row_per_action_in_the_contract_column_order(fake_reports):
    path = fake_reports("v3.ncu-rep", make_action())
    df = load.load_reports([path])
    assert len(df) == 1
    assert list(df.columns[: len(M.DESIGN_COLUMNS)]) == list(M.DESIGN_COLUMNS)
    after = list(df.columns[len(M.DESIGN_COLUMNS): len(M.DESIGN_COLUMNS) + 5])
    assert after == ["bottleneck_evidence", "rules", "report_path", "sidecar", "steps_from"]
    assert list(df.columns) == load.columns()
    assert df.columns[-1] == "result_index"


def test_units_and_derived_columns(fake_reports):
    row = load.load_reports(fake_reports("v3.ncu-rep", make_action())).iloc[0]
    assert row["duration_us"] == pytest.approx(600.0)
    assert row["dram_bytes"] == pytest.approx(3.6e12 * 600e-6)
    assert row["achieved_bandwidth_gbs"] == pytest.approx(3600.0)
    assert row["shared_mem_per_block_bytes"] == 16384
    assert row["occupancy_limiter"] == "shared_mem"
    assert row["top_stall_reason"] == "long_scoreboard"
    assert row["bottleneck"] == "dram-bound"
    assert row["bottleneck_evidence"][0].startswith("DRAM throughput 84.9 % of peak")
    assert row["dram_throughput_pct"] == pytest.approx(84.9)


def test_dram_bytes_prefer_the_read_and_write_counters(fake_reports):
    action = make_action(dram_bytes_read=2.0e9, dram_bytes_write=1.0e6)
    row = load.load_reports(fake_reports("v3.ncu-rep", action)).iloc[0]
    assert row["dram_bytes"] == pytest.approx(2.001e9)
    assert row["achieved_bandwidth_gbs"] == pytest.approx(2.001e9 / 600e-6 / 1e9)


def test_absent_metric_is_nan_and_its_section_is_named(fake_reports):
    action = make_action(dram_throughput_pct=None, lsu_pipe_pct=None)
    df = load.load_reports(fake_reports("v3.ncu-rep", action))
    assert math.isnan(df.loc[0, "dram_throughput_pct"])
    assert df.attrs["missing"]["dram_throughput_pct"] == "SpeedOfLight"
    assert df.attrs["missing"]["lsu_pipe_pct"] == "SpeedOfLight"
    assert df.attrs["missing"]["dram_bytes_read"] == "MemoryWorkloadAnalysis_Chart"
    assert "duration_us" not in df.attrs["missing"]
    assert "dram_bytes" not in df.attrs["missing"]  # from bytes/s x duration


def test_missing_launch_stats_leave_derived_columns_nan(fake_reports):
    action = make_action(shared_mem_static_bytes=None, block_limit_registers=None,
                         block_limit_shared_mem=None, block_limit_warps=None,
                         block_limit_blocks=None)
    df = load.load_reports(fake_reports("x.ncu-rep", action))
    assert math.isnan(df.loc[0, "shared_mem_per_block_bytes"])
    assert df.loc[0, "occupancy_limiter"] == ""
    assert df.attrs["missing"]["shared_mem_per_block_bytes"] == "LaunchStats"


def test_without_sidecar_variant_is_the_stem_and_gpu_the_device(fake_reports):
    row = load.load_reports(fake_reports("foreign_kernel.ncu-rep", make_action())).iloc[0]
    assert (row["variant"], row["family"], row["shape"]) == ("foreign_kernel", "", "")
    assert row["gpu"] == "NVIDIA H200"
    assert row["sidecar"] is None
    assert row["kernel"] == "paged_decode_v3"


def test_sidecar_supplies_variant_family_shape_gpu(fake_reports):
    sidecar = {"schema": 1, "family": "paged_decode", "variant": "v3",
               "shape": "batch=64,context=4096", "gpu": "NVIDIA H200 (from sidecar)"}
    path = fake_reports("runs/x/b64.ncu-rep", make_action(), sidecar=sidecar)
    row = load.load_reports([path]).iloc[0]
    assert (row["variant"], row["family"], row["shape"]) == (
        "v3", "paged_decode", "batch=64,context=4096")
    assert row["gpu"] == "NVIDIA H200 (from sidecar)"
    assert row["sidecar"]["schema"] == 1
    assert row["report_path"] == str(path)


def test_folders_are_searched_and_the_store_layout_names_the_variant(fake_reports, tmp_path):
    fake_reports("runs/nvidia-h200/paged_decode/v2/b64_ctx4096.ncu-rep", make_action())
    fake_reports("runs/nvidia-h200/paged_decode/v3/b64_ctx4096.ncu-rep", make_action())
    df = load.load_reports([tmp_path / "runs"])
    assert list(df["variant"]) == ["v2", "v3"]
    assert set(df["family"]) == {"paged_decode"}
    assert set(df["shape"]) == {"b64_ctx4096"}


def test_the_same_report_twice_loads_once(fake_reports):
    path = fake_reports("v3.ncu-rep", make_action())
    assert len(load.load_reports([path, path, path.parent])) == 1


def test_a_report_reached_through_links_loads_once(fake_reports, tmp_path):
    path = fake_reports("runs/g/f/v3/s.ncu-rep", make_action())
    (tmp_path / "again").symlink_to(tmp_path / "runs")
    (tmp_path / "alias.ncu-rep").symlink_to(path)
    df = load.load_reports([tmp_path / "runs", tmp_path / "again",
                            tmp_path / "again" / "g" / "f" / "v3" / "s.ncu-rep",
                            tmp_path / "alias.ncu-rep"])
    assert list(df["report_path"]) == [str(path)]


def test_rules_are_plain_dicts(fake_reports):
    rules = [FakeRule("SOLBottleneck", "DRAM is busy. More.", kind=3, title="High Memory",
                      speedup=12.5),
             FakeRule("Silent", None), FakeRule("Fine", "All good.", kind=1)]
    row = load.load_reports(fake_reports("v3.ncu-rep", make_action(rules=rules))).iloc[0]
    assert row["rules"][0] == {"id": "SOLBottleneck", "title": "High Memory",
                               "type": "WARNING", "message": "DRAM is busy. More.",
                               "speedup_pct": 12.5}
    assert [r["id"] for r in row["rules"]] == ["SOLBottleneck", "Fine"]
    assert math.isnan(row["rules"][1]["speedup_pct"]) and row["rules"][1]["type"] == "OK"
    assert "ncu SOLBottleneck: DRAM is busy." in row["bottleneck_evidence"]


def test_launch_counts_each_kernels_launches(fake_reports):
    path = fake_reports("v4.ncu-rep",
                        make_action("partial"), make_action("merge"),
                        make_action("partial"), make_action("merge"))
    df = load.load_reports(path)
    assert list(zip(df["kernel"], df["launch"], df["result_index"])) == [
        ("partial", 0, 0), ("merge", 0, 1), ("partial", 1, 2), ("merge", 1, 3)]
    assert df["launch"].dtype == "int64" and df["grid_size"].dtype == "float64"


def test_variant_rows_sum_the_launches_of_one_step(fake_reports):
    # A report without step marks or a record is ONE step: its four launches are summed,
    # never paired by the n-th launch of each kernel name (that guess made the MLP's
    # eager program "the sum of 2 kernels" and its median a meaningless partial sum).
    partial = dict(duration_us=3900.0, dram_throughput_pct=73.4, registers_per_thread=64.0,
                   grid_size=16384.0, dram_bytes_per_second=3.0e12, stall_long_scoreboard=40.0)
    merge = dict(duration_us=100.0, dram_throughput_pct=85.7, registers_per_thread=30.0,
                 grid_size=2048.0, dram_bytes_per_second=1.0e12, stall_barrier=50.0,
                 stall_long_scoreboard=10.0)
    path = fake_reports("v4.ncu-rep",
                        make_action("partial", **partial), make_action("merge", **merge),
                        make_action("partial", **partial), make_action("merge", **merge))
    v3 = fake_reports("v3.ncu-rep", make_action())
    df = load.load_reports([path, v3])
    assert list(df["step"]) == [0, 0, 0, 0, 0] and set(df["steps_from"]) == {"one step"}
    rows = load.variant_rows(df)
    assert list(rows["variant"]) == ["v4", "v3"]
    first = rows.iloc[0]
    assert first["kernels"] == ["partial", "merge", "partial", "merge"]
    assert first["duration_us"] == pytest.approx(8000.0)
    assert first["dram_throughput_pct"] == pytest.approx((73.4 * 3900 + 85.7 * 100) / 4000)
    assert first["dram_bytes"] == pytest.approx(2 * (3.0e12 * 3900e-6 + 1.0e12 * 100e-6))
    assert first["achieved_bandwidth_gbs"] == pytest.approx(first["dram_bytes"] / 8000e-6 / 1e9)
    assert first["registers_per_thread"] == 64 and first["grid_size"] == 16384
    assert first["top_stall_reason"] == "long_scoreboard"
    assert first["bottleneck"] == "dram-bound"
    assert rows.iloc[1]["kernels"] == ["paged_decode_v3"]
    assert rows.iloc[1]["duration_us"] == pytest.approx(600.0)
    assert list(rows.columns) == list(df.columns) + ["kernels"]
    assert rows.attrs["missing"] == df.attrs["missing"]


def test_variant_rows_in_order_of_first_appearance_however_the_rows_interleave(fake_reports):
    # Single-kernel reports pass through column by column; a split-KV launch whose two
    # kernels are apart in the table is still combined, at its first kernel's place.
    v3 = fake_reports("v3.ncu-rep", make_action())
    v4 = fake_reports("v4.ncu-rep", make_action("partial", duration_us=300.0),
                      make_action("merge", duration_us=20.0))
    v5 = fake_reports("v5.ncu-rep", make_action(duration_us=250.0))
    df = load.load_reports([v3, v4, v5])
    interleaved = df.iloc[[1, 0, 3, 2]].reset_index(drop=True)  # partial, v3, v5, merge
    interleaved.attrs = dict(df.attrs)
    rows = load.variant_rows(interleaved)
    assert list(rows["variant"]) == ["v4", "v3", "v5"]
    assert list(rows.dtypes[: len(df.columns)]) == list(df.dtypes)
    combined = load.variant_rows(df.iloc[[1, 2]])
    for column in df.columns:
        assert _same(rows[column][0], combined[column][0]), column
        assert _same(rows[column][1], df[column][0]), column
        assert _same(rows[column][2], df[column][3]), column
    assert list(rows["kernels"]) == [["partial", "merge"], ["paged_decode_v3"],
                                     ["paged_decode_v3"]]


def _same(a, b) -> bool:
    return (a == b or (isinstance(a, float) and isinstance(b, float)
                       and math.isnan(a) and math.isnan(b)))


def test_variant_rows_keep_every_part_rule_with_its_kernel(fake_reports):
    path = fake_reports("v4.ncu-rep",
                        make_action("partial", rules=[FakeRule("A", "a.")]),
                        make_action("merge", duration_us=10.0, rules=[FakeRule("B", "b.")]))
    rows = load.variant_rows(load.load_reports(path))
    assert [(r["id"], r["kernel"]) for r in rows.iloc[0]["rules"]] == [
        ("A", "partial"), ("B", "merge")]


# -- errors -----------------------------------------------------------------------------


def test_nothing_given_or_nothing_found_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="no report given"):
        load.load_reports([])
    with pytest.raises(UserError, match="no .ncu-rep reports"):
        load.load_reports([tmp_path])
    with pytest.raises(UserError, match="nope.ncu-rep"):
        load.load_reports([tmp_path / "nope.ncu-rep"])


@pytest.mark.parametrize("name", ["notes.ncu-rep", "notes.txt"])
def test_a_text_file_is_a_user_error_naming_it(tmp_path, name):
    path = tmp_path / name
    path.write_text("hello, I am not a report\n")
    with pytest.raises(UserError, match=f"{name}: not an Nsight Compute report"):
        load.load_reports([path])


def test_an_empty_file_is_a_user_error(tmp_path):
    path = tmp_path / "empty.ncu-rep"
    path.write_bytes(b"")
    with pytest.raises(UserError, match="empty.ncu-rep"):
        load.load_reports([path])


def test_a_report_with_no_kernels_is_a_user_error(fake_reports, monkeypatch):
    from paprof.read import ncu_reader

    class Empty:
        def num_ranges(self):
            return 0

    class Module:
        @staticmethod
        def load_report(path):
            return Empty()

    path = fake_reports("empty.ncu-rep")
    path.write_bytes(b"NVR\x00" + (0).to_bytes(4, "little"))
    monkeypatch.setattr(ncu_reader, "import_ncu_report", lambda: Module)
    monkeypatch.setattr(load, "open_report", ncu_reader.open_report)
    with pytest.raises(UserError, match="empty.ncu-rep: the report holds no profiled kernels"):
        load.load_reports([path])


def test_occupancy_limiter_ties_name_the_hardware_cap_first(fake_reports):
    # v2 on the H200: 1-warp CTAs tie the block limit and the shared-memory limit at 32.
    action = make_action(block_limit_registers=40.0, block_limit_shared_mem=32.0,
                         block_limit_warps=64.0, block_limit_blocks=32.0)
    row = load.load_reports(fake_reports("v2.ncu-rep", action)).iloc[0]
    assert row["occupancy_limiter"] == "blocks"
    assert load.occupancy_limiter({"block_limit_registers": 12.0,
                                   "block_limit_shared_mem": 12.0}) == "registers"


@pytest.mark.parametrize("grid, label", [(60.0, "occupancy/launch-bound"), (4096.0, "issue-bound")])
def test_an_older_ncus_spellings_give_the_same_columns_and_label(fake_reports, grid, label):
    # ncu 2020.3-2023.2 record sm__issue_active... for the issue slots and the SM count as a
    # device attribute; a cuBLAS SGEMM there at 68.6 % issue active is compute-bound by
    # ncu's own rule, as the same counters under their 2024.1+ names are
    new = make_action("sgemm", issue_slots_busy_pct=68.6, sm_count=80.0, grid_size=grid,
                      dram_throughput_pct=20.0, sm_throughput_pct=68.6, l1_throughput_pct=40.0,
                      l2_throughput_pct=30.0, fma_pipe_pct=None, alu_pipe_pct=None,
                      lsu_pipe_pct=None, tensor_pipe_pct=None, fp64_pipe_pct=None, xu_pipe_pct=None)
    old = make_action("sgemm", issue_slots_busy_pct=68.6, sm_count=80.0, grid_size=grid,
                      dram_throughput_pct=20.0, sm_throughput_pct=68.6, l1_throughput_pct=40.0,
                      l2_throughput_pct=30.0, fma_pipe_pct=None, alu_pipe_pct=None,
                      lsu_pipe_pct=None, tensor_pipe_pct=None, fp64_pipe_pct=None, xu_pipe_pct=None)
    renames = {"sm__inst_issued.avg.pct_of_peak_sustained_elapsed":
               "sm__issue_active.avg.pct_of_peak_sustained_elapsed",
               "launch__sm_count": "device__attribute_multiprocessor_count",
               "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed":
               "dram__throughput.avg.pct_of_peak_sustained_elapsed"}
    old._metrics = {renames.get(k, k): v for k, v in old._metrics.items()}
    df = load.load_reports([fake_reports("new.ncu-rep", new), fake_reports("old.ncu-rep", old)])
    a, b = df.iloc[0], df.iloc[1]
    for column in ("issue_slots_busy_pct", "sm_count", "dram_throughput_pct"):
        assert a[column] == b[column], column
    assert a["bottleneck"] == b["bottleneck"]
    # 60 blocks on 80 SMs: the small grid is flagged whichever ncu wrote the report; with
    # enough blocks, the issue slots at 68.6 % (no pipe recorded) make it issue-bound: the
    # unit the counters show at its limit
    assert b["bottleneck"] == label
