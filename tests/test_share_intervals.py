"""lucky_tickets.sql's intervals of the variance shares: generalized confidence intervals
(analysis/share_intervals.py) equal to numpy's on numpy's mean squares, reproducible,
and covering the true shares at 3 x 5, 8 x 8 and 24 x 20 seeds, inside (0, 1) and at the
bound 1, as often as the coverage printed beside them says. The truth of a clipped
model y = clip(m + u_w + v_d + e, 0, 1) is its two-way ANOVA decomposition: σ²_weight =
Var E[y | u], σ²_data = Var E[y | v], the rest residual, by Gauss-Hermite quadrature."""

from __future__ import annotations

import re

import numpy as np
import pytest
from analysis_rows import run
from test_mean_interval import SIGMA, study, tables
from test_statistics import components

from analysis.share_intervals import share_bounds

PARTS = ("weight", "data", "residual")


def true_components(mean: float) -> dict[str, float]:
    """σ²_weight = Var E[y | u], σ²_data = Var E[y | v], the rest residual."""
    nodes, weights = np.polynomial.hermite_e.hermegauss(60)
    weights = weights / weights.sum()
    u, v, e = (nodes * s for s in SIGMA)
    y = np.clip(mean + u[:, None, None] + v[None, :, None] + e[None, None, :], 0, 1)
    w3 = weights[:, None, None] * weights[None, :, None] * weights[None, None, :]
    m = (y * w3).sum()
    total = ((y - m) ** 2 * w3).sum()
    by_weight = (y * weights[None, :, None] * weights[None, None, :]).sum(axis=(1, 2))
    by_data = (y * weights[:, None, None] * weights[None, None, :]).sum(axis=(0, 2))
    weight = ((by_weight - m) ** 2 * weights).sum()
    data = ((by_data - m) ** 2 * weights).sum()
    return {"weight": weight, "data": data, "residual": total - weight - data}


def true_shares(mean: float) -> dict[str, float]:
    truth = true_components(mean)
    return {part: value / sum(truth.values()) for part, value in truth.items()}


def lucky_rows(ys: list[np.ndarray]) -> list[dict]:
    with study(ys).connect() as con:
        return [r for r in run(con, "lucky_tickets", resamples=2) if r["weight_seed"] is not None]


def test_share_intervals_equal_numpy_on_numpys_mean_squares():
    y = tables(np.random.default_rng(3), 1, 4, 6, 0.5)[0]
    row = lucky_rows([y])[0]
    expected = components(y)
    bounds = share_bounds([expected["ms_weight"]], [expected["ms_data"]], [expected["ms_residual"]], 4, 6)[0]
    for k, part in enumerate(PARTS):
        assert (row[f"component_share_{part}_low"], row[f"component_share_{part}_high"]) == pytest.approx(
            (bounds[2 * k], bounds[2 * k + 1]), abs=1e-12)
        assert row[f"component_share_{part}_low"] <= row[f"component_share_{part}"] <= row[
            f"component_share_{part}_high"]
    assert row["share_coverage"] == "measured 0.95-0.97 at 3 x 5 seeds"


def test_the_draws_are_fixed_and_a_constant_grid_has_no_interval():
    once = share_bounds([0.07, 0.01], [0.012, 0.0], [0.0025, 0.0], 3, 5)
    again = share_bounds([0.07, 0.01], [0.012, 0.0], [0.0025, 0.0], 3, 5)
    assert np.array_equal(once, again, equal_nan=True)
    assert np.isfinite(once[0]).all() and np.isnan(share_bounds([0.0], [0.0], [0.0], 3, 5)).all()


def covered(rows: list[dict], truth: dict[str, float], column: str) -> dict[str, float]:
    """Per part, the share of studies whose interval of ``column`` (its {part} filled in)
    holds the truth; a study whose accuracies are all equal (all clipped at 1) has no
    interval: a miss."""
    return {part: float(np.mean([
        r[f"{column.format(part=part)}_low"] is not None
        and r[f"{column.format(part=part)}_low"] <= truth[part] <= r[f"{column.format(part=part)}_high"]
        for r in rows])) for part in PARTS}


def most_printed(rows: list[dict], column: str) -> str:
    printed = [r[column] for r in rows]
    return max(set(printed), key=printed.count)


def coverage(a: int, b: int, mean: float, count: int) -> tuple[dict[str, float], str]:
    """The shares' coverage and what most rows print; near the bound (mean 0.9) the same
    studies also check the components' intervals against what they print (their
    coverage inside (0, 1): tests/test_component_intervals.py)."""
    rows = list({r["group_id"]: r for r in lucky_rows(
        tables(np.random.default_rng(7 * a * b + round(10 * mean)), count, a, b, mean))}.values())
    assert len(rows) == count
    if mean == 0.9:
        assert_as_printed(covered(rows, true_components(mean), "sigma2_{part}"), most_printed(rows, "component_coverage"))
    return covered(rows, true_shares(mean), "component_share_{part}"), most_printed(rows, "share_coverage")


def assert_as_printed(covered: dict[str, float], printed: str) -> None:
    """Every part's coverage lies in the range printed beside the interval, give or take
    the Monte Carlo error of 1,000 studies (± 0.014); where a residual's coverage is
    printed on its own ("0.76-0.79 for sigma2_residual"), the residual's is that range."""
    ranges = {part: re.search(r"measured (\d\.\d+)-(\d\.\d+)", printed).groups() for part in covered}
    residual = re.search(r"(\d\.\d+)-(\d\.\d+) for sigma2_residual", printed)
    if residual:
        ranges["residual"] = residual.groups()
    for part, value in covered.items():
        low, high = map(float, ranges[part])
        assert low - 0.015 <= value <= high + 0.015, (part, covered, printed)


@pytest.mark.parametrize("mean", [0.5, 0.9])
def test_share_intervals_cover_as_printed_at_three_by_five_seeds(mean):
    covered, printed = coverage(3, 5, mean, 1000)
    assert_as_printed(covered, printed)
    if mean == 0.5:
        assert all(0.93 <= value <= 0.97 for value in covered.values()), covered


@pytest.mark.slow
@pytest.mark.parametrize("a, b", [(8, 8), (24, 20)])
@pytest.mark.parametrize("mean", [0.5, 0.9])
def test_share_intervals_cover_as_printed_at_cluster_designs(a, b, mean):
    covered, printed = coverage(a, b, mean, 1000)
    assert_as_printed(covered, printed)
    if mean == 0.5:
        assert all(0.93 <= value <= 0.97 for value in covered.values()), covered
