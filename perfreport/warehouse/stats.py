"""Statistics of repeated measurements: a trial summary and a two-sample comparison, the one home of both.

A trial is one repetition of a cell's measurement (docs/architecture.md, "Trials"). Summaries give n, mean, std,
median, min and a 95% bootstrap CI of the mean; a comparison gives the ratio of medians (after / before: < 1 is
faster for a time) with its 95% bootstrap CI and the two-sided Mann-Whitney U p-value, and one word for it. scipy's
bootstrap (BCa where the sample allows, percentile otherwise) and mannwhitneyu, not hand-written statistics: they
are maintained and tested. Resampling uses a fixed seed, so the same samples give the same numbers on every run.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

MIN_TRIALS = 5  # below this a comparison says "insufficient trials", whatever its p-value (Google Benchmark warns <9)
ALPHA = 0.05  # significance of the Mann-Whitney U test
CONFIDENCE = 0.95
RESAMPLES = 2000
SEED = 20261207  # fixed: deterministic intervals

FASTER, SLOWER, NO_CHANGE, INSUFFICIENT = "faster", "slower", "no significant change", "insufficient trials"


@dataclass(frozen=True)
class Summary:
    """One sample's n, mean, std (sample, ddof 1; None for n < 2), median, min and the mean's 95% bootstrap CI."""

    n: int
    mean: float
    std: float | None
    median: float
    min: float
    ci_low: float | None
    ci_high: float | None

    def text(self) -> str:
        """`mean [CI low, CI high] (n=N)`: how pages 1, 4 and the kernel pages print a repeated number."""
        if self.ci_low is None or self.ci_high is None:
            return f"{number_text(self.mean)} (n={self.n}, no CI)"
        return f"{number_text(self.mean)} [{number_text(self.ci_low)}, {number_text(self.ci_high)}] (n={self.n})"


def number_text(v: float) -> str:
    """4 significant digits, without an exponent for the sizes a throughput or a time in ns reaches."""
    return f"{v:,.0f}" if 9999.5 <= abs(v) < 1e15 else f"{v:.4g}"  # .4g would round 9999.5 up to 1e+04


@dataclass(frozen=True)
class Comparison:
    """After vs before: ratio of medians (after / before) with its CI, the U test's p-value and the verdict."""

    n_before: int
    n_after: int
    ratio: float | None
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    verdict: str
    lower_is_better: bool = True

    def text(self) -> str:
        """One line: the ratio, its CI, p and the verdict (or why there is none)."""
        if self.ratio is None:
            return f"{self.verdict} (n = {self.n_before} before, {self.n_after} after)"
        ci = "" if self.ci_low is None else f" [{self.ci_low:.3f}, {self.ci_high:.3f}]"
        p = "" if self.p_value is None else f", p = {self.p_value:.3g}"
        return (f"{self.ratio:.3f}x{ci}{p}: {self.verdict} (n = {self.n_before} before, {self.n_after} after)")


def _clean(values: Sequence[float | None]) -> list[float]:
    """The finite numbers of a sample: a missing value is not a measurement (never a zero)."""
    return [float(v) for v in values if v is not None and math.isfinite(float(v))]


def _interval(data: tuple[np.ndarray, ...], statistic: Any) -> tuple[float | None, float | None]:
    from scipy.stats import bootstrap

    if any(len(d) < 2 for d in data) or all(np.ptp(d) == 0 for d in data):
        value = float(statistic(*data))  # no spread to resample: the interval is the point
        return (value, value) if all(len(d) >= 2 for d in data) else (None, None)
    for method in ("BCa", "percentile"):  # BCa fails on some degenerate samples; percentile never does
        try:
            res = bootstrap(data, statistic, n_resamples=RESAMPLES, confidence_level=CONFIDENCE, method=method,
                            random_state=np.random.default_rng(SEED), vectorized=False)
        except (ValueError, FloatingPointError):
            continue
        low, high = float(res.confidence_interval.low), float(res.confidence_interval.high)
        if math.isfinite(low) and math.isfinite(high):
            return low, high
    return None, None


def summarize(values: Sequence[float | None]) -> Summary | None:
    """Summary of the finite values; None when there are none."""
    xs = _clean(values)
    if not xs:
        return None
    low, high = _interval((np.asarray(xs),), np.mean)
    return Summary(n=len(xs), mean=statistics.fmean(xs), std=statistics.stdev(xs) if len(xs) > 1 else None,
                   median=statistics.median(xs), min=min(xs), ci_low=low, ci_high=high)


