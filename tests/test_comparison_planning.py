"""Seeds for a comparison (analysis/comparison_planning.py): the fit of the paired
difference recovers the components a Parquet pilot was built with, a planned design
reaches the asked power when whole grids of seed pairs are simulated and tested
independently, bad input is refused naming the value, and `lg-study plan --compare`
prints the plan."""

from __future__ import annotations

import numpy as np
import pytest
from analysis_rows import config, write_trial
from scipy import stats
from typer.testing import CliRunner

from analysis.comparison_planning import (
    ComparisonPlan,
    DifferenceFit,
    fit_pair,
    grid_significant,
    plan_comparison,
    plan_study_comparison,
    simulated_power,
)
from analysis.mean_interval import crossed_variance_df
from orchestrator.cli import app

# --- the fit ---------------------------------------------------------------------------------


def exact_differences(a: int, b: int, sigma2: tuple[float, float, float], mean: float) -> np.ndarray:
    """An a x b grid whose method-of-moments components are exactly sigma2: effects and a
    double-centred residual scaled so that MS_e = σ²_e and MS_w = b·σ²_w + σ²_e (likewise data)."""
    rng = np.random.default_rng(7)
    s_w, s_d, s_e = sigma2
    e = rng.standard_normal((a, b))
    e = e - e.mean(axis=0) - e.mean(axis=1, keepdims=True) + e.mean()
    e *= np.sqrt(s_e * (a - 1) * (b - 1) / (e ** 2).sum())
    u, v = rng.standard_normal(a), rng.standard_normal(b)
    u = (u - u.mean()) * np.sqrt((s_w + s_e / b) / (u - u.mean()).var(ddof=1))
    v = (v - v.mean()) * np.sqrt((s_d + s_e / a) / (v - v.mean()).var(ddof=1))
    return mean + u[:, None] + v[None, :] + e


def pilot_store(root, d: np.ndarray, tilt: float = 0.0) -> None:
    """Groups fire and rope on the same seed pairs, fire − rope = d at the mean of the
    out-of-distribution lengths 6 and 8 (fire is `tilt` higher at 6 and lower at 8); in
    distribution they tie. Left out of the shared grid: a weight seed only fire ran, and
    a seed pair whose rope trial lacks 8 digits."""
    rng = np.random.default_rng(11)
    a, b = d.shape
    for w in range(a + 1):
        for s in range(b):
            base = 0.5 + 0.1 * rng.standard_normal()
            fire = base + d[w, s] if w < a else base
            write_trial(root, "pilot", config("fire", w, s), {2: 1.0, 4: 0.9, 6: fire + tilt, 8: fire - tilt})
            if w < a:
                write_trial(root, "pilot", config("rope", w, s), {2: 0.2, 4: 0.3, 6: base, 8: base})
    write_trial(root, "pilot", config("rope", a + 1, 0), {6: 0.5})
    write_trial(root, "pilot", config("fire", a + 1, 0), {6: 0.5, 8: 0.5})


def test_the_fit_recovers_the_components_the_pilot_was_built_with(tmp_path):
    truth = (0.04 ** 2, 0.02 ** 2, 0.03 ** 2)
    d = exact_differences(5, 4, truth, 0.05)
    pilot_store(tmp_path, d, tilt=0.01)
    fit, lengths = fit_pair(tmp_path, "pilot", ["fire", "rope"])
    assert lengths == [6, 8] and (fit.weight_seeds, fit.data_seeds) == (5, 4)
    assert (fit.sigma2_weight, fit.sigma2_data, fit.sigma2_residual) == pytest.approx(truth, rel=1e-9)
    assert fit.mean == pytest.approx(0.05, abs=1e-12)
    # at one length: the tilt moves every difference alike, so only the mean moves
    at_six, lengths = fit_pair(tmp_path, "pilot", ["fire", "rope"], digits=6)
    assert lengths == [6] and at_six.mean == pytest.approx(0.06, abs=1e-12)
    assert at_six.sigma2_residual == pytest.approx(truth[2], rel=1e-9)
    # B − A: the same components, the mean negated
    reverse, _ = fit_pair(tmp_path, "pilot", ["rope", "fire"])
    assert reverse.mean == pytest.approx(-0.05) and reverse.sigma2_weight == pytest.approx(truth[0])


# --- the power of a planned design -----------------------------------------------------------


