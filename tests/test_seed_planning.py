"""Seed planning (analysis/seed_planning.py): its intervals are the analysis files' own on
the same grid, a plan made from the true model gives the target half width when the real
SQL runs studies of the planned size (and one weight seed fewer misses it), bad input is
refused naming the value, and `lg-study plan` and the report show plans."""

from __future__ import annotations

import numpy as np
import pytest
from analysis_rows import config, run, write_trial
from test_mean_interval import study
from typer.testing import CliRunner

from analysis.mean_interval import crossed_mean_bounds
from analysis.one_way_planning import HELD, OneWayFit, plan_one_way
from analysis.query import open_results
from analysis.seed_planning import (
    PilotFit,
    mean_squares,
    plan,
    simulate,
    success_half_widths,
)
from analysis.share_intervals import share_bounds
from analysis.study_plan import plan_study
from orchestrator.cli import app

TRUTH = PilotFit(0.5, 0.15 ** 2, 0.05 ** 2, 0.05 ** 2, 3, 5)


def test_the_planners_intervals_are_the_sql_files_own():
    fit = PilotFit(0.8, 0.15 ** 2, 0.05 ** 2, 0.05 ** 2, 3, 5)
    grids = simulate(fit, 5, 4, 6)
    with study(list(grids)).connect() as con:
        means = {r["group_id"]: r for r in run(con, "variance", resamples=2)}
        successes = {r["group_id"]: r for r in run(con, "success")}
        lucky = {r["group_id"]: r for r in run(con, "lucky_tickets", resamples=2)}
    assert len(means) == len(successes) == len(lucky) == 6
    m, ms_w, ms_d, ms_e, _ = mean_squares(grids)
    low, high = crossed_mean_bounds(m, ms_w, ms_d, ms_e, 5, 4)
    ordered = [means[gid] for gid in sorted(means, key=lambda g: means[g]["mean"])]
    order = np.argsort(m)
    for row, k in zip(ordered, order):
        assert (row["mean_low"], row["mean_high"]) == pytest.approx((low[k], high[k]), abs=1e-9)
    halves = sorted((r["p_success_high"] - r["p_success_low"]) / 2 for r in successes.values())
    assert halves == pytest.approx(sorted(success_half_widths(grids, 0.9, 0.95)), abs=1e-9)
    shares = sorted(r["component_share_weight_high"] - r["component_share_weight_low"] for r in lucky.values())
    bounds = share_bounds(ms_w, ms_d, ms_e, 5, 4)
    assert shares == pytest.approx(sorted(bounds[:, 1] - bounds[:, 0]), abs=1e-9)


def mean_sql_half_width(a: int, b: int, count: int) -> float:
    """The weight share's mean half width over `count` studies the real SQL analyses,
    drawn from the truth with other random numbers than the planner's."""
    rng = np.random.default_rng(2024)
    sw, sd, se = np.sqrt([TRUTH.sigma2_weight, TRUTH.sigma2_data, TRUTH.sigma2_residual])
    ys = [np.clip(0.5 + rng.normal(0, sw, (a, 1)) + rng.normal(0, sd, (1, b)) + rng.normal(0, se, (a, b)), 0, 1)
          for _ in range(count)]
    with study(ys).connect() as con:
        rows = {r["group_id"]: r for r in run(con, "lucky_tickets", resamples=2) if r["weight_seed"] is not None}
    return float(np.mean([(r["component_share_weight_high"] - r["component_share_weight_low"]) / 2
                            for r in rows.values()]))


def test_a_plan_reaches_its_target_when_the_sql_analyses_studies_of_that_size():
    found = plan(TRUTH, "weight_share", 0.25, data_seeds=5)
    assert found.weight_seeds is not None and found.half_width <= 0.25 < found.pilot_half_width
    # the SQL's mean over 200 studies is itself known to about ± 0.01
    assert mean_sql_half_width(found.weight_seeds, 5, 200) <= 0.25 + 0.015
    assert mean_sql_half_width(found.weight_seeds - 2, 5, 200) > 0.25 - 0.015
    assert plan(TRUTH, "weight_share", 0.25, data_seeds=5) == found  # the search repeats exactly


