"""The loader, the bottleneck rules and ``paprof table`` on the shipped H200 reports.

These are ncu 2025.3.1 reports of the paged-decode variants (paprof's default preset: the
basic sections plus the traffic tables, instruction statistics and roofline inputs;
``--clock-control none``), batch 64, context 4096, 32/8 heads, head_dim 128, fp32 K/V,
made by ``paprof run --variant all`` with schema-2 sidecars (the fp16 and small-batch runs
of v5/v6 are the sweep's), as recorded in tests/data (``helpers.recorded``).
"""

from __future__ import annotations

import io
import math
import shutil
import struct
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from paprof.model import bottleneck as B
from paprof.model import load
from paprof.read import ncu_fastread, ncu_reader
from paprof.read import metrics as M
from paprof.cli import main
from paprof.errors import UserError

from helpers import recorded

EXAMPLES = recorded("h200")
MAIN = "b64_ctx4096_h32x8_d128_p16_fp32.ncu-rep"  # every variant has this shape
REPORTS = sorted(EXAMPLES.rglob(MAIN))
VARIANTS = {"baseline", "handbook", "v1", "v2", "v3", "v4", "v5", "v6"}


@pytest.fixture(scope="module")
def df() -> pd.DataFrame:
    return load.load_reports(REPORTS)


@pytest.fixture(scope="module")
def by_variant(df) -> dict:
    return {v: rows for v, rows in df.groupby("variant")}


def one(by_variant, variant) -> pd.Series:
    (row,) = [r for _, r in by_variant[variant].iterrows()]
    return row


def report_of(variant: str) -> Path:
    (path,) = [p for p in REPORTS if p.parent.name == variant]
    return path


def test_one_row_per_kernel_launch_with_provenance(df):
    assert set(df["variant"]) == VARIANTS
    assert len(df) == len(VARIANTS) + 1  # v4: partial + merge
    assert list(df[df["variant"] == "v4"]["kernel"]) == [
        "paged_decode_v4_partial", "paged_decode_v4_merge"]
    assert set(df["family"]) == {"paged_decode"}
    assert set(df["gpu"]) == {"NVIDIA H200"}
    assert df["shape"].str.startswith("batch=64,").all()
    assert all(s["schema"] == 2 and s["preset"] == "default" for s in df["sidecar"])
    assert list(df.columns) == load.columns()


def test_no_nan_where_the_default_preset_supplies_the_metric(df):
    supplied = [m.column for m in M.CATALOGUE if not m.text and m.section != M.WORK and (
        m.in_default_sections or m.section in M.TRAFFIC_SECTIONS or m.derived)]
    assert df[supplied].columns[df[supplied].isna().any()].tolist() == []
    source_only = {m.column for m in M.ROOFLINE_INPUTS if m.section == M.SOURCE}  # preset 'source'
    assert set(df.attrs["missing"]) <= source_only  # the traffic sections supply DRAM's byte counters too
    assert (df["occupancy_limiter"] != "").all() and (df["top_stall_reason"] != "").all()
    # the work model (schema 2) is there for every kernel but a split variant's parts
    assert df[df["variant"] != "v4"]["work_bytes"].eq(2 * 64 * 4096 * 8 * 128 * 4).all()


def test_units(df):
    for column in [c for c in df.columns if c.endswith("_pct")]:
        assert df[column].between(0, 100.5).all(), column
    assert (df["sm_count"] == 132).all()
    assert df["duration_us"].between(1, 1e6).all()
    # Every variant but v4's merge reads the 2 GiB of K/V once: DRAM bytes ~ the work model's.
    reads = df[df["kernel"] != "paged_decode_v4_merge"]
    kv = reads["sidecar"].map(lambda s: s["work"]["bytes"])
    assert (reads["dram_bytes"] / kv).between(0.99, 1.03).all()
    assert (reads["dram_bytes_read"] / kv).between(0.99, 1.01).all()  # reads, the writes are the output
    assert df["achieved_bandwidth_gbs"].tolist() == pytest.approx(
        (df["dram_bytes"] / (df["duration_us"] * 1e-6) / 1e9).tolist())
    assert df["achieved_bandwidth_gbs"].max() < 4800  # under the H200's DRAM peak
    for column in ("grid_size", "block_size", "registers_per_thread"):
        assert (df[column] == df[column].round()).all() and (df[column] > 0).all()


def test_launch_configuration_matches_the_kernels(by_variant):
    v2, v3 = one(by_variant, "v2"), one(by_variant, "v3")
    assert (v2["grid_size"], v2["block_size"]) == (2048, 32)  # (q_heads, batch) x 1 warp
    assert (v3["grid_size"], v3["block_size"]) == (512, 128)  # (kv_heads, batch) x 4 warps
    assert v3["shared_mem_per_block_bytes"] == 2 * 16 * 128 * 4  # a K and a V page


