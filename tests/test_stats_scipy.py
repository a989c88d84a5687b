"""The gate's hand-written statistics agree with scipy's (docs/architecture.md, "What is
written by hand, and why": paprof keeps its own for an import of 13 ms instead of
seconds and no 145 MB dependency). Skipped where scipy is not installed (paprof does not
need it)."""

from __future__ import annotations

import numpy as np
import pytest

from paprof.model import stats

scipy_stats = pytest.importorskip("scipy.stats")


def test_mann_whitney_p_values_equal_scipys_on_random_samples_with_ties():
    rng = np.random.default_rng(39)
    for _ in range(300):
        n_a, n_b = rng.integers(1, 40, 2)
        step = rng.choice([1.0, 0.1, 0.01])  # coarse steps: many ties
        a = np.round(rng.normal(100, 5, n_a) / step) * step
        b = np.round(rng.normal(100 + rng.normal(0, 3), 5, n_b) / step) * step
        theirs = scipy_stats.mannwhitneyu(a, b, alternative="greater", use_continuity=True,
                                          method="asymptotic").pvalue
        ours = stats.mann_whitney_greater(a, b)
        assert ours == pytest.approx(1.0 if np.isnan(theirs) else theirs, abs=1e-12)


def test_the_bootstrap_interval_is_scipys_within_resampling_noise():
    rng = np.random.default_rng(40)
    for n in (5, 30, 100):
        base, now = rng.normal(100, 3, n), rng.normal(103, 3, n)
        low, high = stats.median_ratio_ci(base, now)
        theirs = scipy_stats.bootstrap(
            (base, now), lambda x, y, axis: np.median(y, axis=axis) / np.median(x, axis=axis),
            paired=False, vectorized=True, method="percentile", confidence_level=0.99,
            n_resamples=2000, random_state=15).confidence_interval
        assert low == pytest.approx(theirs.low, rel=0.01)
        assert high == pytest.approx(theirs.high, rel=0.01)
