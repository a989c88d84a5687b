"""The gate's statistics: Mann-Whitney U, the bootstrap interval, the four verdicts."""

from __future__ import annotations

import math

import numpy as np
import pytest

from paprof.model import stats


def samples(center, sd=0.5, n=30, seed=0):
    return list(np.random.default_rng(seed).normal(center, sd, n))


def test_mann_whitney_matches_the_normal_approximation_by_hand():
    # a = {4, 5, 6}, b = {1, 2, 3}: every pair a > b, U = 9; mean 4.5, var 3*3*7/12 = 5.25
    p = stats.mann_whitney_greater([4, 5, 6], [1, 2, 3])
    assert p == pytest.approx(0.5 * math.erfc((9 - 4.5 - 0.5) / math.sqrt(5.25) / math.sqrt(2)))
    assert stats.mann_whitney_greater([1, 2, 3], [4, 5, 6]) > 0.95


def test_ties_share_ranks_and_all_ties_give_p_one():
    assert list(stats.rank_average(np.array([3.0, 1.0, 3.0, 2.0]))) == [3.5, 1.0, 3.5, 2.0]
    assert stats.mann_whitney_greater([7] * 6, [7] * 6) == 1.0


def test_bootstrap_interval_is_deterministic_and_brackets_the_ratio():
    base, now = samples(100), samples(103, seed=1)
    first = stats.median_ratio_ci(base, now)
    assert first == stats.median_ratio_ci(base, now)
    assert first[0] < np.median(now) / np.median(base) < first[1]


@pytest.mark.parametrize("factor, verdict", [
    (1.00, "same"), (1.03, "regressed"), (1.10, "regressed"), (0.95, "improved"),
])
def test_verdicts_on_synthetic_durations(factor, verdict):
    d = stats.decide(samples(100), samples(100 * factor, seed=1), min_effect=0.02)
    assert d.verdict == verdict, d.describe()


def test_higher_is_better_flips_the_direction():
    d = stats.decide(samples(80), samples(70, seed=1), 0.02, higher_is_better=True)
    assert d.verdict == "regressed" and d.ratio > 1


def test_noisy_samples_are_ambiguous():
    d = stats.decide(samples(100), samples(100, sd=6, n=6, seed=1), 0.02)
    assert d.verdict == "ambiguous"


def test_too_few_samples_is_refused():
    with pytest.raises(ValueError, match="5 samples"):
        stats.decide([1, 2, 3], [1, 2, 3, 4, 5], 0.02)


def test_ambiguous_is_remeasured_then_decided():
    base = samples(100)
    calls = []

    def remeasure():
        calls.append(1)
        return samples(100, n=60, seed=10 + len(calls))

    d = stats.decide_until(base, samples(100, sd=6, n=6, seed=1), 0.02, remeasure, rounds=3)
    assert d.verdict == "same" and d.rounds == 2 and len(calls) == 1


def test_ambiguous_after_the_bound_stays_ambiguous():
    calls = []

    def remeasure():  # exactly at the minimum effect: never beyond it, never within it
        calls.append(1)
        return [x * 1.02 for x in samples(100, seed=20 + len(calls))]

    d = stats.decide_until(samples(100), [x * 1.02 for x in samples(100, seed=1)], 0.02,
                           remeasure, rounds=3)
    assert d.verdict == "ambiguous" and d.rounds == 3 and len(calls) == 2