def test_occupancy_limiters(by_variant):
    assert one(by_variant, "v2")["occupancy_limiter"] == "blocks"  # 1-warp CTAs: 32 per SM
    assert one(by_variant, "v2")["theoretical_occupancy_pct"] == pytest.approx(50.0)
    for variant in ("baseline", "v3", "v5"):
        assert one(by_variant, variant)["occupancy_limiter"] == "registers"


def test_bottleneck_labels(df, by_variant):
    assert set(df["bottleneck"]) <= set(B.LABELS) - {B.UNKNOWN}
    v5 = one(by_variant, "v5")
    assert v5["bottleneck"] == "dram-bound"
    assert v5["bottleneck_evidence"][0].startswith("DRAM throughput ")
    assert "passing through" in v5["bottleneck_evidence"][1]  # L2 busier, but it is DRAM
    for variant in ("v2", "v3"):  # small grids on 132 SMs: ncu's "Small Grid"
        row = one(by_variant, variant)
        assert row["bottleneck"] == "occupancy/launch-bound"
        assert "waves per SM" in row["bottleneck_evidence"][0]
        assert any(e.startswith("ncu SOLBottleneck: This kernel grid is too small")
                   for e in row["bottleneck_evidence"])
    assert one(by_variant, "v1")["bottleneck"] == "latency-bound"
    assert one(by_variant, "baseline")["bottleneck"] not in ("dram-bound", "occupancy/launch-bound")
    merge = by_variant["v4"][by_variant["v4"]["kernel"] == "paged_decode_v4_merge"].iloc[0]
    assert merge["bottleneck"] == "occupancy/launch-bound"
    for evidence in df["bottleneck_evidence"]:
        assert evidence and not any("Memory throughput" in e for e in evidence)


def test_rules_come_from_the_report(df):
    for rules in df["rules"]:
        assert rules and {r["id"] for r in rules} >= {"SOLBottleneck"}
        for r in rules:
            assert set(r) == {"id", "title", "type", "message", "speedup_pct"}
            assert r["type"] in ("OK", "OPTIMIZATION", "WARNING", "ERROR", "NONE")
    speedups = [r["speedup_pct"] for rules in df["rules"] for r in rules]
    assert any(not math.isnan(s) and s > 0 for s in speedups)


def test_variant_rows_combine_v4(df):
    rows = load.variant_rows(df)
    assert len(rows) == len(VARIANTS)
    v4 = rows[rows["variant"] == "v4"].iloc[0]
    parts = df[df["variant"] == "v4"]
    assert v4["kernels"] == ["paged_decode_v4_partial", "paged_decode_v4_merge"]
    assert v4["duration_us"] == pytest.approx(parts["duration_us"].sum())
    assert v4["dram_bytes"] == pytest.approx(parts["dram_bytes"].sum())
    assert v4["grid_size"] == 8192  # the partial kernel dominates
    assert rows[rows["variant"] == "v3"].iloc[0]["kernels"] == ["paged_decode_v3"]


def test_dram_active_cycles_track_the_unique_bytes(df):
    # The sources' observation: every variant reads the same K/V, so DRAM active cycles
    # stay about constant while the duration changes ~90-fold.
    reads = df[df["kernel"] != "paged_decode_v4_merge"]["dram_active_cycles"]
    assert reads.max() / reads.min() < 1.05


# -- broken files -----------------------------------------------------------------------


@pytest.mark.parametrize("keep", [3, 12, 200, 0.5, -1])
def test_a_truncated_report_is_a_user_error(tmp_path, keep):
    source = report_of("v3")
    data = source.read_bytes()
    cut = int(len(data) * keep) if isinstance(keep, float) else (
        len(data) + keep if keep < 0 else keep)
    broken = tmp_path / source.name
    broken.write_bytes(data[:cut])
    with pytest.raises(UserError, match=f"{broken.name}: (truncated|not an Nsight Compute)"):
        load.load_reports([broken])


def test_a_report_without_kernel_results_is_a_user_error(tmp_path):
    data = report_of("v3").read_bytes()
    header_len = struct.unpack_from("<I", data, 4)[0]
    pos, kept = 8 + header_len, [data[: 8 + header_len]]
    while pos < len(data):
        block_len = struct.unpack_from("<I", data, pos)[0]
        fields = ncu_fastread.varint_fields(data[pos + 4: pos + 4 + block_len])
        end = pos + 4 + block_len + fields.get(ncu_fastread.BLOCK_PAYLOAD, 0)
        if not fields.get(ncu_fastread.BLOCK_RESULTS):
            kept.append(data[pos:end])
        pos = end
    empty = tmp_path / "empty.ncu-rep"
    empty.write_bytes(b"".join(kept))
    with pytest.raises(UserError, match="empty.ncu-rep: the report holds no profiled kernels"):
        load.load_reports([empty])


def test_a_copy_loads_like_the_original(tmp_path):
    copy = tmp_path / "copy.ncu-rep"
    shutil.copy(report_of("v5"), copy)
    row = load.load_reports([copy]).iloc[0]
    assert (row["variant"], row["family"], row["shape"], row["sidecar"]) == ("copy", "", "", None)
    assert row["gpu"] == "NVIDIA H200"  # from the report's device attributes
    assert row["bottleneck"] == "dram-bound"


