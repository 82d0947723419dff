"""Issue 14: the estimates of lucky_tickets.sql (variance components and their
two-factor bootstrap), variance.sql (bootstrap of the mean), final_accuracy.sql
(Wilson) and success.sql, each against an independent numpy or Python
computation on synthetic studies with known answers.

The studies live in an in-memory DuckDB (tests/memory_study.py)."""

from __future__ import annotations

import itertools
import math
from statistics import NormalDist

import numpy as np
import pytest
from analysis_rows import run
from memory_study import Study, crossed_study, group_config, normal_tables

from analysis.query import (
    QueryError,
)

# --- variance components ------------------------------------------------------------------


def components(y: np.ndarray) -> dict[str, float]:
    """Two-way layout without replication, rows = weight seeds, columns = data seeds:
    fixed-effects shares and method-of-moments components (truncated at 0)."""
    a, b = y.shape
    m = y.mean()
    rows, columns = y.mean(axis=1, keepdims=True), y.mean(axis=0, keepdims=True)
    ss = {"weight": b * ((rows - m) ** 2).sum(), "data": a * ((columns - m) ** 2).sum(),
          "residual": ((y - rows - columns + m) ** 2).sum()}
    total = ((y - m) ** 2).sum()
    ms = {"weight": ss["weight"] / (a - 1), "data": ss["data"] / (b - 1),
          "residual": ss["residual"] / ((a - 1) * (b - 1))}
    raw = {"weight": (ms["weight"] - ms["residual"]) / b,
           "data": (ms["data"] - ms["residual"]) / a, "residual": ms["residual"]}
    sigma2 = {k: max(v, 0.0) for k, v in raw.items()}
    out = {"grand_mean": m, "ss_total": total, "sigma2_weight_truncated": raw["weight"] < 0,
           "sigma2_data_truncated": raw["data"] < 0}
    for part in ("weight", "data", "residual"):
        out[f"ss_{part}"] = ss[part]
        out[f"ss_share_{part}"] = ss[part] / total
        out[f"ms_{part}"] = ms[part]
        out[f"sigma2_{part}"] = sigma2[part]
        out[f"component_share_{part}"] = sigma2[part] / sum(sigma2.values())
    return out


def assert_matches(row: dict, expected: dict[str, float], tol: float = 1e-9) -> None:
    for key, value in expected.items():
        if isinstance(value, (bool, np.bool_)):
            assert row[key] == value, key
        else:
            assert row[key] == pytest.approx(value, abs=tol), key


def test_a_grid_added_at_once_gives_the_rows_of_its_cells_added_one_by_one() -> None:
    y = np.random.default_rng(5).uniform(0, 1, (3, 4))
    by_cell, at_once = Study(), Study()
    for w, d in itertools.product(range(3), range(4)):
        by_cell.add(group_config("fire", w, d, 2), {6: float(y[w, d]), 8: float(y[w, d])})
    at_once.add_grid(group_config("fire", 0, 0, 2), y, (6, 8))
    assert (at_once.trials, at_once.evals, at_once.group_keys) == (by_cell.trials, by_cell.evals, by_cell.group_keys)


def test_variance_components_match_numpy() -> None:
    """6 weight x 9 data seeds from a normal model, at two lengths and their mean: every
    sum of squares, mean square, component and share to 1e-9. a != b, so swapping them
    in a formula shows. A second table has equal data-seed means (SS_data = 0 <
    MS_residual): its data component is truncated at 0, and says so."""
    rng = np.random.default_rng(14)
    y6, y8 = normal_tables(rng, 2, 6, 9, (0.01, 0.004, 0.006))
    flat = normal_tables(rng, 1, 4, 5, (0.02, 0.0, 0.01))[0]
    flat = flat - flat.mean(axis=0, keepdims=True) + flat.mean()
    study = Study()
    for w, d in itertools.product(range(6), range(9)):
        study.add(group_config("fire", w, d), {6: float(y6[w, d]), 8: float(y8[w, d])})
    for w, d in itertools.product(range(4), range(5)):
        study.add(group_config("rope", w, d), {6: float(flat[w, d])})
    rows = run(study.connect(), "lucky_tickets", resamples=50)
    fire = [r for r in rows if "/fire/" in r["group_label"]]
    assert [r["weight_seed"] for r in fire] == list(range(6))
    expected = components((y6 + y8) / 2)
    assert not expected["sigma2_weight_truncated"] and not expected["sigma2_data_truncated"]
    for row in fire:
        assert (row["n_weight_seeds"], row["n_data_seeds"]) == (6, 9)
        assert_matches(row, expected)
    by_length = {entry["digits"]: entry for entry in fire[0]["by_length"]}
    for digits, y in ((6, y6), (8, y8)):
        assert_matches(by_length[digits], components(y))
    (rope,) = {r["group_id"]: r for r in rows if "/rope/" in r["group_label"]}.values()
    truncated = components(flat)
    assert truncated["sigma2_data_truncated"] and truncated["sigma2_data"] == 0
    assert_matches(rope, truncated)


