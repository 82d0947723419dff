"""variance.sql's interval of the mean over seeds: the SQL equals analysis/mean_interval.py
(crossed seeds, a component at 0 dropped; Wilson at the effective n), the quickstart's
4 x 2 grid that Satterthwaite's t put at [0, 1] is pinned, no interval spans [0, 1]
over trials that agree within 0.75, and the coverage is measured by simulation
(tests/mean_coverage.py) at the designs users run."""

from __future__ import annotations

import re

import numpy as np
import pytest
from analysis_rows import run
from mean_coverage import Cell, cells, measure
from memory_study import Study, group_config
from scipy import stats

from analysis.mean_interval import crossed_variance_df, grid_bounds, grid_mean_squares

#: the quickstart's windowed NoPE group at 8 digits (4 weight seeds x 2 data orders)
QUICKSTART = np.array([[0.885, 0.920], [0.345, 0.790], [0.805, 0.755], [0.920, 0.715]])


#: the clipped normal model of the share and success tests: y = clip(m + u_w + v_d + e, 0, 1)
SIGMA = (0.15, 0.05, 0.05)


def tables(rng, count: int, a: int, b: int, mean: float) -> list[np.ndarray]:
    sw, sd, se = SIGMA
    return [np.clip(mean + rng.normal(0, sw, (a, 1)) + rng.normal(0, sd, (1, b)) + rng.normal(0, se, (a, b)), 0, 1)
            for _ in range(count)]


def study(ys: list[np.ndarray]) -> Study:
    built = Study()
    for g, y in enumerate(ys):
        built.add_grid(group_config("fire", 0, 0, g), y)
    return built


def intervals(ys: list[np.ndarray]) -> list[dict]:
    """variance.sql's rows, one per grid, in the order of the grids."""
    with study(ys).connect() as con:
        rows = run(con, "variance", resamples=2)
    if len(rows) == 1:  # a lone group's label names no steps
        return rows
    by_steps = {r["group_label"]: r for r in rows}
    return [by_steps[label] for label in sorted(by_steps, key=lambda s: int(re.search(r"steps=(\d+)", s).group(1)))]


def boundary_grids() -> list[np.ndarray]:
    """Grids on every side of the boundaries: both components positive, the data's or the
    weight's at 0, neither positive, and the larger mean square on either seed kind."""
    rng = np.random.default_rng(7)
    grids = [QUICKSTART]
    for a, b in ((4, 6), (6, 4), (3, 5), (2, 2), (8, 3)):
        for sw, sd in ((0.2, 0.1), (0.1, 0.25), (0.0, 0.15), (0.15, 0.0), (0.0, 0.0), (0.0, 0.0)):
            grids.append(np.clip(0.5 + rng.normal(0, sw, (a, 1)) + rng.normal(0, sd, (1, b))
                                 + rng.normal(0, 0.05, (a, b)), 0, 1))
    return grids


def test_the_sql_interval_is_numpys_on_every_side_of_the_boundaries():
    grids = boundary_grids()
    regions = set()
    for y, row in zip(grids, intervals(grids)):
        _, ms_w, ms_d, ms_e = grid_mean_squares(y[None])
        regions.add((bool(ms_w[0] > ms_e[0]), bool(ms_d[0] > ms_e[0]), bool(ms_w[0] >= ms_d[0])))
        low, high = grid_bounds(y[None])
        assert row["mean_method"].startswith("crossed")
        assert row["mean_df"] == pytest.approx(crossed_variance_df(ms_w, ms_d, ms_e, *y.shape)[1][0], rel=1e-9)
        assert (row["mean_low"], row["mean_high"]) == pytest.approx((low[0], high[0]), rel=1e-9)
    assert len(regions) >= 5, regions


def test_the_quickstarts_four_by_two_grid_gets_an_interval_that_says_something():
    low, high = grid_bounds(QUICKSTART[None])
    assert (low[0], high[0]) == pytest.approx((0.498823, 0.915769), abs=1e-6)
    assert 0.3 < low[0] and high[0] < 1
    alone = intervals([QUICKSTART])[0]
    assert (alone["mean_low"], alone["mean_high"]) == pytest.approx((low[0], high[0]), rel=1e-9)
    assert alone["mean_df"] == pytest.approx(3)


def test_the_quickstarts_grid_keeps_its_interval_inside_a_crossed_study():
    rng = np.random.default_rng(3)
    others = [np.clip(0.6 + rng.normal(0, 0.1, (4, 1)) + rng.normal(0, 0.05, (4, 2)), 0, 1) for _ in range(2)]
    rows = intervals([others[0], QUICKSTART, others[1]])
    low, high = grid_bounds(QUICKSTART[None])
    assert (rows[1]["mean_low"], rows[1]["mean_high"]) == pytest.approx((low[0], high[0]), rel=1e-9)