# -- the command ------------------------------------------------------------------------


def test_table_command_on_the_shipped_runs():
    result = CliRunner().invoke(main, ["table", str(EXAMPLES), "--format", "csv"])
    assert result.exit_code == 0, result.output
    table = pd.read_csv(io.StringIO(result.stdout))
    every_report = sorted(EXAMPLES.rglob("*.ncu-rep"))
    assert len(table) == len(every_report) + 1  # one row per kernel; v4 has two
    assert "note: not recorded" not in result.stderr  # the default preset records it all
    assert {"l2_to_l1_bytes", "l1_global_load_bytes", "shared_load_bank_conflicts"} <= set(table.columns)

    text = CliRunner().invoke(main, ["table", str(EXAMPLES), "--per-variant"])
    assert text.exit_code == 0, text.output
    assert "paged_decode_v4_partial + paged_decode_…" in text.stdout
    lines = text.stdout.splitlines()
    assert "v5: dram-bound: " in text.stdout
    assert "v3: occupancy/launch-bound: " in text.stdout  # 512 CTAs for 1,584 slots
    assert sum(line.startswith("v4: ") for line in lines) == 1  # summed: one line

    # the v5/v6 fp16 and small-batch runs of the sweep: at batch 4 v5's 32 CTAs leave the GPU idle
    sweep = recorded("sweeps/h200-profile")
    text = CliRunner().invoke(main, ["table", str(sweep), "--per-variant"])
    assert text.exit_code == 0, text.output
    assert "v5 [b64_ctx4096_h32x8_d128_p16_fp16]: dram-bound: " in text.stdout
    assert "v5 [b4_ctx16384_h32x8_d128_p16_fp16]: occupancy/launch-bound: " in text.stdout


def test_table_command_shows_the_traffic_per_level():
    result = CliRunner().invoke(main, ["table", str(EXAMPLES), "--traffic", "--per-variant"])
    assert result.exit_code == 0, result.output
    header, *rows = result.stdout.splitlines()
    assert header.split() == ["variant", "kernel", "ld_inst", "L1->SM", "SM->L1", "shm_ld_wf",
                              "shm_st_wf", "shm_ld_cfl", "shm_st_cfl", "L1hit%", "L2->SM",
                              "SM->L2", "L2hit%", "DRAM->L2", "L2->DRAM", "inst"]
    ends = {name: header.index(name) + len(name) for name in header.split()}
    starts = dict(zip(ends, [0] + list(ends.values())[:-1]))

    def cell(variant, name):  # the right-aligned text under a header
        row = next(r for r in rows if r.split()[0] == variant)
        return row[starts[name]:ends[name]].strip()

    # v2 reads each K/V byte into the SMs once per query head (4 of a KV head's group), v3 once
    assert (cell("v2", "L2->SM"), cell("v3", "L2->SM")) == ("8.59 GB", "2.15 GB")
    assert cell("v3", "DRAM->L2") == "2.15 GB" and cell("v3", "shm_ld_wf") == "67.1 M"
    # the baseline's every thread reloads every element: 280 GB asked of L1, 97 % hits
    assert (cell("baseline", "L1->SM"), cell("baseline", "L1hit%")) == ("280 GB", "96.9")
    csv = CliRunner().invoke(main, ["table", str(EXAMPLES), "--traffic", "--format", "csv"])
    table = pd.read_csv(io.StringIO(csv.stdout))
    assert list(table.columns)[:2] == ["variant", "kernel"] and "l2_to_l1_bytes" in table
    assert len(table) == len(VARIANTS) + 1


def test_no_ncu_markup_reaches_rules_evidence_or_the_report(tmp_path):
    """The shipped reports' rule messages carry @url:...@ and @section:...@ links."""
    import re

    from paprof.model.load import load_reports
    from paprof import api

    markup = re.compile(r"@(url|section):")
    df = load_reports([EXAMPLES])
    messages = [r["message"] + r["title"] for rules in df["rules"] for r in rules]
    assert any("CUDA Best Practices Guide (https://docs.nvidia.com/" in m for m in messages)
    assert not any(markup.search(m) for m in messages)
    assert not any(markup.search(e) for ev in df["bottleneck_evidence"] for e in ev)
    result = api.write_report(["v1", "v2", "v3"], runs=EXAMPLES, out=tmp_path / "r.html",
                                markdown=tmp_path / "r.md")
    for path in (result.html, result.markdown):
        assert not markup.search(path.read_text())


def test_ncu_plain_text():
    from paprof.read.ncu_reader import ncu_plain

    assert ncu_plain("See the @url:Guide:https://x.org/a.html#b@ and the "
                     "@section:SourceCounters:Warp Stall Sampling (All Samples)@ table.") == (
        "See the Guide (https://x.org/a.html#b) and the Warp Stall Sampling (All Samples) table.")
