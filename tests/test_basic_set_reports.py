"""Reports of ncu's basic set, as users write them (``tests/data/basic-set.tar.xz``: a plain
CUDA program under ``ncu --set basic``, one report a kernel, no run record): no
WarpStateStats, SchedulerStats or InstructionStats, so the warp-time identity has no
inputs. The step is split by the slower kernel's busiest unit (its work and its
throughput, adding up to the difference) and the line says what the reports lack. A
regression test of that fallback on real reports, not a claim about the cause: these
pairs' words were not registered before their run."""

from __future__ import annotations

import math

import pytest
from click.testing import CliRunner

from helpers import DATA, unpacked
from paprof.cli import main
from paprof.api import finished_comparison

BASIC = DATA / "basic-set.tar.xz"


def _pair(name: str):
    folder = unpacked(BASIC) / "basic-set"
    return [folder / f"{name}_slow.ncu-rep", folder / f"{name}_fast.ncu-rep"]


def test_the_reports_lack_the_identitys_counters():
    cmp = finished_comparison(_pair("uncoalesced"), sources=False)
    for v in cmp.variants:
        assert v.get("duration_us") and v.get("l2_throughput_pct")
        assert all(v.get(c) is None or (isinstance(v.get(c), float) and math.isnan(v.get(c)))
                   for c in ("warp_cycles_per_issue", "instructions_executed", "stall_long_scoreboard"))


def test_a_basic_set_pair_is_split_by_its_busiest_unit_and_says_what_is_missing():
    cmp = finished_comparison(_pair("uncoalesced"), sources=False)
    (step,) = cmp.steps
    dec = step.decomposition
    assert [t.key for t in dec.terms] == ["unit:work", "unit:busy"]
    assert sum(t.us for t in dec.terms) == pytest.approx(dec.delta_us, rel=1e-9)
    assert step.cause.startswith("less L2 work: L2 busy time at its peak rate ")
    assert "no WarpStateStats, SchedulerStats or InstructionStats counters in these reports" in step.cause


def test_compare_on_the_command_line_reads_them_as_any_user_would():
    slow, fast = _pair("bank_conflicts")
    done = CliRunner().invoke(main, ["compare", str(slow), str(fast), "--markdown", "-"])
    assert done.exit_code == 0, done.output
    assert "bank\\_conflicts\\_fast is 1.81x faster than bank\\_conflicts\\_slow" in done.output
