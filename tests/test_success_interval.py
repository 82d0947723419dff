"""success.sql's interval of the success probability over seeds: Wilson's interval at the
effective number of seed pairs of a crossed grid, against numpy and scipy, and its
coverage of P(accuracy >= 0.9) measured by simulation at 3 x 5, 8 x 8 and 24 x 20 seeds,
at a success probability near 0 (0.008) and at 0.5 with accuracies clipped at 1, as
often as the coverage printed beside it says."""

from __future__ import annotations

import re

import numpy as np
import pytest
from analysis_rows import run
from scipy import stats
from test_mean_interval import SIGMA, study, tables

from analysis.mean_interval import crossed_variance_df

THRESHOLD = 0.9


def success_rows(ys: list[np.ndarray]) -> list[dict]:
    with study(ys).connect() as con:
        return run(con, "success")


def wilson(p: float, n: float, z: float) -> tuple[float, float]:
    centre, half = (p + z * z / (2 * n)) / (1 + z * z / n), z / (1 + z * z / n) * np.sqrt(
        p * (1 - p) / n + z * z / (4 * n * n))
    return max(centre - half, 0.0), min(centre + half, 1.0)


def crossed_variance(y: np.ndarray) -> tuple[float, float]:
    a, b = y.shape
    m, rows, columns = y.mean(), y.mean(axis=1, keepdims=True), y.mean(axis=0, keepdims=True)
    ms_w, ms_d = b * ((rows - m) ** 2).sum() / (a - 1), a * ((columns - m) ** 2).sum() / (b - 1)
    ms_e = ((y - rows - columns + m) ** 2).sum() / ((a - 1) * (b - 1))
    variance, df = crossed_variance_df(ms_w, ms_d, ms_e, a, b)
    return float(variance), float(df)


def test_the_effective_n_interval_matches_numpy_and_scipy():
    y = tables(np.random.default_rng(4), 1, 6, 5, 0.85)[0]
    row = success_rows([y])[0]
    s = (y >= THRESHOLD).astype(float)
    p, z = s.mean(), stats.norm.ppf(0.975)
    assert 0 < p < 1
    variance, df = crossed_variance(s)
    n = min(p * (1 - p) / variance, y.size) * (z / stats.t.ppf(0.975, df)) ** 2
    assert row["p_success_method"].startswith("crossed seeds (Wilson")
    assert row["p_success_n_effective"] == pytest.approx(n, rel=1e-9)
    assert (row["p_success_low"], row["p_success_high"]) == pytest.approx(wilson(p, n, z), rel=1e-9)


def test_when_no_seed_pair_succeeds_the_accuracies_give_the_design_effect():
    y = tables(np.random.default_rng(5), 1, 4, 4, 0.3)[0]
    row = success_rows([y])[0]
    assert row["n_success"] == 0 and row["p_success_low"] == 0
    variance, df = crossed_variance(y)
    z = stats.norm.ppf(0.975)
    n = y.size / max(variance / (y.var(ddof=1) / y.size), 1) * (z / stats.t.ppf(0.975, df)) ** 2
    assert row["p_success_n_effective"] == pytest.approx(n, rel=1e-9)
    assert row["p_success_high"] == pytest.approx(wilson(0.0, n, z)[1], rel=1e-9)
    assert row["seeds_for_a_success"] is None


def test_one_varying_seed_keeps_wilsons_interval_over_its_trials():
    y = tables(np.random.default_rng(6), 1, 8, 1, 0.85)[0]
    row = success_rows([y])[0]
    assert row["p_success_method"].startswith("independent")
    assert (row["p_success_low"], row["p_success_high"]) == pytest.approx(
        (row["p_success_wilson_low"], row["p_success_wilson_high"]), abs=1e-12)


def coverage(a: int, b: int, mean: float, count: int) -> tuple[float, str]:
    truth = 1 - stats.norm.cdf((THRESHOLD - mean) / np.sqrt(sum(s * s for s in SIGMA)))
    rows = success_rows(tables(np.random.default_rng(11 * a * b + round(10 * mean)), count, a, b, mean))
    assert len(rows) == count
    printed = [r["p_success_coverage"] for r in rows]
    return float(np.mean([r["p_success_low"] <= truth <= r["p_success_high"] for r in rows])), max(
        set(printed), key=printed.count)


def assert_as_printed(covered: float, printed: str) -> None:
    low, high = map(float, re.search(r"measured (\d\.\d+)-(\d\.\d+)", printed).groups())
    assert low - 0.015 <= covered <= high + 0.015, (covered, printed)


@pytest.mark.parametrize("mean", [0.5, 0.9])
def test_the_success_interval_covers_as_printed_at_three_by_five_seeds(mean):
    covered, printed = coverage(3, 5, mean, 1000)
    assert_as_printed(covered, printed)


@pytest.mark.slow
@pytest.mark.parametrize("a, b", [(8, 8), (24, 20)])
@pytest.mark.parametrize("mean", [0.5, 0.9])
def test_the_success_interval_covers_as_printed_at_cluster_designs(a, b, mean):
    covered, printed = coverage(a, b, mean, 1000)
    assert_as_printed(covered, printed)