def test_components_of_an_incomplete_crossing_use_its_largest_complete_subgrid() -> None:
    """3 x 4 seeds whose trial w1 d2 failed: the components are those of the 3 x 3
    table without data seed 2 (9 cells, more than the 2 x 4 without weight seed 1), the
    left-out seed and the missing cell are named; a 2 x 2 group missing a cell is
    listed with its reason and no components."""
    rng = np.random.default_rng(4)
    y = normal_tables(rng, 1, 3, 4, (0.01, 0.01, 0.01))[0]
    study = Study()
    for w, d in itertools.product(range(3), range(4)):
        if (w, d) == (1, 2):
            study.add(group_config("fire", w, d), {}, status="failed")
        else:
            study.add(group_config("fire", w, d), {6: float(y[w, d])})
    for w, d in ((0, 0), (0, 1), (1, 0)):
        study.add(group_config("rope", w, d), {6: 0.5})
    study.add(group_config("rope", 1, 1), {}, status="running")
    rows = run(study.connect(), "lucky_tickets", resamples=50)
    fire = [r for r in rows if "/fire/" in r["group_label"]]
    assert [r["weight_seed"] for r in fire] == [0, 1, 2]
    assert fire[0]["missing_cells"] == ["w1 d2: failed"]
    assert fire[0]["left_out_seeds"] == ["data seed 2"]
    assert_matches(fire[0], components(np.delete(y, 2, axis=1)))
    (rope,) = [r for r in rows if "/rope/" in r["group_label"]]
    assert rope["skipped_reason"] == "no complete 2 x 2 subgrid of measured trials"
    assert rope["missing_cells"] == ["w1 d1: not finished"]
    assert rope["sigma2_weight"] is None and rope["component_share_weight_boot_low"] is None


def two_factor_bootstrap(y: np.ndarray, replicates: int, rng) -> dict[str, np.ndarray]:
    """numpy's two-factor (pigeonhole) bootstrap: rows and columns drawn with
    replacement, the same formulas as components() over a stack of tables."""
    a, b = y.shape
    rows, columns = rng.integers(0, a, (replicates, a)), rng.integers(0, b, (replicates, b))
    t = y[rows[:, :, None], columns[:, None, :]]  # (replicates, a, b)
    m = t.mean(axis=(1, 2), keepdims=True)
    row_means, column_means = t.mean(axis=2, keepdims=True), t.mean(axis=1, keepdims=True)
    total = ((t - m) ** 2).sum(axis=(1, 2))
    ss_w = b * ((row_means - m) ** 2).sum(axis=(1, 2))
    ss_d = a * ((column_means - m) ** 2).sum(axis=(1, 2))
    ms_r = ((t - row_means - column_means + m) ** 2).sum(axis=(1, 2)) / ((a - 1) * (b - 1))
    s_w = np.maximum((ss_w / (a - 1) - ms_r) / b, 0)
    s_d = np.maximum((ss_d / (b - 1) - ms_r) / a, 0)
    varies = total > 1e-20
    return {"component_share_weight": (s_w / (s_w + s_d + ms_r))[varies],
            "sigma2_weight": s_w, "ss_share_data": (ss_d / np.where(varies, total, 1))[varies]}


