"""The metric catalogue: names ncu really records, complete for the tidy table's schema
(docs/architecture.md, "The tidy table")."""

from __future__ import annotations

import ast
import dataclasses
import inspect
from pathlib import Path

import pytest

from paprof.read import metrics as M

DATA = Path(__file__).resolve().parent / "data"
DEFAULT_LIST = DATA / "ncu-2025.3.1-h200-default-sections-metrics.txt"
TRAFFIC_LIST = DATA / "ncu-2025.3.1-h200-traffic-sections-metrics.txt"
PACKAGE = Path(M.__file__).resolve().parents[1]

#: Catalogue metrics outside the basic sections (DEFAULT_SECTIONS), so absent from
#: DEFAULT_LIST: the traffic per level, all of them in TRAFFIC_LIST under their section.
OUTSIDE_DEFAULT_SECTIONS = set(M.TRAFFIC_SECTIONS)

#: The roofline's inputs and the source counters' totals, from the sections the 'default'
#: and 'source' presets add (each checked against real H200 reports in tests/test_roofline.py).
ROOFLINE_OUTSIDE = {m.ncu_name: m.section for m in M.ROOFLINE_INPUTS if not m.in_default_sections}

#: ncu metrics recorded under a name without a ``unit__`` prefix (the source-level
#: counter of executed instructions, in tests/data's list of default-section metrics).
LEGACY = {"inst_executed"}

#: The tidy table's first columns (docs/architecture.md) that do not come from ncu metrics.
NOT_FROM_NCU = {"variant", "family", "kernel", "launch", "step", "shape", "bottleneck"}


@pytest.fixture(scope="module")
def recorded() -> set[str]:
    names = {line.strip() for line in DEFAULT_LIST.read_text().splitlines() if line.strip()}
    assert len(names) == 798, "the shipped list is ncu 2025.3.1's 798 H200 default metrics"
    return names


def test_every_default_section_metric_is_one_ncu_recorded_on_the_h200(recorded):
    unknown = [(m.column, m.ncu_name) for m in M.MEASURED
               if m.in_default_sections and m.ncu_name not in recorded]
    assert unknown == []


@pytest.fixture(scope="module")
def traffic_recorded() -> set[tuple[str, str]]:
    lines = [l.split() for l in TRAFFIC_LIST.read_text().splitlines()
             if l.strip() and not l.startswith("#")]
    assert {section for section, _ in lines} == set(M.TRAFFIC_SECTIONS)
    return {(section, name) for section, name in lines}


def test_metrics_outside_the_default_sections_are_the_traffic_sections_recorded_ones(
        recorded, traffic_recorded):
    outside = {m.ncu_name: m.section for m in M.MEASURED if not m.in_default_sections}
    rest = {name: section for name, section in outside.items() if name not in ROOFLINE_OUTSIDE}
    assert set(rest.values()) <= OUTSIDE_DEFAULT_SECTIONS
    assert [(section, name) for name, section in rest.items()
            if (section, name) not in traffic_recorded] == []
    assert not set(outside) & recorded
    assert {"dram__bytes_read.sum", "l1tex__m_xbar2l1tex_read_bytes.sum",
            "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"} <= set(outside)


def test_the_traffic_columns_cover_every_level_the_issue_names():
    levels = {M.BY_COLUMN[c].level for c in M.TRAFFIC_COLUMNS}
    assert levels == set(M.LEVELS)
    assert list(M.TRAFFIC_COLUMNS) == sorted(M.TRAFFIC_COLUMNS, key=lambda c: M.LEVELS.index(
        M.BY_COLUMN[c].level))  # grouped from the SM outwards
    for column in ("l1_global_load_bytes", "l1_global_store_bytes", "l1_global_load_requests",
                   "shared_load_wavefronts", "shared_store_bank_conflicts", "l2_to_l1_bytes",
                   "l1_to_l2_bytes", "l1_hit_rate_pct", "dram_bytes_read", "dram_bytes_write",
                   "l2_hit_rate_pct", "instructions_executed"):
        assert column in M.TRAFFIC_COLUMNS, column
    for m in M.CATALOGUE:
        assert m.level is None or m.level in M.LEVELS, m
        if m.level is not None and m.unit not in ("%",):
            assert m.combine == M.SUM, m  # counts add up over a variant's kernels


def test_dram_throughput_is_the_gpu_metric_not_dram_throughput():
    assert M.BY_COLUMN["dram_throughput_pct"].ncu_name.startswith("gpu__dram_throughput.")
    assert not any(m.ncu_name.startswith("dram__throughput") for m in M.MEASURED)


