"""Deciding "slower by more than the minimum effect" from repeated launches.

Two robust, distribution-free tools on the per-launch samples of a baseline and of now,
both deterministic (NumPy only):

- ``mann_whitney_greater(a, b)``: one-sided Mann-Whitney U test that ``a`` tends to be
  larger than ``b`` (normal approximation with the tie correction and a continuity
  correction);
- ``median_ratio_ci(base, now)``: a percentile bootstrap confidence interval of
  ``median(now) / median(base)`` with a fixed seed.

``decide`` turns them into one of four verdicts, in *cost* terms (a duration as it is; a
higher-is-better metric through its reciprocal, so that a ratio above 1 is always worse),
with ``e`` the minimum effect and ``alpha = 1 - confidence``:

- ``regressed``: the test says now is worse than the baseline scaled by ``1 + e``
  (``p < alpha``): slower by more than the minimum effect, with confidence, and the
  interval of the ratio lies above 1 (a few wild launches cannot carry the test alone);
- ``improved``: symmetrically, better than the baseline scaled by ``1 - e`` and the
  interval below 1;
- ``same``: neither, and the confidence interval of the ratio lies within ``[1 - e, 1 + e]``;
- ``ambiguous``: neither, and the interval reaches past ``1 +- e``: too few or too noisy
  samples to tell. ``decide_until`` then asks its caller for more samples (``remeasure()``)
  up to a bound of rounds, pooling them, and decides again.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

VERDICTS = ("same", "regressed", "improved", "ambiguous")

MIN_SAMPLES = 5
"""Fewer samples on either side than this: no statistical decision (``decide`` refuses;
the gate falls back to its tolerance-and-spread rule)."""
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 15
"""Fixed: the same samples give the same interval, in CI and on a laptop."""


def rank_average(values: np.ndarray) -> np.ndarray:
    """Ranks 1..n, ties sharing their average rank."""
    order = np.argsort(values, kind="mergesort")
    ranks = np.empty(len(values), dtype=float)
    sorted_vals = values[order]
    i = 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and sorted_vals[j + 1] == sorted_vals[i]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def mann_whitney_greater(a: Sequence[float], b: Sequence[float]) -> float:
    """One-sided p-value of the Mann-Whitney U test that ``a`` tends to exceed ``b``.

    U counts the pairs (x in a, y in b) with x > y (ties count a half); under the null its
    mean is ``n_a n_b / 2`` and its variance ``n_a n_b / 12 * ((N + 1) - sum(t^3 - t) /
    (N (N - 1)))`` over the tie groups ``t``. p = 1 when every value ties.
    """
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    n_a, n_b = len(a), len(b)
    if not n_a or not n_b:
        raise ValueError("both samples need at least one value")
    both = np.concatenate([a, b])
    ranks = rank_average(both)
    u = ranks[:n_a].sum() - n_a * (n_a + 1) / 2
    n = n_a + n_b
    _, counts = np.unique(both, return_counts=True)
    ties = float(((counts**3) - counts).sum())
    var = n_a * n_b / 12 * ((n + 1) - ties / (n * (n - 1) if n > 1 else 1))
    if var <= 0:
        return 1.0
    z = (u - n_a * n_b / 2 - 0.5) / math.sqrt(var)
    return 0.5 * math.erfc(z / math.sqrt(2))


def median_ratio_ci(base: Sequence[float], now: Sequence[float], confidence: float = 0.99,
                    resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED
                    ) -> tuple[float, float]:
    """Two-sided percentile bootstrap interval of ``median(now) / median(base)``."""
    base = np.asarray(base, dtype=float)
    now = np.asarray(now, dtype=float)
    rng = np.random.default_rng(seed)
    mb = np.median(base[rng.integers(0, len(base), (resamples, len(base)))], axis=1)
    mn = np.median(now[rng.integers(0, len(now), (resamples, len(now)))], axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = mn / mb
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(ratios, [tail, 100 - tail])
    return float(low), float(high)


@dataclass(frozen=True)
class Decision:
    """The outcome of ``decide``, in cost terms (a ratio above 1 is worse)."""

    verdict: str
    """``same``, ``regressed``, ``improved`` or ``ambiguous``."""
    ratio: float
    """``median(now) / median(base)`` of the costs."""
    low: float
    high: float
    """The bootstrap confidence interval of ``ratio``."""
    p_worse: float
    """p of "now worse than the baseline by more than the minimum effect"."""
    p_better: float
    """p of "now better than the baseline by more than the minimum effect"."""
    min_effect: float
    confidence: float
    n_base: int
    n_now: int
    rounds: int = 1
    """Measurements of now that were pooled (1 + re-measurements)."""

    def describe(self) -> str:
        """``x1.031 [1.024, 1.038] (99 % CI), p=2e-05, 30 vs 30 launches``."""
        p = self.p_worse if self.ratio >= 1 else self.p_better
        again = f", {self.rounds} rounds" if self.rounds > 1 else ""
        return (f"x{self.ratio:.3f} [{self.low:.3f}, {self.high:.3f}] "
                f"({self.confidence * 100:g} % CI), p={p:.2g}, "
                f"{self.n_base} vs {self.n_now} launches{again}")


def _costs(values: Sequence[float], higher_is_better: bool) -> np.ndarray:
    x = np.asarray(values, dtype=float)
    if not higher_is_better:
        return x
    return 1.0 / np.maximum(x, np.finfo(float).tiny)


def decide(base: Sequence[float], now: Sequence[float], min_effect: float,
           confidence: float = 0.99, higher_is_better: bool = False) -> Decision:
    """The verdict on two sets of per-launch samples (module docstring).

    ``min_effect`` is a fraction (0.02 = 2 %); ``confidence`` sets both the test's level
    (``alpha = 1 - confidence``) and the interval. Needs ``MIN_SAMPLES`` on each side.
    """
    if len(base) < MIN_SAMPLES or len(now) < MIN_SAMPLES:
        raise ValueError(f"a statistical decision needs {MIN_SAMPLES} samples a side, "
                         f"got {len(base)} and {len(now)}")
    if not 0 <= min_effect < 1 or not 0 < confidence < 1:
        raise ValueError("min_effect must be in [0, 1) and confidence in (0, 1)")
    b = _costs(base, higher_is_better)
    n = _costs(now, higher_is_better)
    alpha = 1 - confidence
    p_worse = mann_whitney_greater(n / (1 + min_effect), b)
    p_better = mann_whitney_greater(b, n / (1 - min_effect))
    low, high = median_ratio_ci(b, n, confidence)
    ratio = float(np.median(n) / np.median(b))
    if p_worse < alpha and low > 1:
        verdict = "regressed"
    elif p_better < alpha and high < 1:
        verdict = "improved"
    elif 1 - min_effect <= low and high <= 1 + min_effect:
        verdict = "same"
    else:
        verdict = "ambiguous"
    return Decision(verdict, ratio, low, high, p_worse, p_better, min_effect, confidence,
                    len(b), len(n))


def decide_until(base: Sequence[float], now: Sequence[float], min_effect: float,
                 remeasure: Callable[[], Sequence[float]] | None = None, rounds: int = 3,
                 confidence: float = 0.99, higher_is_better: bool = False) -> Decision:
    """``decide``; while ambiguous, pool ``remeasure()``'s fresh samples of now and decide
    again, at most ``rounds`` measurements of now in all. Still ambiguous after the bound
    (or without ``remeasure``): the ``ambiguous`` decision, with its ``rounds``."""
    pooled = list(now)
    done = 1
    while True:
        d = decide(base, pooled, min_effect, confidence, higher_is_better)
        if d.verdict != "ambiguous" or remeasure is None or done >= rounds:
            return Decision(**{**d.__dict__, "rounds": done})
        pooled += list(remeasure())
        done += 1
