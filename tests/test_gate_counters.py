"""The gate's counters from the loaded table in one pass (``cause.counters_of_frame``):
each entry's snapshot is the one ``paprof compare`` of its report's rows gives (the
definition, kept here as the reference), over several steps and several reports of one
variant too, without a comparison per entry."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from paprof import gate
from paprof.model import decompose as dc
from paprof.explain.compare import compare
from paprof.model import assembly
from paprof.model.load import load_reports, variant_rows
from paprof.errors import UserError
from paprof.gate import cause
from helpers import DATA, recorded, unpacked


def _reference(kernels, entry) -> dict:
    """The snapshot as the gate made it one entry at a time: the entry's rows compared."""
    rows = kernels
    for column, value in (("report_path", entry.provenance.report), ("variant", entry.variant),
                          ("shape", entry.shape)):
        if value is not None:
            rows = rows[rows[column].astype(str) == str(value)]
    return cause._pick(compare(rows, cross=True), entry.variant, entry.shape, "the runs")


@pytest.fixture(scope="module")
def frame():
    """Every paged_decode variant (two reports each of v2 to v5: the default and source
    presets) and v4's run of three steps, a second copy of it with one step's duration
    unknown (its median cannot be taken) and one with two steps of the same duration."""
    kernels = load_reports([recorded("h200"), recorded("h200-source"),
                            unpacked(DATA / "v4-three-steps.tar.xz")], jobs=1)
    three = kernels.loc[kernels["step"] == 2, "report_path"].iloc[0]
    steps = kernels[kernels["report_path"] == three]
    assert sorted(set(steps["step"])) == [0, 1, 2] and len(steps) == 6  # two kernels a step
    unknown = steps.assign(report_path="unknown.ncu-rep")
    unknown.loc[unknown.index[unknown["step"] == 1], "duration_us"] = math.nan
    tied = steps[steps["step"] < 2].assign(report_path="tied.ncu-rep")
    tied["duration_us"] = tied.groupby("kernel")["duration_us"].transform("max")
    return pd.concat([kernels, unknown, tied], ignore_index=True)


def _entries(kernels):
    """The gate's entries of ``kernels`` (each naming its latest report), then one for
    every report of each (variant, shape)."""
    import dataclasses

    table = variant_rows(kernels)
    entries = gate.measure(table, ["duration_us"])
    others = []
    for (variant, shape, report), _ in kernels.groupby(["variant", "shape", "report_path"]):
        base = next(e for e in entries if (e.variant, e.shape) == (variant, shape))
        others.append(dataclasses.replace(
            base, provenance=dataclasses.replace(base.provenance, report=report)))
    return table, entries + others


def test_the_counters_are_those_of_compare(frame):
    table, entries = _entries(frame)
    assert len(entries) > 20
    got = cause.counters_of_frame(frame, entries, table)
    assert len(got) == len(entries)
    for entry, snap in zip(entries, got):
        assert snap == _reference(frame, entry), (entry.variant, entry.provenance.report)
    # the same without the table (made from the frame)
    assert cause.counters_of_frame(frame, entries) == got


def test_several_steps_take_the_median_step(frame):
    table, entries = _entries(frame)
    for name, kernels in (("unknown.ncu-rep", 2), ("tied.ncu-rep", 2)):
        (entry,) = [e for e in entries if e.provenance.report == name]
        (snap,) = cause.counters_of_frame(frame, [entry], table)
        assert len(snap["kernels"]) == kernels
        assert snap == _reference(frame, entry)


def test_an_entry_without_kernels_says_so(frame):
    import dataclasses

    table, entries = _entries(frame)
    gone = dataclasses.replace(entries[0], variant="v99")
    ok, missing = cause.counters_of_frame(frame, [entries[0], gone], table)
    assert isinstance(ok, dict)
    assert isinstance(missing, UserError) and "no kernels of paged_decode/v99" in str(missing)
    assert cause.with_counters([gone], frame)[0].counters is None


def test_no_comparison_per_entry(frame, monkeypatch):
    table, entries = _entries(frame)

    def refuse(*args, **kwargs):
        raise AssertionError("a comparison per entry")

    monkeypatch.setattr(assembly, "assemble", refuse)
    monkeypatch.setattr("paprof.explain.compare.compare", refuse)
    made = cause.with_counters(entries, frame, table)
    assert all(e.counters is not None for e in made)


def test_a_column_added_to_the_decomposition_flows_into_the_counters(frame, monkeypatch):
    from paprof.model import comparison as model

    table, entries = _entries(frame)
    assert "l2_throughput_pct" in model.KEPT_COLUMNS and "l2_throughput_pct" not in dc.COLUMNS
    (before,) = cause.counters_of_frame(frame, entries[:1], table)
    monkeypatch.setattr(dc, "COLUMNS", (*dc.COLUMNS, "l2_throughput_pct"))
    (after,) = cause.counters_of_frame(frame, entries[:1], table)
    assert "l2_throughput_pct" not in before["kernels"][0]["values"]
    assert after["kernels"][0]["values"]["l2_throughput_pct"] > 0
    assert cause.check_counters(after) is after