def test_one_varying_seed_gets_wilson_at_its_effective_n():
    y = np.clip(0.5 + np.random.default_rng(2).normal(0, 0.15, (6, 1)), 0, 1)
    row = intervals([y])[0]
    values = y[:, 0]
    m, n = values.mean(), values.mean() * (1 - values.mean()) / (values.var(ddof=1) / 6)
    t = stats.t.ppf(0.975, 5)
    centre, half = (m + t * t / (2 * n)) / (1 + t * t / n), t / (1 + t * t / n) * np.sqrt(m * (1 - m) / n + t * t / (4 * n * n))
    assert row["mean_method"].startswith("independent")
    assert (row["mean_low"], row["mean_high"]) == pytest.approx((centre - half, centre + half))


def test_seeds_that_all_tie_get_wilsons_interval_over_the_seeds():
    """Every seed at 0 (or 1, or any one value) shows no spread to estimate a variance
    from: the interval is Wilson's over the n seed pairs with z, the largest variance a
    mean of n values in [0, 1] can have, in SQL as in numpy, crossed or not."""
    z = stats.norm.ppf(0.975)
    grids = [np.zeros((2, 2)), np.ones((4, 2)), np.full((3, 5), 0.5), np.zeros((2, 1)), np.ones((8, 1))]
    for y, row in zip(grids, intervals(grids)):
        n, m = y.size, float(y.mean())
        centre, half = (m + z * z / (2 * n)) / (1 + z * z / n), z / (1 + z * z / n) * np.sqrt(m * (1 - m) / n + z * z / (4 * n * n))
        assert row["mean_method"] == "every seed pair ties (Wilson over the seed pairs)"
        assert (row["mean_low"], row["mean_high"]) == pytest.approx((max(centre - half, 0), min(centre + half, 1)))
        if y.shape[1] > 1:
            low, high = grid_bounds(y[None])
            assert (row["mean_low"], row["mean_high"]) == pytest.approx((low[0], high[0]), rel=1e-9)
    zero = intervals([np.zeros((2, 1))])[0]
    assert (zero["mean_low"], zero["mean_high"]) == pytest.approx((0, z * z / (2 + z * z)))  # 0.658


def test_nearly_perfect_seeds_are_covered_where_ties_are_common():
    """Seeds whose accuracy is 0.9995 (0.0005) answer all 200 questions right (wrong) most
    of the time: [m, m] on tied seeds covered 0.31-0.74 at 2 x 2 to 3 x 5 seeds."""
    for a, b, mean in ((2, 2, 0.9995), (4, 2, 0.9995), (3, 5, 0.9995), (2, 2, 0.0005), (4, 2, 0.002)):
        assert measure(Cell(a, b, mean, False)).coverage >= 0.95, (a, b, mean)


def test_no_interval_spans_zero_to_one_over_trials_that_agree_within_three_quarters():
    rng = np.random.default_rng(11)
    for a, b in ((2, 2), (4, 2), (2, 4), (3, 5), (8, 8)):
        y = np.clip(rng.uniform(0, 1, (4000, 1, 1)) + rng.normal(0, rng.uniform(0, 0.4, (4000, 1, 1)), (4000, a, b)), 0, 1)
        low, high = grid_bounds(y)
        spans = y.max(axis=(1, 2)) - y.min(axis=(1, 2))
        assert not np.any((low <= 0) & (high >= 1) & (spans < 0.75)), (a, b)


def test_the_mean_interval_holds_its_level_at_three_by_five_seeds():
    for mean in (0.05, 0.5, 0.95):
        assert measure(Cell(3, 5, mean, True)).coverage >= 0.93


#: the cells below 0.93, the skew of seed effects near a bound at 8 x 8 seeds
#: (docs/analysis.md): their coverage is printed as measured
SHORT = {(8, 8, 0.05, True), (8, 8, 0.95, True)}
#: the cells whose median width is over 1.25x the wider reference, and why (docs/analysis.md):
#: near a bound with 2 seeds of one kind (1 degree of freedom) or 2 data seeds
WIDE = {(2, 2), (4, 2), (2, 4)}


@pytest.mark.slow
def test_the_mean_interval_covers_every_design_users_run():
    for cell in cells():
        result = measure(cell)
        key = (cell.a, cell.b, cell.mean, cell.data_effect)
        assert result.coverage >= (0.915 if key in SHORT else 0.93), (key, result)
        assert result.ratio <= 1.25 or (cell.a, cell.b) in WIDE and cell.mean != 0.5, (key, result)
        assert result.full_range == 0, (key, result)


def printed_coverage(cell: Cell) -> str:
    y = cell.grids(1)[0]
    return intervals([y])[0]["mean_coverage"]


@pytest.mark.parametrize("cell", [Cell(3, 5, 0.95, True), Cell(8, 8, 0.05, True), Cell(24, 20, 0.5, True),
                                  Cell(4, 2, 0.5, False)], ids=str)
def test_each_row_prints_the_coverage_measured_at_its_design(cell):
    printed = printed_coverage(cell)
    low, high = (float(x) for x in re.search(r"measured (\d\.\d+)-(\d\.\d+)", printed).groups())
    assert low - 0.01 <= measure(cell).coverage <= high + 0.01, (printed, cell)
