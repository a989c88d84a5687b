"""The v5/v6 fp16 sweep shipped in examples/sweeps (12 points, measured on the H200):
the report rebuilt from the stores tells the crossovers; compare and the gate read them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from paprof.sweep.report import write_sweep_report

SWEEPS = Path(__file__).resolve().parents[1] / "examples" / "sweeps"


@pytest.mark.parametrize("mode", ["bench", "profile"])
def test_the_report_rebuilt_from_the_shipped_store(tmp_path, mode):
    done = write_sweep_report(SWEEPS / f"h200-{mode}", out=tmp_path / "s.html",
                              markdown=tmp_path / "s.md")
    text = (tmp_path / "s.md").read_text()
    for context in (4096, 16384, 65536):
        assert f"below batch 64 at context {context}; from batch 64 on they are within 2 %" in text
    regime = json.loads(done.regime.read_text())
    assert regime == json.loads((SWEEPS / f"h200-{mode}.regime.json").read_text())
    assert (tmp_path / "s.html").read_text().count("<img") >= 4


def test_the_profiled_regime_names_the_bottleneck_shift():
    text = (SWEEPS / "h200-profile.md").read_text()
    # v5 cannot fill the GPU until batch 64; v6 splits and is DRAM-bound from batch 4, context 16384
    assert "| 64 | tie: v5, v6, v5 dram-bound, v6 dram-bound |" in text
    assert "| batch 4, context 65536 | 1.45 ms, 0.741 TB/s, occupancy/launch-bound | 253 us, 4.24 TB/s, dram-bound |" in text


def test_compare_and_the_gate_read_a_sweep_store(tmp_path):
    from click.testing import CliRunner

    from paprof.cli import main

    store = SWEEPS / "h200-profile"
    result = CliRunner().invoke(main, ["compare", "v5", "v6", "--runs", str(store), "--shape",
                                       "batch=4,context=65536,dtype=fp16", "--markdown", "-",
                                       "--out", str(tmp_path / "c.html")])
    assert result.exit_code == 0, result.output
    assert "v6 is 5.7" in result.output and "occupancy/launch-bound** → **dram-bound" in result.output
    base = tmp_path / "base.json"
    made = CliRunner().invoke(main, ["baseline", "update", "--runs", str(store), "--out", str(base)])
    assert made.exit_code == 0, made.output
    assert "wrote" in made.output and "(24 entries)" in made.output
    checked = CliRunner().invoke(main, ["check", "--baseline", str(base), "--runs", str(store)])
    assert checked.exit_code == 0, checked.output
