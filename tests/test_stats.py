"""Trial statistics (perfreport/warehouse/stats.py) on synthetic samples with known answers."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import mannwhitneyu

from perfreport.warehouse.stats import FASTER, INSUFFICIENT, MIN_TRIALS, NO_CHANGE, SLOWER, compare, summarize


def _sample(mean: float, n: int, seed: int, noise: float = 0.01) -> list[float]:
    return list(np.random.default_rng(seed).normal(mean, mean * noise, n))


def test_summary_values_and_a_missing_value_is_not_a_zero() -> None:
    s = summarize([1.0, 2.0, None, 3.0, 4.0, 5.0, float("nan")])
    assert s is not None
    assert (s.n, s.mean, s.median, s.min) == (5, 3.0, 3.0, 1.0)
    assert s.std == pytest.approx(1.5811, abs=1e-4)
    assert s.ci_low is not None and s.ci_high is not None and 1.0 < s.ci_low < 3.0 < s.ci_high < 5.0
    assert summarize([None, float("inf")]) is None
    one = summarize([7.0])
    assert one is not None and (one.n, one.std, one.ci_low, one.ci_high) == (1, None, None, None)
    assert one.text() == "7 (n=1, no CI)"


def test_summary_is_deterministic_and_its_ci_covers_the_mean() -> None:
    xs = _sample(100.0, 9, seed=1)
    a, b = summarize(xs), summarize(list(xs))
    assert a == b and a is not None
    assert a.ci_low < np.mean(xs) < a.ci_high and a.ci_high - a.ci_low < 2.0  # 1% noise on 100, n = 9


def test_a_7_percent_step_is_faster_with_its_ratio_ci_and_p() -> None:
    before, after = _sample(100.0, 9, seed=2), _sample(93.0, 9, seed=3)
    c = compare(before, after)
    assert c.verdict == FASTER and c.ratio == pytest.approx(np.median(after) / np.median(before))
    assert 0.91 < c.ratio < 0.95 and c.ci_low is not None and c.ci_high is not None and c.ci_high < 1.0
    assert c.p_value == pytest.approx(mannwhitneyu(after, before, alternative="two-sided").pvalue)
    assert c.p_value < 0.001
    assert compare(after, before).verdict == SLOWER
    # a throughput: higher is better, so the same step read the other way is faster
    assert compare(after, before, lower_is_better=False).verdict == FASTER
    assert "x [" in c.text() and "faster (n = 9 before, 9 after)" in c.text()


def test_noise_is_no_significant_change() -> None:
    for seed in range(10):
        c = compare(_sample(100.0, 9, seed=10 + seed), _sample(100.0, 9, seed=40 + seed))
        assert c.verdict in (NO_CHANGE, FASTER, SLOWER)
    verdicts = [compare(_sample(100.0, 9, seed=10 + s), _sample(100.0, 9, seed=40 + s)).verdict for s in range(10)]
    assert verdicts.count(NO_CHANGE) >= 8  # alpha 0.05 plus the CI: at most a rare false call


def test_fewer_than_five_trials_is_insufficient_even_for_a_big_step() -> None:
    c = compare([100.0, 101.0, 99.0, 100.5], [50.0, 51.0, 49.0, 50.5])
    assert c.verdict == INSUFFICIENT and c.p_value is None and c.ratio == pytest.approx(0.5, abs=0.01)
    assert MIN_TRIALS == 5
    empty = compare([], [1.0])
    assert empty.verdict == INSUFFICIENT and empty.ratio is None
    assert empty.text() == "insufficient trials (n = 0 before, 1 after)"
