"""The time ledger (``paprof.analysis.ledger``): terms derived from counters plus a
residual that add up to each step's duration change exactly."""

from __future__ import annotations

import math

import pytest

from paprof.analysis.ledger import idle_fraction, ledger, parts

CEILING_GBS = 4000.0  # 4e6 bytes per microsecond


def variant(duration_us, dram_bytes=None, waves=None, issue_pct=None):
    return {"duration_us": duration_us, "dram_bytes": dram_bytes, "waves_per_sm": waves,
            "issue_slots_busy_pct": issue_pct}


def test_idle_fraction_of_the_last_wave():
    assert idle_fraction(0.5) == pytest.approx(0.5)
    assert idle_fraction(1.0) == 0.0
    assert idle_fraction(1.25) == pytest.approx(1 - 1.25 / 2)
    assert idle_fraction(None) is None and idle_fraction(0) is None


def test_parts_of_one_variant_recover_known_terms():
    # 400e6 bytes at 4e6 B/us = 100 us; beyond = 900 us; half a wave idle -> tail 450 us;
    # issue: 1000 us x 30 % = 300 us, minus the 100 us floor = 200 us; residual 250 us
    got, missing = parts(variant(1000.0, 400e6, 0.5, 30.0), CEILING_GBS)
    assert missing == []
    assert got["dram"] == pytest.approx(100.0)
    assert got["tail"] == pytest.approx(450.0)
    assert got["issue"] == pytest.approx(200.0)
    assert got["residual"] == pytest.approx(250.0)
    assert sum(got.values()) == pytest.approx(1000.0, rel=1e-15)


def test_issue_never_exceeds_what_is_left_of_the_duration():
    got, _ = parts(variant(100.0, 4e6, 1.0, 100.0), CEILING_GBS)  # floor 1 us, issue 100 us
    assert got["issue"] == pytest.approx(99.0) and got["residual"] == pytest.approx(0.0)


def test_step_ledger_recovers_the_changes_of_known_terms():
    before = variant(1000.0, 400e6, 0.5, 30.0)   # dram 100, tail 450, issue 200, residual 250
    after = variant(400.0, 800e6, 1.0, 60.0)     # dram 200, tail 0, issue 40, residual 160
    led = ledger(before, after, CEILING_GBS, CEILING_GBS, "a", "b")
    assert led.terms["dram"] == pytest.approx(100.0)
    assert led.terms["tail"] == pytest.approx(-450.0)
    assert led.terms["issue"] == pytest.approx(40.0 - 200.0)
    assert led.residual == pytest.approx(160.0 - 250.0)
    assert led.difference == -600.0
    assert sum(led.terms.values()) + led.residual == pytest.approx(-600.0, abs=1e-9)
    assert [k for k, _, _ in led.rows()] == ["dram", "tail", "issue", "residual"]


def test_absent_counters_leave_their_time_in_the_residual_and_say_so():
    led = ledger(variant(10.0), variant(5.0), None, None)
    assert led.terms == {"dram": 0.0, "tail": 0.0, "issue": 0.0}
    assert led.residual == -5.0
    assert led.missing == ["dram", "tail", "issue"]


def test_a_variant_without_duration_is_refused():
    with pytest.raises(ValueError):
        parts({"dram_bytes": 1.0}, CEILING_GBS)


def test_sum_is_exact_on_awkward_numbers():
    before = variant(math.pi * 1e4, 2.15e9 + 1 / 3, 1.2929, 52.955766)
    after = variant(math.e * 1e2, 2.151e9, 0.9697, 58.0029)
    led = ledger(before, after, 4530.0, 4530.0)
    assert abs(sum(led.terms.values()) + led.residual - led.difference) <= 1e-9 * abs(led.difference)