def test_the_design_schema_is_covered_by_the_catalogue():
    from_ncu = [c for c in M.DESIGN_COLUMNS if c not in NOT_FROM_NCU]
    assert [c for c in from_ncu if c not in M.BY_COLUMN] == []
    assert len(M.DESIGN_COLUMNS) == 30 and M.DESIGN_COLUMNS[-1] == "bottleneck"


def test_columns_are_unique_and_every_entry_is_complete():
    columns = [m.column for m in M.CATALOGUE]
    assert len(columns) == len(set(columns))
    for m in M.CATALOGUE:
        assert m.meaning and m.unit and m.section, m
        assert m.combine in (M.SUM, M.WEIGHTED, M.DOMINANT, M.RECOMPUTED), m
        if m.combine == M.RECOMPUTED:  # a ratio: computed again from combined inputs
            assert m.derived and m.formula and m.inputs, m
        if m.section == M.WORK:  # from the sidecar's work model, not from ncu
            assert m.derived and m.formula, m
        elif m.column in M.OPCODE_COLUMNS:  # summed from the per-opcode (instanced) counts
            assert m.derived and M.OPCODE_METRIC in m.formula and m.combine == M.SUM, m
        elif m.derived:
            assert m.formula and m.inputs, m
            assert all(i in M.BY_COLUMN for i in m.inputs), m
        else:
            assert m.formula is None and ("__" in m.ncu_name or m.ncu_name in LEGACY), m


def test_units_and_scales():
    assert M.BY_COLUMN["duration_us"].scale == 1e-3
    assert M.BY_COLUMN["duration_us"].ncu_unit == "nsecond"
    assert M.metric("achieved_bandwidth_gbs").unit == "GB/s"
    for m in M.CATALOGUE:
        if m.column.endswith("_pct"):
            assert m.unit == "%", m
    with pytest.raises(KeyError, match="no catalogue column 'nope'"):
        M.metric("nope")


def test_every_metric_field_has_a_docstring():
    tree = ast.parse(inspect.getsource(M.Metric))
    body = tree.body[0].body
    documented = {
        stmt.target.id for stmt, after in zip(body, body[1:])
        if isinstance(stmt, ast.AnnAssign) and isinstance(after, ast.Expr)
        and isinstance(after.value, ast.Constant)
    }
    assert documented == {f.name for f in dataclasses.fields(M.Metric)}


def test_sections_for_derived_columns_follow_their_inputs():
    assert M.sections_for(["duration_us", "grid_size"]) == ["SpeedOfLight", "LaunchStats"]
    assert "LaunchStats" in M.sections_for(["shared_mem_per_block_bytes"])
    assert M.sections_for(["gpu"]) == []


def test_ncu_metric_names_by_section():
    assert "launch__grid_size" in M.ncu_metric_names(("LaunchStats",))
    assert "gpu__time_duration.sum" not in M.ncu_metric_names(("LaunchStats",))
    assert len(M.ncu_metric_names()) == len(M.MEASURED)


def _string_constants(tree):
    """String literals of a module that are code, not documentation (docstrings and the
    bare strings that document attributes are left out)."""
    prose = {id(node.value) for node in ast.walk(tree)
             if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and id(node) not in prose:
            yield node


def test_no_ncu_metric_name_is_spelled_outside_the_catalogue():
    names = {m.ncu_name for m in M.MEASURED}
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "metrics.py" and path.parent.name == "read":
            continue
        for node in _string_constants(ast.parse(path.read_text())):
            hits = [n for n in names if n in node.value]
            if hits:
                offenders.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: {hits[0]}")
    assert offenders == []


def test_the_traffic_ratios_are_computed_once_on_the_table_and_summed_kernels_recompute_them():
    from helpers import recorded
    from paprof.model.load import load_reports, variant_rows

    root = recorded("h200") / "nvidia-h200" / "paged_decode"
    df = load_reports([root / "v2", root / "v4"])
    for _, row in df.iterrows():
        assert row["l2_to_sm_per_dram_byte"] == pytest.approx(row["l2_to_l1_bytes"] / row["dram_bytes"])
    v4 = variant_rows(df[df["variant"] == "v4"]).iloc[0]  # two kernels: partial + merge
    parts = df[df["variant"] == "v4"]
    assert v4["l2_to_sm_per_dram_byte"] == pytest.approx(
        parts["l2_to_l1_bytes"].sum() / parts["dram_bytes"].sum())  # not a weighted mean
    assert v4["shared_bank_conflicts"] == pytest.approx(
        (parts["shared_load_bank_conflicts"] + parts["shared_store_bank_conflicts"]).sum())