def test_bootstrap_resamples_both_seeds_as_numpy_does() -> None:
    """5 x 7 seeds: the SQL's percentile points (20,000 replicates) against numpy's
    two-factor bootstrap (40,000), within Monte Carlo error. Resampling the weight
    seeds alone would move the weight share's upper end from 0.76 to 0.53 and the data
    SS share's lower end from 0.15 to 0.37, far outside the tolerance."""
    rng = np.random.default_rng(11)
    y = normal_tables(rng, 1, 5, 7, (0.01, 0.0049, 0.0025))[0]
    (row, *_) = run(crossed_study([y]).connect(), "lucky_tickets", resamples=20_000)
    numpy_boot = two_factor_bootstrap(y, 40_000, np.random.default_rng(0))
    for key, values in numpy_boot.items():
        low, high = np.quantile(values, [0.025, 0.975])
        scale = 0.02 if "share" in key else 0.0004
        assert row[f"{key}_boot_low"] == pytest.approx(low, abs=scale), key
        assert row[f"{key}_boot_high"] == pytest.approx(high, abs=scale), key
    assert (row["resamples"], row["boot_seed"], row["level"]) == (20_000, 0, 0.95)


def test_bootstrap_is_reproducible_and_its_seed_is_a_parameter() -> None:
    """The same parameters give the same intervals to the last bit; another boot_seed
    other draws on both sides: a table that varies with the weight seed alone has
    intervals that only the weight draws move, one that varies with the data seed alone
    only the data draws."""
    rng = np.random.default_rng(3)
    tables = [normal_tables(rng, 1, 4, 4, (0.01, 0.01, 0.01))[0],
              np.repeat(rng.uniform(0, 1, (5, 1)), 3, axis=1),
              np.repeat(rng.uniform(0, 1, (1, 5)), 3, axis=0)]
    con = crossed_study(tables).connect()

    def firsts(**params) -> list[dict]:
        rows = run(con, "lucky_tickets", resamples=200, **params)
        return sorted({r["group_id"]: r for r in rows}.values(), key=lambda r: r["group_label"])

    first, again, other = firsts(), firsts(), firsts(boot_seed=7)
    keys = [k for k in first[0] if "_boot_" in k]
    assert len(keys) == 18
    for mine, same, moved in zip(first, again, other):
        assert [mine[k] for k in keys] == [same[k] for k in keys]
        assert [mine[k] for k in keys] != [moved[k] for k in keys]
    assert (other[0]["resamples"], other[0]["boot_seed"]) == (200, 7)
    first = first[0]
    narrow = run(con, "lucky_tickets", resamples=200, level=0.5)[0]
    assert narrow["level"] == 0.5
    assert (first["sigma2_weight_boot_high"] - first["sigma2_weight_boot_low"]
            > narrow["sigma2_weight_boot_high"] - narrow["sigma2_weight_boot_low"])


def test_bootstrap_draws_each_seed_independently() -> None:
    """2 x 2 seeds: a replicate's table is constant (no shares) exactly when both weight
    draws and both data draws repeat one seed, with chance 1/2 · 1/2; 1000 replicates
    give 250 ± 14 of them. Draws that always repeat (DuckDB's multi-argument hash of
    2 draws did) would give 1000, or 500 with one side broken."""
    (row, *_) = run(crossed_study([np.array([[0.1, 0.4], [0.8, 0.3]])]).connect(),
                    "lucky_tickets")
    assert 200 <= row["boot_undefined"] <= 300, row["boot_undefined"]


SIGMA2 = (0.005, 0.0025, 0.0025)  # weight, data, residual: the true weight share is 1/2


def test_bootstrap_interval_of_the_weight_share_covers_the_truth() -> None:
    """200 simulated studies of 8 x 8 seeds (y = 0.5 + u_w + v_d + e_wd, sd 0.1 in all,
    so no value comes near 0 or 1 and nothing is clipped): the 90 % bootstrap interval
    of the weight seed's component share covers the true share 1/2 in 80 to 97 % of
    them (numpy's own pigeonhole bootstrap covers it in 91 %). Every interval of a share
    lies in [0, 1], of a component in [0, inf)."""
    rng = np.random.default_rng(2024)
    tables = normal_tables(rng, 200, 8, 8, SIGMA2)
    assert all(0 < y.min() and y.max() < 1 for y in tables)
    rows = run(crossed_study(tables).connect(), "lucky_tickets", resamples=400, level=0.9)
    groups = list({r["group_id"]: r for r in rows}.values())
    assert len(groups) == 200
    truth = SIGMA2[0] / sum(SIGMA2)
    covered = [r["component_share_weight_boot_low"] <= truth <= r["component_share_weight_boot_high"]
               for r in groups]
    assert 0.80 <= np.mean(covered) <= 0.97, np.mean(covered)
    for row in groups:
        for key, value in row.items():
            if "_boot_" in key:
                assert value is not None and value >= 0, key
                assert "share" not in key or value <= 1, key
            if key.endswith("_boot_low"):
                assert value <= row[key.replace("_low", "_high")], key


