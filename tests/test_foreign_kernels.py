"""One report paprof did not write, holding several kernels (a tutorial profiles its
naive, coalesced and tiled kernels in one ncu run, and shares that one file): ``paprof
compare REPORT`` compares its kernels, in launch order, as variants. Where the report is
paprof's own (a run record beside it) or holds one kernel, nothing changes: one variant
is still refused."""

from __future__ import annotations

import shutil

import pytest
from click.testing import CliRunner

from helpers import shipped
from paprof.cli import main


def _foreign(tmp_path, variant: str):
    """``variant``'s shipped report copied alone: no run record, as a colleague's file."""
    out = tmp_path / "theirs.ncu-rep"
    shutil.copyfile(shipped(variant), out)
    return out


def test_one_foreign_report_compares_its_kernels_in_launch_order(tmp_path):
    report = _foreign(tmp_path, "v4")  # paged_decode_v4_partial, then paged_decode_v4_merge
    done = CliRunner().invoke(main, ["compare", str(report), "--markdown", "-"])
    assert done.exit_code == 0, done.output
    assert "## paprof: paged\\_decode\\_v4\\_partial -> paged\\_decode\\_v4\\_merge" in done.output


@pytest.mark.parametrize("copy", [False, True])
def test_one_report_of_one_kernel_or_of_paprof_is_still_one_variant(tmp_path, copy):
    report = _foreign(tmp_path, "v3") if copy else shipped("v4")
    done = CliRunner().invoke(main, ["compare", str(report), "--markdown", "-"])
    assert done.exit_code == 2
    assert "compare needs at least 2 variants; the reports given hold 1" in done.output
