"""Seed planning (analysis/seed_planning.py): its intervals are the analysis files' own on
the same grid, a plan made from the true model gives the target half width when the real
SQL runs studies of the planned size (and one weight seed fewer misses it), bad input is
refused naming the value, and `lg-study plan` and the report show plans."""

from __future__ import annotations

import numpy as np
import pytest
from test_analysis_sql import config, write_trial
from test_mean_interval import study
from test_statistics import run
from typer.testing import CliRunner

from analysis.mean_interval import crossed_mean_bounds
from analysis.seed_planning import (
    PilotFit,
    mean_squares,
    plan,
    simulate,
    success_half_widths,
)
from analysis.share_intervals import share_bounds
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