def test_a_plan_chooses_the_design_with_fewest_trials_and_says_when_it_cannot_reach():
    mean = plan(TRUTH, "mean_accuracy", 0.05)
    at_five = plan(TRUTH, "mean_accuracy", 0.05, data_seeds=5)
    # five data seeds leave σ²_data/5 in the mean's variance on 4 degrees of freedom
    assert at_five.weight_seeds is None and at_five.half_width > 0.05
    assert mean.weight_seeds is not None and mean.data_seeds > 5 and mean.half_width <= 0.05
    assert plan(TRUTH, "success", 0.1).weight_seeds is not None


@pytest.mark.parametrize("metric, half_width, pilot, message", [
    ("weight_share", 0.0, TRUTH, "target half width 0.0 is outside (0, 1)"),
    ("weight_share", 1.5, TRUTH, "target half width 1.5 is outside (0, 1)"),
    ("luck", 0.1, TRUTH, "unknown metric 'luck'; choose one of: weight_share, mean_accuracy, success"),
    ("success", 0.1, PilotFit(0.5, 0.02, 0.002, 0.002, 1, 5), "at least 2 weight and 2 data seeds; it has 1 x 5"),
])
def test_bad_input_is_refused_naming_the_value(metric, half_width, pilot, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        plan(pilot, metric, half_width)


def pilot_store(root, a: int, b: int) -> None:
    rng = np.random.default_rng(1)
    for w in range(a):
        effect = rng.normal(0, 0.15)
        for d in range(b):
            accuracy = float(np.clip(0.5 + effect + rng.normal(0, 0.07), 0, 1))
            write_trial(root, "pilot", config("fire", w, d), {6: accuracy, 8: accuracy})


def test_lg_study_plan_prints_each_groups_plan_and_refuses_bad_targets(tmp_path):
    pilot_store(tmp_path, 3, 4)
    runner = CliRunner()
    shown = runner.invoke(app, ["plan", "pilot", "--metric", "success", "--half-width", "0.2",
                                "--results", str(tmp_path)])
    assert shown.exit_code == 0, shown.output
    assert "weight x" in shown.output and "3 x 4" in shown.output
    refused = runner.invoke(app, ["plan", "pilot", "--half-width", "2", "--results", str(tmp_path)])
    assert refused.exit_code == 2 and "target half width 2.0 is outside (0, 1)" in refused.output
    refused = runner.invoke(app, ["plan", "pilot", "--metric", "luck", "--results", str(tmp_path)])
    assert refused.exit_code == 2 and "unknown metric 'luck'" in refused.output


# --- one-way pilots: one seed kind varied, the other held -----------------------------------

ONE_WAY = OneWayFit(0.5, 0.15 ** 2 + 0.05 ** 2, 3, "weight", 0)


def one_way_sql_half_widths(n: int, count: int) -> tuple[float, float]:
    """variance.sql's mean half width and coverage of the true mean over `count` studies
    of n weight seeds at one data seed, drawn with other random numbers than the planner's."""
    rng = np.random.default_rng(2025)
    ys = [np.clip(ONE_WAY.mean + rng.normal(0, np.sqrt(ONE_WAY.variance), (n, 1)), 0, 1) for _ in range(count)]
    with study(ys).connect() as con:
        rows = run(con, "variance", resamples=2)
    assert len(rows) == count and all(r["mean_method"].startswith("independent") for r in rows)
    return (float(np.mean([(r["mean_high"] - r["mean_low"]) / 2 for r in rows])),
            float(np.mean([r["mean_low"] <= ONE_WAY.mean <= r["mean_high"] for r in rows])))


def test_a_one_way_plan_reaches_its_target_when_the_sql_analyses_studies_of_that_size():
    found = plan_one_way(ONE_WAY, "mean_accuracy", 0.08)
    assert found.seeds is not None and found.half_width <= 0.08 < found.pilot_half_width
    # 200 studies know the SQL's mean half width to about ± 0.001 (its spread across studies
    # / √200) and its coverage to ± 0.015 (measured 0.925)
    at_plan, covered = one_way_sql_half_widths(found.seeds, 200)
    assert at_plan <= 0.08 + 0.002 and covered >= 0.91
    assert one_way_sql_half_widths(found.seeds - 2, 200)[0] > 0.08 - 0.002
    assert plan_one_way(ONE_WAY, "mean_accuracy", 0.08) == found  # the search repeats exactly
    assert plan_one_way(ONE_WAY, "success", 0.15).seeds is not None


def one_way_store(root, varied: str) -> list[float]:
    """Four seeds of ``varied`` kind (the other at 0) at 6 and 8 digits; the fourth lacks 8."""
    rng = np.random.default_rng(3)
    values = []
    for seed in range(4):
        accuracy = float(np.clip(0.6 + rng.normal(0, 0.15), 0, 1))
        cfg = config("fire", seed, 0) if varied == "weight" else config("fire", 0, seed)
        write_trial(root, "one_way", cfg, {6: accuracy, 8: accuracy / 2} if seed < 3 else {6: accuracy})
        values.append(0.75 * accuracy)
    return values[:3]


@pytest.mark.parametrize("varied, held_words", [
    ("weight", ("data order was held fixed in the pilot (data seed 0): its variance is not in this plan, "
               "whose interval is for that one data order")),
    ("data", ("weight initialisation was held fixed in the pilot (weight seed 0): its variance is not in this "
             "plan, whose interval is for that one weight initialisation")),
])
def test_lg_study_plan_plans_a_one_way_pilot_and_says_which_variance_it_cannot_see(tmp_path, varied, held_words):
    values = one_way_store(tmp_path, varied)
    with open_results(tmp_path, "one_way") as con:
        row = next(r for r in run(con, "one_way_pilots") if r["at_digits"] == 0)
    assert (row["varied"], row["seeds"], row["left_out"]) == (varied, 3, 1)
    assert (row["mean"], row["variance"]) == pytest.approx((np.mean(values), np.var(values, ddof=1)), rel=1e-12)
    mean = plan_study(tmp_path, "one_way", "mean_accuracy", 0.1)[0]
    fit = OneWayFit(row["mean"], row["variance"], 3, varied, 0)
    planned = plan_one_way(fit, "mean_accuracy", 0.1)
    assert mean["not in this plan"] == held_words and mean["pilot"] == f"3 {varied} seeds x 1 {HELD[varied][0]} seed"
    assert mean["plan"] == (f"{planned.seeds} {varied} seeds x 1 {HELD[varied][0]} seed ({planned.seeds} trials): "
                            f"±{planned.half_width:.3f}")
    share = plan_study(tmp_path, "one_way", "weight_share", 0.1)[0]["plan"]
    assert share.startswith(f"no plan: a pilot that varies the {varied} seed alone cannot split the variance")
    if varied == "weight":
        assert plan_study(tmp_path, "one_way", "success", 0.1, data_seeds=5)[0]["plan"].startswith(
            "no plan at 5 data seeds: the pilot held the data seed fixed")
    shown = CliRunner().invoke(app, ["plan", "one_way", "--metric", "mean_accuracy", "--half-width", "0.1",
                                     "--results", str(tmp_path)])
    assert shown.exit_code == 0 and "not in this plan" in shown.output, shown.output


def test_lg_study_plan_says_why_a_study_has_no_pilot(tmp_path):
    write_trial(tmp_path, "alone", config("fire", 0, 0), {6: 0.5, 8: 0.4})
    shown = CliRunner().invoke(app, ["plan", "alone", "--results", str(tmp_path)])
    assert shown.exit_code == 2 and "none runs at least 2 seeds of one kind" in " ".join(shown.output.split())


def test_a_study_of_crossed_and_one_way_groups_gets_one_table_in_short_labels(tmp_path):
    """The crossed group's row comes first and has no `not in this plan` of its own, yet the
    column is printed (a table takes its columns from every row), and each group is named
    by its short label, as in the run table and the report."""
    pilot_store(tmp_path, 3, 4)
    for weight in range(3):
        write_trial(tmp_path, "pilot", config("rope", weight, 0), {6: 0.4 + 0.1 * weight, 8: 0.3})
    rows = plan_study(tmp_path, "pilot", "mean_accuracy", 0.1)
    assert [row["group"] for row in rows] == ["fire", "rope"]
    assert [bool(row["not in this plan"]) for row in rows] == [False, True]
    shown = CliRunner().invoke(app, ["plan", "pilot", "--metric", "mean_accuracy", "--half-width", "0.1",
                                     "--results", str(tmp_path)])
    assert shown.exit_code == 0 and "not in this plan" in shown.output, shown.output
