"""variance.sql's interval of the mean over seeds: for crossed weight x data seeds the
two-way random-effects variance of the grand mean with Satterthwaite's t, else a t
interval over seed pairs; against numpy and scipy, and its coverage measured by
simulation at 3 x 5, 8 x 8 and 24 x 20 seeds, inside (0, 1) and near its bound."""

from __future__ import annotations

import itertools
import re

import numpy as np
import pytest
from scipy import stats
from test_statistics import Study, group_config, run

SIGMA = (0.15, 0.05, 0.05)


def tables(rng, count: int, a: int, b: int, mean: float) -> list[np.ndarray]:
    sw, sd, se = SIGMA
    return [np.clip(mean + rng.normal(0, sw, (a, 1)) + rng.normal(0, sd, (1, b)) + rng.normal(0, se, (a, b)), 0, 1)
            for _ in range(count)]


def study(ys: list[np.ndarray]) -> Study:
    built = Study()
    for g, y in enumerate(ys):
        for w, d in itertools.product(*(range(n) for n in y.shape)):
            built.add(group_config("fire", w, d, g), {6: float(y[w, d])})
    return built


def intervals(ys: list[np.ndarray]) -> list[dict]:
    with study(ys).connect() as con:
        return run(con, "variance", resamples=2)


def true_mean(mean: float) -> float:
    draws = np.random.default_rng(99).normal(mean, np.sqrt(sum(s * s for s in SIGMA)), 4_000_000)
    return float(np.clip(draws, 0, 1).mean())


def test_the_crossed_interval_matches_numpy_and_scipy():
    y = tables(np.random.default_rng(1), 1, 4, 6, 0.5)[0]
    row = intervals([y])[0]
    a, b = y.shape
    m, rows, columns = y.mean(), y.mean(axis=1, keepdims=True), y.mean(axis=0, keepdims=True)
    ms_w, ms_d = b * ((rows - m) ** 2).sum() / (a - 1), a * ((columns - m) ** 2).sum() / (b - 1)
    ms_e = ((y - rows - columns + m) ** 2).sum() / ((a - 1) * (b - 1))
    top = max(ms_w + ms_d - ms_e, ms_e)
    df = (ms_w + ms_d - ms_e) ** 2 / (ms_w ** 2 / (a - 1) + ms_d ** 2 / (b - 1) + ms_e ** 2 / ((a - 1) * (b - 1)))
    half = stats.t.ppf(0.975, df) * np.sqrt(top / (a * b))
    assert row["mean_method"].startswith("crossed")
    assert (row["mean_low"], row["mean_high"]) == pytest.approx((m - half, m + half), rel=1e-9)


def test_one_varying_seed_gets_a_t_interval_over_its_trials():
    y = tables(np.random.default_rng(2), 1, 6, 1, 0.5)[0]
    row = intervals([y])[0]
    values = y[:, 0]
    half = stats.t.ppf(0.975, 5) * values.std(ddof=1) / np.sqrt(6)
    assert row["mean_method"].startswith("independent")
    assert (row["mean_low"], row["mean_high"]) == pytest.approx((values.mean() - half, values.mean() + half))


def coverage(a: int, b: int, mean: float, count: int) -> float:
    truth = true_mean(mean)
    rows = intervals(tables(np.random.default_rng(a * b + round(100 * mean)), count, a, b, mean))
    assert len(rows) == count
    return float(np.mean([r["mean_low"] <= truth <= r["mean_high"] for r in rows]))


def test_the_mean_interval_holds_its_level_at_three_by_five_seeds():
    covered = coverage(3, 5, 0.5, 1000)
    assert 0.93 <= covered <= 0.97, covered


@pytest.mark.slow
@pytest.mark.parametrize("a, b", [(8, 8), (24, 20)])
def test_the_mean_interval_holds_its_level_at_cluster_designs(a, b):
    covered = coverage(a, b, 0.5, 1000)
    assert 0.93 <= covered <= 0.97, covered


def bound_coverage(a: int, b: int) -> tuple[float, str]:
    """Coverage near the bound (m = 0.9, true mean 0.872) and what most rows print."""
    truth = true_mean(0.9)
    rows = intervals(tables(np.random.default_rng(a * b + 90), 1000, a, b, 0.9))
    printed = [r["mean_coverage"] for r in rows]
    return (float(np.mean([r["mean_low"] <= truth <= r["mean_high"] for r in rows])),
            max(set(printed), key=printed.count))


def assert_as_printed(covered: float, printed: str) -> None:
    stated = float(re.search(r"measured (\d\.\d+)", printed).group(1))
    assert abs(covered - stated) <= 0.015, (covered, printed)


def test_the_mean_interval_covers_as_printed_near_the_bound_at_three_by_five_seeds():
    assert_as_printed(*bound_coverage(3, 5))


@pytest.mark.slow
@pytest.mark.parametrize("a, b", [(8, 8), (24, 20)])
def test_the_mean_interval_covers_as_printed_near_the_bound_at_cluster_designs(a, b):
    assert_as_printed(*bound_coverage(a, b))