# --- intervals of the mean and of one trial -----------------------------------------------


EXTREMES = {
    "quickstart pair": [0.105, 1.0],  # the t interval gave -5.13 to 6.24
    "works or fails": [0.0, 1.0, 1.0, 0.0, 1.0],
    "all right": [1.0, 1.0, 1.0],
    "all wrong": [0.0, 0.0, 0.0, 0.0],
    "near the ends": [1 - 1e-15, 1.0, 1e-15, 0.0, 0.999],
}


@pytest.mark.parametrize("values", EXTREMES.values(), ids=EXTREMES.keys())
def test_no_interval_leaves_the_unit_interval(values: list[float]) -> None:
    """Each file's intervals for a group of trials with extreme accuracies: the mean's
    bootstrap, one trial's Wilson (k = 0 and k = n included), the success rate's
    Wilson and the variance shares in [0, 1]; the comparisons' differences in [-1, 1]."""
    study = Study()
    for w, acc in enumerate(values):
        for pe, value in (("fire", acc), ("rope", 1 - acc)):
            study.add(group_config(pe, w, w % 2), {6: value, 8: value / 2},
                      correct={6: round(100 * value), 8: round(50 * value)})
    con = study.connect()
    inside = []
    for r in run(con, "variance"):
        if r["n_trials"] >= 2:
            inside += [r["mean_boot_low"], r["mean_boot_high"]]
            assert r["min"] - 1e-12 <= r["mean_boot_low"] <= r["mean_boot_high"] <= r["max"] + 1e-12
    for r in run(con, "final_accuracy"):
        inside += [r["wilson_low"], r["wilson_high"]]
        assert r["wilson_low"] <= r["correct"] / r["n"] <= r["wilson_high"]
    for r in run(con, "success"):
        inside += [r["p_success_wilson_low"], r["p_success_wilson_high"]]
    for r in run(con, "lucky_tickets"):
        inside += [v for k, v in r.items() if "share" in k and v is not None]
    assert inside and all(0 <= v <= 1 for v in inside)
    differences = [v for r in run(con, "compare") for k, v in r.items()
                   if k.startswith(("accuracy_diff", "success_diff")) and v is not None]
    assert differences and all(-1 <= v <= 1 for v in differences)


def test_mean_bootstrap_matches_numpy_and_draws_independently() -> None:
    """12 trials: the percentile points against numpy's (Monte Carlo error about 0.005
    at 20,000 replicates). Two trials: half the replicates mix both trials, so the
    middle 20 % of the replicate means is their midpoint alone; draws that repeat one
    trial (DuckDB's multi-argument hash gave those) would make it an end."""
    rng = np.random.default_rng(5)
    acc = rng.uniform(0, 1, 12)
    study = Study()
    for w, value in enumerate(acc):
        study.add(group_config("fire", w, 0), {6: float(value)})
    study.add(group_config("rope", 0, 0), {6: 0.105})
    study.add(group_config("rope", 1, 0), {6: 1.0})
    con = study.connect()
    rows = {r["group_label"].split("/")[1]: r for r in run(con, "variance", resamples=20_000)}
    means = acc[np.random.default_rng(0).integers(0, 12, size=(100_000, 12))].mean(axis=1)
    low, high = np.quantile(means, [0.025, 0.975])
    assert rows["fire"]["mean_boot_low"] == pytest.approx(low, abs=0.01)
    assert rows["fire"]["mean_boot_high"] == pytest.approx(high, abs=0.01)
    pair = run(con, "variance", resamples=2_000, level=0.2)
    (middle,) = [r for r in pair if "/rope/" in r["group_label"]]
    assert (middle["mean_boot_low"], middle["mean_boot_high"]) == (
        pytest.approx((0.105 + 1) / 2), pytest.approx((0.105 + 1) / 2))