def independent_power(sigma2: tuple[float, float, float], difference: float, a: int, b: int,
                      level: float = 0.95, studies: int = 2000, seed: int = 20240) -> float:
    """The paired test on `studies` whole a x b grids of d = δ + α_w + β_d + ε_wd, drawn
    with other random numbers than the planner's, its p from scipy's t distribution."""
    rng = np.random.default_rng(seed)
    s_w, s_d, s_e = np.sqrt(sigma2)
    d = (difference + s_w * rng.standard_normal((studies, a, 1)) + s_d * rng.standard_normal((studies, 1, b))
         + s_e * rng.standard_normal((studies, a, b)))
    m = d.mean(axis=(1, 2))
    rows, columns = d.mean(axis=2), d.mean(axis=1)
    ms_w = b * ((rows - m[:, None]) ** 2).sum(axis=1) / (a - 1)
    ms_d = a * ((columns - m[:, None]) ** 2).sum(axis=1) / (b - 1)
    ms_e = ((d - rows[:, :, None] - columns[:, None, :] + m[:, None, None]) ** 2).sum(axis=(1, 2)) / (
        (a - 1) * (b - 1))
    variance, df = crossed_variance_df(ms_w, ms_d, ms_e, a, b)
    p = 2 * stats.t.sf(np.abs(m) / np.sqrt(variance), df)
    return float(np.mean(p < 1 - level))


#: (σ²_weight, σ²_data, σ²_residual of d, δ): the weight seed dominant, the residual
#: dominant with a small δ, and a large δ with a large data seed component
DESIGNS = [
    ((0.05 ** 2, 0.01 ** 2, 0.05 ** 2), 0.05),
    ((0.03 ** 2, 0.005 ** 2, 0.04 ** 2), 0.02),
    ((0.15 ** 2, 0.03 ** 2, 0.1 ** 2), 0.2),
]


def planned_and_achieved(sigma2: tuple[float, float, float], difference: float) -> tuple[ComparisonPlan, float]:
    """The plan for power 0.8 from a 3 x 4 pilot fitted exactly, and the independent power of its design."""
    found = plan_comparison(DifferenceFit(0.0, *sigma2, 3, 4), difference, 0.8)
    return found, independent_power(sigma2, difference, found.weight_seeds, found.data_seeds)


@pytest.mark.parametrize("sigma2, difference", DESIGNS)
def test_a_planned_design_reaches_the_asked_power_when_whole_grids_are_tested(sigma2, difference):
    found, achieved = planned_and_achieved(sigma2, difference)
    assert found.weight_seeds is not None and found.weight_seeds >= 8  # fine enough steps for ± 0.05
    assert found.achieved >= 0.8 > found.pilot_power
    # 2,000 studies know a power of 0.8 to ± 0.009; one weight seed more moves it by ~0.03
    assert abs(achieved - 0.8) <= 0.05, (found, achieved)
    assert plan_comparison(DifferenceFit(0.0, *sigma2, 3, 4), difference, 0.8) == found  # repeats exactly


def test_the_planners_draws_give_the_power_of_whole_grids():
    """The sufficient statistics the planner draws have the grid's distribution: at one
    design, four powers along the curve agree with whole grids within Monte Carlo error."""
    sigma2 = (0.04 ** 2, 0.02 ** 2, 0.05 ** 2)
    fit = DifferenceFit(0.0, *sigma2, 3, 4)
    for difference in (0.0, 0.02, 0.04, 0.06):
        planned = simulated_power(fit, difference, 6, 5, 0.95)
        assert planned == pytest.approx(independent_power(sigma2, difference, 6, 5), abs=0.03)
    assert simulated_power(fit, 0.0, 6, 5, 0.95) == pytest.approx(0.05, abs=0.015)  # the test's level


def test_the_test_is_scipys_paired_t_test_on_one_data_seed():
    rng = np.random.default_rng(3)
    d = 0.02 + 0.05 * rng.standard_normal((400, 7, 1))
    p = stats.ttest_1samp(d[:, :, 0], 0.0, axis=1).pvalue
    assert np.array_equal(grid_significant(d, 0.9), p < 0.1)
    assert grid_significant(np.full((1, 3, 2), 0.1), 0.95).all()  # every difference ties, d̄ ≠ 0
    assert not grid_significant(np.zeros((1, 3, 2)), 0.95).any()


