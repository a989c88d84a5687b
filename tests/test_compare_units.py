"""Number formatting (``paprof.explain.fmt``) and the per-GPU table (``gpus``)."""

from __future__ import annotations

import math

import pytest

from paprof.explain import fmt
from paprof.model import gpus


@pytest.mark.parametrize("fn,value,text", [
    (fmt.count, 2048, "2,048"),
    (fmt.pct, 50.0, "50 %"),
    (fmt.pct, 41.666, "41.7 %"),
    (fmt.pct, -0.01, "0 %"),
    (fmt.duration_us, 22.6, "22.6 us"),
    (fmt.duration_us, 3350.0, "3.35 ms"),
    (fmt.duration_us, 120000.0, "120 ms"),
    (fmt.duration_us, 1.5e6, "1.5 s"),
    (fmt.bytes_decimal, 2147483648, "2.15 GB"),
    (fmt.bytes_binary, 16384, "16 KiB"),
    (fmt.bytes_binary, 128, "128 B"),
    (fmt.bandwidth_gbs, 827.4, "827 GB/s"),
    (fmt.bandwidth_gbs, 3612.0, "3.61 TB/s"),
    (fmt.big, 39.1e6, "39.1 M"),
    (fmt.ratio, 1.4776, "1.48x"),
    (fmt.ratio, 16.0, "16x"),
    (fmt.signed_pct, 12.5, "+12.5 %"),
    (fmt.signed_pct, -40.0, "-40 %"),
    (fmt.signed_pts, 27.5, "+27.5 pts"),
    (fmt.signed_pts, 0.01, "0 pts"),
])
def test_formats(fn, value, text):
    assert fn(value) == text


@pytest.mark.parametrize("missing", [None, math.nan, "x"])
def test_missing_prints_na(missing):
    assert fmt.pct(missing) == fmt.count(missing) == fmt.duration_us(missing) == "n/a"


def test_gpu_table_lookup_by_any_spelling():
    spec = gpus.lookup("NVIDIA H200")
    assert (spec.sms, spec.l2_mb, spec.read_ceiling_tbs, spec.dram_datasheet_tbs) == (132, 60, 4.53, 4.8)
    assert gpus.lookup("nvidia-h200") is spec and gpus.lookup("  nvidia h200 ") is spec
    assert gpus.lookup("Unknown GPU") is None and gpus.lookup(None) is None


def test_ceiling_measured_from_table_or_sidecar():
    c = gpus.ceiling_for("NVIDIA H200")
    assert (c.tbs, c.measured, c.datasheet_tbs, c.gbs) == (4.53, True, 4.8, 4530.0)
    assert gpus.ceiling_for("NVIDIA H200", {"read_ceiling_tbs": 4.3}).tbs == 4.3
    assert gpus.ceiling_for("Mystery", {"read_ceiling_tbs": 2.0}).tbs == 2.0
    assert gpus.ceiling_for("Mystery") is None


def test_a_gpu_without_measured_ceiling_falls_back_to_the_datasheet(monkeypatch):
    row = gpus.GpuSpec("Test GPU", sms=10, l2_mb=4, dram_datasheet_tbs=1.0, read_ceiling_tbs=None)
    monkeypatch.setattr(gpus, "_BY_SLUG", {"test-gpu": row})
    c = gpus.ceiling_for("Test GPU")
    assert (c.tbs, c.measured) == (1.0, False) and "datasheet" in c.source