def wilson(k: int, n: int, level: float) -> tuple[float, float]:
    z = NormalDist().inv_cdf((1 + level) / 2)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return centre - half, centre + half


@pytest.mark.parametrize("level", [0.9, 0.95, 0.99])
def test_wilson_interval_of_one_trial(level: float) -> None:
    study = Study()
    for w, k in enumerate((0, 3, 57, 200)):
        study.add(group_config("fire", w, 0), {6: k / 200}, n=200)
    rows = run(study.connect(), "final_accuracy", level=level)
    assert [r["correct"] for r in rows] == [0, 3, 57, 200]
    for row in rows:
        low, high = wilson(row["correct"], row["n"], level)
        assert row["wilson_low"] == pytest.approx(max(low, 0), abs=1e-12)
        assert row["wilson_high"] == pytest.approx(min(high, 1), abs=1e-12)
        assert row["level"] == level


def test_a_level_without_a_normal_quantile_is_refused() -> None:
    study = Study()
    study.add(group_config("fire", 0, 0), {6: 0.5})
    con = study.connect()
    for name in ("final_accuracy", "success"):
        with pytest.raises(QueryError, match="level must be one of"):
            run(con, name, level=0.97)
    for name in ("variance", "compare"):
        with pytest.raises(QueryError, match="level must be between"):
            run(con, name, level=1)


# --- success probability and best of N -----------------------------------------------------


def expected_max_by_enumeration(values: list[float], draws: int) -> float:
    return float(np.mean([max(t) for t in itertools.product(values, repeat=draws)]))


def expected_max_by_values(values: list[float], draws: int) -> float:
    """Σ over distinct v of v · (P(max <= v) − P(max < v)), P(max <= v) = F(v)^N."""
    x = np.array(values)
    return float(sum(v * ((x <= v).mean() ** draws - (x < v).mean() ** draws)
                     for v in np.unique(x)))


def test_success_probability_seeds_needed_and_expected_best_of_n() -> None:
    """Five trials with a tie: 2 of 5 reach 0.9. The Wilson interval, the fewest seeds
    that see a success with probability 0.95 at the interval's lower end (by trying N
    = 1, 2, ...), and E[max of N draws] by enumerating all 5^N draws (N = 1, 5) and from
    the distinct values (N = 10)."""
    values = [0.2, 0.95, 0.5, 0.5, 0.9]
    study = Study()
    for w, value in enumerate(values):
        study.add(group_config("fire", w, 0), {6: value, 8: 0.0})
    rows = {r["digits"]: r for r in run(study.connect(), "success")}
    row = rows[6]
    assert (row["n_trials"], row["n_success"], row["threshold"]) == (5, 2, 0.9)
    assert row["p_success"] == pytest.approx(2 / 5)
    low, high = wilson(2, 5, 0.95)
    assert (row["p_success_wilson_low"], row["p_success_wilson_high"]) == (
        pytest.approx(low, abs=1e-12), pytest.approx(high, abs=1e-12))
    needed = next(n for n in itertools.count(1) if 1 - (1 - low) ** n >= 0.95)
    assert row["seeds_for_a_success"] == needed
    assert row["expected_best_of_1"] == pytest.approx(np.mean(values), abs=1e-12)
    assert row["expected_best_of_5"] == pytest.approx(
        expected_max_by_enumeration(values, 5), abs=1e-12)
    assert row["expected_best_of_10"] == pytest.approx(
        expected_max_by_values(values, 10), abs=1e-12)
    # no trial succeeds at 8 digits: no number of seeds is shown to be enough
    assert (rows[8]["n_success"], rows[8]["seeds_for_a_success"]) == (0, None)
    assert rows[8]["expected_best_of_10"] == 0
    lowered = {r["digits"]: r for r in run(study.connect(), "success", threshold=0.5)}
    assert lowered[6]["n_success"] == 4  # accuracy >= threshold: the two 0.5 count
