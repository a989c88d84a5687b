"""The gate's decisions on samples (same, regressed, improved, ambiguous and re-measured),
exact counters and the ratchet, the per-launch samples in the baseline file."""

from __future__ import annotations

import json

import numpy as np
import pytest

from paprof import gate
from paprof.errors import UserError
from paprof.gate import Baseline, Entry, Settings, Stat, compare_to_baseline

SHAPE = "rows=16384,cols=4096"


def launches(center, sd=0.5, n=30, seed=0):
    return Stat.of(np.random.default_rng(seed).normal(center, sd, n))


def entry(**metrics) -> Entry:
    return Entry("softmax", "fused", SHAPE, metrics)


def one(base: dict, now: dict, settings=None, remeasure=None):
    verdict = compare_to_baseline(Baseline([entry(**base)]), [entry(**now)], settings,
                                  remeasure=remeasure)
    (result,) = verdict.results
    return verdict, result


@pytest.mark.parametrize("factor, outcome, status", [
    (1.00, "same", "pass"), (1.03, "regressed", "regressed"), (1.10, "regressed", "regressed"),
    (0.95, "improved", "improved"),
])
def test_event_timed_samples_are_decided_statistically(factor, outcome, status):
    verdict, r = one({"duration_us_event": launches(300)},
                     {"duration_us_event": launches(300 * factor, seed=1)})
    assert (r.outcome, r.status) == (outcome, status), r.message
    assert r.decision is not None and r.decision.n_now == 30
    assert verdict.exit_code == (1 if status == "regressed" else 0)


def test_a_higher_is_better_metric_regresses_when_it_falls():
    _, r = one({"dram_throughput_pct": launches(85, n=10)},
               {"dram_throughput_pct": launches(75, n=10, seed=1)})
    assert r.outcome == "regressed" and "min effect 3 %" in r.allowed_text


def test_a_single_launch_keeps_the_tolerance_rule():
    _, r = one({"duration_us": Stat(1000.0, 0.0, 1)}, {"duration_us": Stat(1040.0, 0.0, 1)})
    assert r.decision is None and r.outcome == "same"


def test_the_tolerance_option_sets_the_minimum_effect():
    settings = Settings(tolerances={"duration_us_event": gate.Tolerance(relative=0.05)})
    _, r = one({"duration_us_event": launches(300)},
               {"duration_us_event": launches(309, seed=1)}, settings)
    assert r.outcome == "same" and r.decision.min_effect == 0.05


def _at_the_effect(seed):  # exactly 2 % slower: never beyond the minimum effect, never within
    return Stat.of([x * 1.02 for x in launches(300, seed=seed).samples])


def test_ambiguous_is_remeasured_then_decided():
    calls = []

    def remeasure(e):
        calls.append(e.key)
        return entry(duration_us_event=launches(300, n=60, seed=5))

    noisy = launches(300, sd=20, n=6, seed=1)
    verdict, r = one({"duration_us_event": launches(300)}, {"duration_us_event": noisy},
                     remeasure=remeasure)
    assert r.outcome == "same" and r.decision.rounds == 2 and len(calls) == 1
    assert r.now.n == 66  # the pooled samples are what the table shows


def test_ambiguous_after_the_bound_passes_with_a_note_or_fails_when_asked():
    def remeasure(e):
        return entry(duration_us_event=_at_the_effect(seed=7))

    base = {"duration_us_event": launches(300)}
    now = {"duration_us_event": _at_the_effect(seed=1)}
    verdict, r = one(base, now, Settings(rounds=3), remeasure)
    assert (r.outcome, r.status, r.decision.rounds) == ("ambiguous", "pass", 3)
    assert verdict.exit_code == 0 and "1 ambiguous" in verdict.summary
    assert any("ambiguous after 3 measurements" in n for n in verdict.notes)
    verdict, r = one(base, now, Settings(fail_ambiguous=True), remeasure)
    assert (r.outcome, r.status, verdict.exit_code) == ("ambiguous", "regressed", 1)


@pytest.mark.parametrize("now, ratchet, outcome, code", [
    (64, False, "same", 0), (72, False, "regressed", 1), (56, False, "changed", 1),
    (56, True, "improved", 0), (72, True, "regressed", 1),
])
def test_registers_are_exact_and_the_ratchet_lets_them_fall(now, ratchet, outcome, code):
    verdict, r = one({"registers_per_thread": Stat(64.0, 0.0, 1)},
                     {"registers_per_thread": Stat(float(now), 0.0, 1)}, Settings(ratchet=ratchet))
    assert (r.outcome, verdict.exit_code) == (outcome, code), r.message
    if outcome == "changed":
        assert "--ratchet" in r.message and r.allowed_text.startswith("= 64")


def test_counts_take_no_spread_allowance():
    # a spread of 5 M bytes would have let 2.008 GB pass under the old rule
    _, r = one({"dram_bytes": Stat(2.0e9, 5e6, 5)}, {"dram_bytes": Stat(2.0e9 * 1.0051, 5e6, 5)})
    assert r.outcome == "regressed"
    _, r = one({"dram_bytes": Stat(2.0e9, 0, 1)}, {"dram_bytes": Stat(1.5e9, 0, 1)})
    assert r.outcome == "improved"  # fewer bytes is always good: one-way


def test_samples_round_trip_and_schema_1_still_loads(tmp_path):
    made = Baseline([entry(duration_us_event=launches(300, n=6))], created="now")
    path = gate.save_baseline(made, tmp_path / "b.json")
    data = json.loads(path.read_text())
    assert data["schema"] == 3 and data["gate"] == "profile"
    stat = data["entries"][0]["metrics"]["duration_us_event"]
    assert len(stat["samples"]) == 6
    assert gate.load_baseline(path).entries[0].metrics["duration_us_event"].samples == tuple(
        stat["samples"])
    old = {"kind": "paprof-baseline", "schema": 1, "entries": [
        {"family": "softmax", "variant": "fused", "shape": SHAPE,
         "metrics": {"duration_us": {"value": 300.0, "spread": 1.0, "n": 5}}}]}
    (tmp_path / "old.json").write_text(json.dumps(old))
    loaded = gate.load_baseline(tmp_path / "old.json")
    assert loaded.gate == "profile" and loaded.entries[0].metrics["duration_us"].samples == ()


def test_bad_samples_are_corrupt(tmp_path):
    bad = {"kind": "paprof-baseline", "schema": 2, "entries": [
        {"family": "softmax", "variant": "fused", "shape": SHAPE,
         "metrics": {"duration_us": {"value": 300.0, "spread": 1.0, "n": 2,
                                     "samples": [300.0, -1.0]}}}]}
    (tmp_path / "b.json").write_text(json.dumps(bad))
    with pytest.raises(UserError, match="cannot be negative"):
        gate.load_baseline(tmp_path / "b.json")


def test_markdown_and_junit_say_ambiguous_and_changed():
    from paprof.render.check_markdown import verdict_markdown
    from paprof.render.junit import junit_tree

    def remeasure(e):
        return entry(duration_us_event=_at_the_effect(seed=7))

    verdict, r = one({"duration_us_event": launches(300)},
                     {"duration_us_event": _at_the_effect(seed=1)}, Settings(rounds=3), remeasure)
    assert r.outcome == "ambiguous"
    assert "pass (*ambiguous*: noisier than the minimum effect)" in verdict_markdown(verdict)
    case = junit_tree(verdict).getroot().find(".//testcase")
    assert case.find("failure") is None
    assert case.find("properties/property").get("value") == "ambiguous"
    assert case.find("system-out").text.startswith("ambiguous: ")
