"""The gate's output on real runs stays what it was: the baseline file (its counters
above all) and ``check``'s verdicts and cause lines, byte for byte, on a store of every
recorded run (tests/data): the 8 paged_decode variants, the same 4 with the source
preset, the fp16 sweep's 24 runs, flash_fwd's 4, and v4's run of three steps. The check
runs against the same store with reports swapped between variants (``SWAPS``), so that
regressions and improvements name their causes from the loaded runs.

The expected files (tests/data/gate-golden) were written by the gate as it was before
its counters were computed in one pass over the table (issue 40); re-write them only
for a change meant to alter the gate's output: ``PAPROF_GOLDEN=write pytest
tests/test_gate_golden.py``.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from helpers import DATA, recorded, unpacked

GOLDEN = DATA / "gate-golden"
SWAPS = (("h200", "paged_decode", "v1", "v6"), ("source", "paged_decode", "v2", "v3"),
         ("source", "paged_decode", "v4", "v5"), ("flash", "flash_fwd", "mma", "wgmma2"))
"""(store, family, a, b): a's reports become b's and b's a's (the source preset's runs
are the latest of v2 to v5, so theirs are the ones checked)."""


def _store(where: Path) -> Path:
    """Every recorded run under one folder (a store of stores)."""
    for name, source in (("h200", recorded("h200")), ("source", recorded("h200-source")),
                         ("sweep", recorded("sweeps/h200-profile")),
                         ("flash", recorded("h200-flash_fwd")),
                         ("steps", unpacked(DATA / "v4-three-steps.tar.xz"))):
        shutil.copytree(source, where / name)
    return where


def _swapped(store: Path, where: Path) -> Path:
    """``store`` copied, with the reports of each pair in ``SWAPS`` exchanged (each
    sidecar still naming the variant of its folder)."""
    shutil.copytree(store, where)
    for sub, family, a, b in SWAPS:
        root = where / sub / "nvidia-h200" / family
        for x, y in ((a, b), (b, a)):
            for report in sorted((store / sub / "nvidia-h200" / family / x).glob("*.ncu-rep")):
                target = root / y / report.name
                if target.exists():
                    shutil.copy(report, target)
    return where


def _normal(text: str, tmp: Path) -> str:
    return text.replace(str(tmp.resolve()), "<tmp>").replace(str(tmp), "<tmp>")


def _outputs(invoke, tmp: Path) -> dict[str, str]:
    store = _store(tmp / "runs")
    now = _swapped(store, tmp / "now")
    base = tmp / "base.json"
    made = invoke("baseline", "update", "--runs", store, "--out", base)
    assert made.exit_code == 0, made.output
    data = json.loads(base.read_text())
    data["created"] = "<created>"
    checked = invoke("check", "--baseline", base, "--runs", now, "--json", tmp / "check.json")
    assert checked.exit_code == 1, checked.output  # the swaps regress
    verdict = json.loads((tmp / "check.json").read_text())
    return {"baseline.json": _normal(json.dumps(data, indent=1, sort_keys=True), tmp) + "\n",
            "update.txt": _normal(made.output, tmp),
            "check.txt": _normal(checked.output, tmp),
            "check.json": _normal(json.dumps(verdict, indent=1, sort_keys=True), tmp) + "\n"}


@pytest.mark.lab
def test_baseline_and_check_output_is_unchanged(invoke, tmp_path):
    got = _outputs(invoke, tmp_path)
    if os.environ.get("PAPROF_GOLDEN") == "write":
        GOLDEN.mkdir(exist_ok=True)
        for name, text in got.items():
            (GOLDEN / name).write_text(text)
    for name, text in got.items():
        assert text == (GOLDEN / name).read_text(), name
