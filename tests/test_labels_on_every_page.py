"""Every page of the shipped runs and the zoo (issue 37): a label never contradicted by a
number on the same page, the verdict rows told apart, no share over the whole."""

from __future__ import annotations

import re

import pytest

from paprof.api import write_report
from helpers import ROOT, unpacked

MARK = {"dram-bound": 70.0}
"""The default marks (``bottleneck.Thresholds``): DRAM 70 %, every other unit 60 %."""
MATH = ("fma_pipe_pct", "alu_pipe_pct", "fp64_pipe_pct", "tensor_pipe_pct", "xu_pipe_pct")
TIE = 1.0


def _pct(v, col) -> float:
    x = v.get(col)
    return float(x) if x is not None and x == x else 0.0


def _agrees(v) -> str | None:
    """None when the variant's label agrees with its own counters, else why not."""
    label = str(v.bottleneck or "").split(" ")[0]
    dram, l1, l2 = (_pct(v, c) for c in ("dram_throughput_pct", "l1_throughput_pct", "l2_throughput_pct"))
    l1 = max(l1, _pct(v, "lsu_pipe_pct"))
    issue, math_top = _pct(v, "issue_slots_busy_pct"), max(_pct(v, c) for c in MATH)
    if label == "dram-bound" and dram < 70:
        return f"dram-bound at DRAM {dram:.1f} %"
    if label == "l2-bound" and (l2 < 60 or l2 < l1 - TIE):
        return f"l2-bound at L2 {l2:.1f} % (L1 {l1:.1f} %)"
    if label == "l1-bound" and (l1 < 60 or l1 < l2 - TIE):
        return f"l1-bound at L1 {l1:.1f} % (L2 {l2:.1f} %)"
    if label == "compute-bound" and math_top < 60 and _pct(v, "sm_throughput_pct") < 60:
        return f"compute-bound with every math pipe under 60 % (top {math_top:.1f} %)"
    if label == "issue-bound" and (issue < 60 or math_top >= 60):
        return f"issue-bound at issue slots {issue:.1f} % (math pipe {math_top:.1f} %)"
    if label == "latency-bound" and max(dram, l1, l2, issue, math_top) >= 70:
        return f"latency-bound with a unit at {max(dram, l1, l2, issue, math_top):.1f} %"
    return None


SETS = [
    ("examples/h200", ["baseline", "v1", "v2", "v3", "v4", "handbook", "v5", "v6"], None),
    ("examples/h200-flash_fwd", ["flash_fwd/handbook", "flash_fwd/mma", "flash_fwd/wgmma2"], None),
]


@pytest.mark.parametrize("folder,variants,shape", SETS, ids=[s[0] for s in SETS])
def test_no_label_is_contradicted_by_its_own_page(folder, variants, shape):
    built = write_report(variants, runs=ROOT / folder, out=None, markdown="-", cross=True)
    for v in built.comparison.variants:
        assert _agrees(v) is None, (v.label, _agrees(v))
    for row in built.context.verdict.rows:  # the busiest unit beside the label is its unit
        if row.bottleneck in ("l1-bound", "l2-bound", "dram-bound", "issue-bound"):
            unit = {"l1-bound": ("L1", "LSU"), "l2-bound": ("L2",), "dram-bound": ("DRAM",),
                    "issue-bound": ("issue slots",)}[row.bottleneck]
            assert row.limit.startswith(unit), (row.label, row.bottleneck, row.limit)
    text = built.markdown_text
    assert "more than the whole" not in text
    assert all(int(s) <= 100 for s in re.findall(r"(\d+)% of the [+-]", text))


def test_the_readmes_verdict_rows_are_told_apart():
    built = write_report(SETS[0][1], runs=ROOT / "examples" / "h200", out=None, markdown=None)
    heads = [r.cause.split(":")[0] for r in built.context.verdict.rows if not r.baseline]
    assert max(heads.count(h) for h in heads) <= len(heads) // 2, heads


ZOO = ROOT / "examples" / "zoo" / "runs.tar.xz"
ZOO_H100 = ROOT / "examples" / "zoo" / "runs-h100.tar.xz"


def _zoo_labels_agree(archive) -> None:
    from paprof.model.load import load_reports, variant_rows

    rows = variant_rows(load_reports(unpacked(archive) / "runs"))
    for _i, row in rows.iterrows():
        class V(dict):
            bottleneck = row["bottleneck"]
        v = V(row.to_dict())
        assert _agrees(v) is None, (row["variant"], _agrees(v))


@pytest.mark.slow  # 100 MB of library reports
@pytest.mark.skipif(not ZOO_H100.is_file(), reason="examples/zoo/runs-h100.tar.xz is not there")
def test_no_label_of_the_new_cases_is_contradicted():
    _zoo_labels_agree(ZOO_H100)


@pytest.mark.skipif(not ZOO.is_file(), reason="examples/zoo/runs.tar.xz is not there")
def test_no_zoo_label_is_contradicted_and_no_share_is_over_the_whole():
    from paprof.model.load import load_reports, variant_rows

    rows = variant_rows(load_reports(unpacked(ZOO) / "runs"))
    for _i, row in rows.iterrows():
        class V(dict):
            bottleneck = row["bottleneck"]
        v = V(row.to_dict())
        assert _agrees(v) is None, (row["variant"], _agrees(v))
    readme = (ROOT / "examples" / "zoo" / "README.md").read_text()
    new = readme.split("### What paprof names first")[0]
    assert "more than the whole" not in new
