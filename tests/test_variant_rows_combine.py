"""``variant_rows`` combines a step of several kernels on arrays taken from the frame once
(``load._Combiner``), bit for bit as pandas' per-group operations did (the reference
below): sums of 8 kernels or more included (numpy sums those pairwise), with missing
values and missing durations."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from paprof.model import load
from paprof.read import metrics as M
from helpers import DATA, recorded, unpacked


def _reference(group: pd.DataFrame) -> dict:
    """A step's combined columns as pandas computed them, a group at a time."""
    group = group.sort_values("result_index")
    durations = group["duration_us"].astype(float)
    row = group.iloc[int(durations.fillna(-1.0).to_numpy().argmax())].to_dict()
    for entry in M.CATALOGUE:
        if entry.column not in group or entry.text:
            continue
        values = group[entry.column].astype(float)
        if entry.combine == M.SUM:
            row[entry.column] = values.sum(min_count=1)
        elif entry.combine == M.WEIGHTED:
            ok = values.notna() & durations.notna()
            weight = durations[ok].sum()
            row[entry.column] = ((values[ok] * durations[ok]).sum() / weight
                                 if ok.any() and weight > 0 else math.nan)
    row["achieved_bandwidth_gbs"] = load.bandwidth_gbs(row["dram_bytes"], row["duration_us"])
    load.ratios(row)
    load.work_rates(row)
    row["top_stall_reason"], row["top_stall_cycles"] = load.top_stall(row)
    row["kernel"] = " + ".join(group["kernel"])
    return row


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or np.float64(a).tobytes() == np.float64(b).tobytes()


def _check(frame: pd.DataFrame) -> int:
    summed = load.variant_rows(frame)
    numbers = [c for c in frame.columns if frame[c].dtype.kind == "f"]
    checked = 0
    for _, step in frame.groupby(["report_path", "step"], sort=False):
        if len(step) < 2:
            continue
        want = _reference(step)
        (got,) = summed[(summed["report_path"] == want["report_path"])
                        & (summed["step"] == want["step"])].to_dict("records")
        assert got["kernel"] == want["kernel"]
        assert got["launch"] == want["launch"]  # the dominant kernel's
        for column in numbers:
            assert _same(got[column], want[column]), (column, got[column], want[column])
        checked += 1
    return checked


def test_recorded_steps_of_several_kernels():
    frame = load.load_reports([recorded("h200"), unpacked(DATA / "v4-three-steps.tar.xz")],
                              jobs=1)
    assert _check(frame) == 4  # v4 of the H200 runs, and each of the three steps


def test_many_kernels_missing_values_and_durations():
    v4 = load.load_reports([recorded("h200") / "nvidia-h200" / "paged_decode" / "v4"], jobs=1)
    rng = np.random.default_rng(40)
    parts = []
    for g, kernels in enumerate(range(2, 14)):
        for i in range(kernels):
            part = v4.iloc[[i % len(v4)]].copy()
            part["report_path"], part["result_index"] = f"r{g}.ncu-rep", (5 * i) % kernels
            part["kernel"] = f"k{i}"
            parts.append(part)
    frame = pd.concat(parts, ignore_index=True)
    floats = [c for c in frame.columns if frame[c].dtype.kind == "f"]
    values = np.abs(rng.standard_normal((len(frame), len(floats))))
    values *= 10.0 ** rng.integers(-3, 10, values.shape)
    values[rng.random(values.shape) < 0.15] = np.nan
    frame[floats] = values
    frame.loc[rng.random(len(frame)) < 0.1, "duration_us"] = np.nan
    assert _check(frame) == 12
