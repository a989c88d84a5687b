"""Hostile records and reports: each refused in one line (exit 2, the file and the field
named) and quickly, never a traceback or a hang (issue 38, items 5 and 6)."""

from __future__ import annotations

import os
import shutil
import time

import pytest

from paprof.analysis import ncu_fastread, ncu_reader
from paprof.errors import UserError
from helpers import shipped


def _zero_tailed(tmp_path, zeros: int = 40 << 20):
    """A real report followed by ``zeros`` bytes of zeros, written sparse."""
    report = tmp_path / "zeros.ncu-rep"
    shutil.copy(shipped("v1"), report)
    os.truncate(report, report.stat().st_size + zeros)
    return report


def test_a_zero_filled_tail_is_refused_at_once_by_both_readers(tmp_path):
    report = _zero_tailed(tmp_path)
    start = time.perf_counter()
    with pytest.raises(ncu_fastread.Corrupt, match="empty blocks"):
        ncu_fastread.read_report(report, ["gpu__time_duration.sum"])
    with pytest.raises(UserError, match="corrupt.*empty blocks.*zero-filled"):
        ncu_reader.check_framing(report)
    with pytest.raises(UserError, match="corrupt.*empty blocks") as err:
        ncu_reader.open_report(report)
    assert "\n" not in str(err.value)
    assert time.perf_counter() - start < 0.5


def test_the_cli_says_a_zero_filled_report_is_damaged(tmp_path, invoke):
    report = _zero_tailed(tmp_path)
    start = time.perf_counter()
    result = invoke("table", report)
    assert result.exit_code == 2, result.output
    assert "empty blocks" in result.output and "Traceback" not in result.output
    assert time.perf_counter() - start < 5
