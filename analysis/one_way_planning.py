"""Seed planning from a one-way pilot: a group that ran several seeds of one kind (weight
or data) and held the other at one seed (one_way_pilots.sql). How many seeds of that
kind give a target half width, at the held seed?

The fit is the pilot's mean m and the variance s² of its k seeds' values. A candidate
of n seeds is simulated from it, `studies` times: y_i = clip(m + s·z_i, 0, 1), and each
simulated study gets the interval the analysis prints for such a group (independent
cells, as variance.sql and success.sql treat a group that is no crossed grid):

    mean_accuracy  Wilson's interval at n_eff = m(1 − m)/V with V = s²/n and t on n − 1
                   degrees of freedom (analysis/mean_interval.py)
    success        Wilson's interval over the n cells (success.sql's independent cells)

The plan is the fewest seeds whose mean half width meets the target (doubling, then
bisection, as analysis/seed_planning.py). With the other seed kind held, s² is the
varied seed's variance plus the residual's; the held kind's variance is in no pilot
value, and every plan says so in words. The weight share needs both seed kinds: a
one-way pilot has no plan for it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

from analysis import mean_interval
from analysis.mean_interval import wilson
from analysis.seed_planning import STUDIES, check_target, fewest_seeds

#: the seed kind a pilot holds when it varies each, and what that seed sets
HELD = {"weight": ("data", "data order"), "data": ("weight", "weight initialisation")}


@dataclass(frozen=True)
class OneWayPlan:
    metric: str
    target: float
    #: the fewest seeds of the pilot's kind that meet the target; None when not even
    #: the most tried do
    seeds: int | None
    #: the mean half width at those seeds (or at the most tried)
    half_width: float
    #: the mean half width at the pilot's own seeds
    pilot_half_width: float


@dataclass(frozen=True)
class OneWayFit:
    """A one-way pilot: seeds of ``varied`` kind, the other held at ``held_seed``."""

    mean: float
    variance: float
    seeds: int
    varied: str
    held_seed: int

    @classmethod
    def from_row(cls, row: dict) -> OneWayFit:
        return cls(row["mean"], row["variance"], row["seeds"], row["varied"], row["held_seed"])

    def unseen(self) -> str:
        """Which variance no plan from this pilot can see, in words."""
        kind, what = HELD[self.varied]
        return (f"{what} was held fixed in the pilot ({kind} seed {self.held_seed}): its variance is not in "
                f"this plan, whose interval is for that one {what}")


def simulate(fit: OneWayFit, n: int, studies: int) -> np.ndarray:
    """`studies` sets of n seeds' values from the fit, shape (studies, n)."""
    rng = np.random.default_rng([n, studies, 1])
    y = fit.mean + np.sqrt(max(fit.variance, 0.0)) * rng.standard_normal((studies, n))
    return np.clip(y, 0, 1)


def half_widths(fit: OneWayFit, metric: str, n: int, threshold: float, level: float,
                studies: int) -> np.ndarray:
    """The half width of ``metric``'s interval in each of `studies` simulated sets of n seeds."""
    y = simulate(fit, n, studies)
    if metric == "success":
        low, high = wilson((y >= threshold).mean(axis=1), n, stats.norm.ppf((1 + level) / 2))
    else:
        variance = y.var(axis=1, ddof=1) / n
        low, high = mean_interval.wilson_bounds(y.mean(axis=1), variance,
                                                mean_interval.t_quantile(level, n - 1), n, level)
    return (high - low) / 2


def plan_one_way(fit: OneWayFit, metric: str, half_width: float, threshold: float = 0.9,
                 level: float = 0.95, max_seeds: int = 512, studies: int = STUDIES) -> OneWayPlan:
    """The fewest seeds of the fit's kind whose mean half width of ``metric``'s interval is
    at most ``half_width``, the other seed kind held as in the pilot."""
    check_target(metric, half_width)
    if metric == "weight_share":
        raise ValueError(f"a pilot that varies the {fit.varied} seed alone cannot split the variance between "
                         "seed kinds: the weight share needs at least 2 weight x 2 data seeds")
    if fit.seeds < 2:
        raise ValueError(f"a pilot needs at least 2 {fit.varied} seeds; it has {fit.seeds}")

    def expected(n: int) -> float:
        return float(np.mean(half_widths(fit, metric, n, threshold, level, studies)))

    seeds, reached = fewest_seeds(expected, half_width, max_seeds)
    return OneWayPlan(metric, half_width, seeds, reached, expected(fit.seeds))


def one_way_plan_row(row: dict, metric: str, half_width: float, data_seeds: int | None,
                     threshold: float, level: float) -> dict:
    """A one_way_pilots.sql row as `lg-study plan` shows it: the pilot, its plan or why
    not, and the variance it cannot see."""
    fit = OneWayFit.from_row(row)
    shown = {"group": row["group_label"], "pilot": f"{fit.seeds} {fit.varied} seeds x 1 {HELD[fit.varied][0]} seed",
             "metric": metric, "target half width": half_width, "not in this plan": fit.unseen()}
    if data_seeds not in (None, 1) and fit.varied == "weight":
        return {**shown, "plan": f"no plan at {data_seeds} data seeds: the pilot held the data seed fixed, "
                                 "so nothing is known of the data order's variance"}
    try:
        found = plan_one_way(fit, metric, half_width, threshold, level)
    except ValueError as error:
        return {**shown, "plan": f"no plan: {error}"}
    if found.seeds is None:
        design = f"not reached: the most {fit.varied} seeds tried give ±{found.half_width:.3f}"
    else:
        design = (f"{found.seeds} {fit.varied} seeds x 1 {HELD[fit.varied][0]} seed ({found.seeds} trials): "
                  f"±{found.half_width:.3f}")
    return {**shown, "pilot half width": round(found.pilot_half_width, 3), "plan": design}