def compare(before: Sequence[float | None], after: Sequence[float | None], lower_is_better: bool = True) -> Comparison:
    """Compare two samples of one number (durations by default: lower is better).

    `insufficient trials` when either side has fewer than MIN_TRIALS values; else `no significant change` unless
    the U test's p < ALPHA and the ratio's CI excludes 1; then `faster` or `slower` by the ratio's side of 1.
    """
    b, a = _clean(before), _clean(after)
    if not b or not a or statistics.median(b) == 0:
        return Comparison(len(b), len(a), None, None, None, None, INSUFFICIENT, lower_is_better)
    ratio = statistics.median(a) / statistics.median(b)
    low, high = _interval((np.asarray(a), np.asarray(b)), lambda x, y: np.median(x) / np.median(y))
    if len(b) < MIN_TRIALS or len(a) < MIN_TRIALS:
        return Comparison(len(b), len(a), ratio, low, high, None, INSUFFICIENT, lower_is_better)
    from scipy.stats import mannwhitneyu

    p = float(mannwhitneyu(a, b, alternative="two-sided").pvalue)
    significant = p < ALPHA and low is not None and high is not None and not (low <= 1.0 <= high)
    if not significant:
        verdict = NO_CHANGE
    else:
        better = ratio < 1.0 if lower_is_better else ratio > 1.0
        verdict = FASTER if better else SLOWER
    return Comparison(len(b), len(a), ratio, low, high, p, verdict, lower_is_better)


# Change points of a series (one metric of one kernel over a lake's publications). Binary segmentation on the mean
# (the split that best separates two means, from cumulative sums), each split kept only when a Welch t-test of its two
# segments gives p < MAX_P and the means differ by at least MIN_CHANGE: the shape of Apache Otava's E-divisive + t-test.
# Not Otava itself: apache-otava 0.8.0 pins numpy==2.2.0 exactly and scipy<1.17 and pulls 43 packages (BigQuery,
# Slack clients); not ruptures: its Pelt took 5.9 s and its Binseg 0.056 s on one 1,000-point series here, where
# 50 such series must take < 2 s (docs/benchmarks.md). This one is numpy and scipy's t-test.
MAX_P = 0.001
MIN_CHANGE = 0.02  # a 2% shift: below it 1% run-to-run noise gave false change points (Otava's own min_magnitude)
MIN_SEGMENT = 3
MIN_SERIES = 2 * MIN_SEGMENT  # fewer points: "insufficient data"


@dataclass(frozen=True)
class ChangePoint:
    """The first point of a new level: means of the segments either side, the change and its p-value."""

    index: int
    before: float
    after: float
    change_pct: float  # 100 x (after / before - 1)
    p_value: float
    points_after: int  # points in the new level up to the next change point (1: only the last one, suspicious)


def _welch(a: np.ndarray, b: np.ndarray) -> float:
    from scipy.stats import ttest_ind

    if np.ptp(a) == 0 and np.ptp(b) == 0:
        return 0.0 if a[0] != b[0] else 1.0  # no noise at all: any difference is certain
    return float(ttest_ind(a, b, equal_var=False).pvalue)


def _best_split(x: np.ndarray, min_size: int) -> int | None:
    n = len(x)
    if n < 2 * min_size:
        return None
    c = np.cumsum(x)
    k = np.arange(min_size, n - min_size + 1)
    left, right = c[k - 1] / k, (c[-1] - c[k - 1]) / (n - k)
    score = k * (n - k) / n * (left - right) ** 2  # between-segment sum of squares of the split
    return int(k[int(np.argmax(score))])


def _significant(a: np.ndarray, b: np.ndarray, max_p: float, min_change: float) -> bool:
    ma, mb = float(a.mean()), float(b.mean())
    return ma != 0 and abs(mb / ma - 1.0) >= min_change and _welch(a, b) < max_p


def change_points(values: Sequence[float], max_p: float = MAX_P, min_change: float = MIN_CHANGE,
                  min_size: int = MIN_SEGMENT) -> list[ChangePoint]:
    """Change points of the series in order; a last point off its level by min_change and by more than 4 standard
    deviations of that level is one too (points_after 1: suspicious until a second point confirms it)."""
    x = np.asarray([float(v) for v in values], dtype=float)
    splits: list[int] = []
    todo = [(0, len(x))]
    while todo:
        lo, hi = todo.pop()
        k = _best_split(x[lo:hi], min_size)
        if k is None or not _significant(x[lo:lo + k], x[lo + k:hi], max_p, min_change):
            continue
        splits.append(lo + k)
        todo += [(lo, lo + k), (lo + k, hi)]
    edges = sorted(splits)
    kept: list[int] = []
    for i, at in enumerate(edges):  # re-test each split against its neighbours' segments, as Otava's merge step does
        lo = kept[-1] if kept else 0
        hi = edges[i + 1] if i + 1 < len(edges) else len(x)
        if _significant(x[lo:at], x[at:hi], max_p, min_change):
            kept.append(at)
    last_lo = kept[-1] if kept else 0
    level = x[last_lo:-1]
    if len(level) >= min_size and len(x) - last_lo > min_size and level.mean() != 0:
        off = abs(x[-1] / level.mean() - 1.0)
        sd = float(level.std(ddof=1))
        if off >= min_change and abs(x[-1] - level.mean()) > 4 * max(sd, 1e-12):
            kept.append(len(x) - 1)
    out = []
    bounds = [0, *kept, len(x)]
    for i, at in enumerate(kept):
        a, b = x[bounds[i]:at], x[at:bounds[i + 2]]
        p = _welch(a, b) if len(b) > 1 else float("nan")
        out.append(ChangePoint(at, float(a.mean()), float(b.mean()), 100.0 * (float(b.mean()) / float(a.mean()) - 1),
                               p, len(b)))
    return out