def test_a_fixed_data_seed_count_is_kept_and_an_unreachable_power_said():
    fit = DifferenceFit(0.0, 0.02 ** 2, 0.05 ** 2, 0.02 ** 2, 3, 4)
    at_two = plan_comparison(fit, 0.05, data_seeds=2)
    # σ²_data/2 stays in V on one degree of freedom: no number of weight seeds helps
    assert at_two.data_seeds == 2 and at_two.weight_seeds is None and at_two.achieved < 0.8
    free = plan_comparison(fit, 0.05)
    assert free.weight_seeds is not None and free.data_seeds > 4


# --- refusals and the command ----------------------------------------------------------------

FIT = DifferenceFit(0.0, 0.01, 0.001, 0.01, 3, 4)


@pytest.mark.parametrize("difference, power, message", [
    (0.0, 0.8, "difference 0.0 is outside (0, 1]"),
    (1.5, 0.8, "difference 1.5 is outside (0, 1]"),
    (0.1, 1.0, "power 1.0 is outside (0, 1)"),
    (0.1, 0.0, "power 0.0 is outside (0, 1)"),
])
def test_a_target_outside_its_range_is_refused_naming_the_value(difference, power, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        plan_comparison(FIT, difference, power)


def test_a_pilot_without_a_shared_two_by_two_grid_is_refused():
    with pytest.raises(ValueError, match="at least 2 weight x 2 data seeds; it has 5 x 1"):
        DifferenceFit.from_differences(np.zeros((5, 1)))


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    root = tmp_path_factory.mktemp("pilot")
    pilot_store(root, exact_differences(3, 2, (0.03 ** 2, 0.01 ** 2, 0.02 ** 2), 0.04))
    # a third group, fire at another lr, on data seed 0 only: it shares no 2 x 2 grid with fire
    for w in range(3):
        write_trial(root, "pilot", config("fire", w, 0, lr=1e-3), {6: 0.5, 8: 0.5},
                    group_label="addition/fire/tiny/uniform_length train.lr=0.001")
    return root


@pytest.mark.parametrize("pair, message", [
    (["fire", "alibi"], "unknown group 'alibi'; the study's groups:"),
    (["fire"], "a comparison names two different groups, GROUP_A,GROUP_B; got 'fire'"),
    (["fire", "fire"], "a comparison names two different groups"),
])
def test_a_bad_pair_of_groups_is_refused(store, pair, message):
    with pytest.raises(ValueError, match=message):
        plan_study_comparison(store, "pilot", pair, 0.05)


def test_groups_sharing_no_two_by_two_grid_are_refused(store):
    with pytest.raises(ValueError, match="share no complete grid of 2 weight x 2 data seeds"):
        plan_study_comparison(store, "pilot", ["fire", "fire · lr=0.001"], 0.05)
    with pytest.raises(ValueError, match="share no measured seed pair at 5 digits"):
        plan_study_comparison(store, "pilot", ["fire", "rope"], 0.05, digits=5)


def test_lg_study_plan_compare_prints_the_plan_and_refuses_bad_input(store):
    runner = CliRunner()
    shown = runner.invoke(app, ["plan", "pilot", "--compare", "addition/fire/tiny/uniform_length,rope",
                                "--difference", "0.05", "--results", str(store)])
    assert shown.exit_code == 0, shown.output
    assert "3 x 2" in shown.output and "weight x" in shown.output and "power" in shown.output
    refused = runner.invoke(app, ["plan", "pilot", "--compare", "fire,rope", "--difference", "2",
                                  "--results", str(store)])
    assert refused.exit_code == 2 and "difference 2.0 is outside (0, 1]" in refused.output
    refused = runner.invoke(app, ["plan", "pilot", "--compare", "fire,rope", "--results", str(store)])
    assert refused.exit_code == 2 and "--compare GROUP_A,GROUP_B and --difference go together" in refused.output
    # without --compare, the half-width plan as before
    refused = runner.invoke(app, ["plan", "pilot", "--half-width", "2", "--results", str(store)])
    assert refused.exit_code == 2 and "target half width 2.0 is outside (0, 1)" in refused.output


if __name__ == "__main__":  # the numbers docs/analysis.md quotes
    for sigma2, difference in DESIGNS:
        found, achieved = planned_and_achieved(sigma2, difference)
        print(f"σ = {', '.join(f'{np.sqrt(v):.3f}' for v in sigma2)}, δ = {difference}: "
              f"{found.weight_seeds} x {found.data_seeds} seeds, planned power {found.achieved:.3f}, "
              f"pilot's (3 x 4) {found.pilot_power:.3f}, whole grids {achieved:.3f}")
