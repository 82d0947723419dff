"""Seed planning: how many weight x data seeds a study needs for a target half width of
the weight share, the mean accuracy or the success probability.

The fit is a pilot group's two-way random-effects model (lucky_tickets.sql): its grand
mean m and components σ²_weight, σ²_data, σ²_residual, at the measured lengths or at one
length. A candidate design of a weight x b data seeds is simulated from it, `studies`
times: y_wd = clip(m + u_w + v_d + e_wd, 0, 1) with u, v, e normal of those variances.
Each simulated study gets the very interval the analysis prints:

    weight_share   the generalized confidence interval of σ²_w's share (share_intervals.py)
    mean_accuracy  Wilson's interval at n_eff = m(1 − m)/V with t_ν, V and ν those of
                   analysis/mean_interval.py (variance.sql)
    success        Wilson's interval at the effective number of seed pairs (success.sql)

and the design's half width is their mean, the expected half width of a study of that
design (the median over as many studies moved twice as much from one set to another).
The plan is the design with the fewest
trials a·b; at each number of data seeds tried, the weight seeds are searched by doubling
then bisection (the half width falls as a grows; the simulations of a design are seeded
by (a, b), so a search repeats exactly). The model is normal; accuracies piled at 0 or 1
or split between the two are not, and the plan is then a guide, not a promise.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from analysis import mean_interval
from analysis.share_intervals import share_bounds

PLAN_METRICS = {
    "weight_share": "the weight seed's share of the variance (generalized confidence interval)",
    "mean_accuracy": "the mean accuracy over seeds (two-way random effects, Wilson at the effective n)",
    "success": "the probability that a seed pair reaches the threshold (Wilson at the effective N)",
}
#: simulated studies per design: the weight share's mean half width over 256 moves by
#: about 0.005 from one set of studies to another (at 8 x 5 seeds)
STUDIES = 256
#: draws of the share pivots per simulated study, fresh for each study (their Monte Carlo
#: errors average out in the mean): against 10,000 draws the mean half width moves
#: by 0.013 at 3 x 5 seeds and by 0.001 at 40 x 16, where plans land
PLANNING_DRAWS = 500


@dataclass(frozen=True)
class PilotFit:
    """A pilot group's fitted two-way model and the seeds it was fitted on."""

    mean: float
    sigma2_weight: float
    sigma2_data: float
    sigma2_residual: float
    weight_seeds: int
    data_seeds: int

    @classmethod
    def from_lucky_row(cls, row: dict, digits: int | None = None) -> PilotFit:
        """From a group's lucky_tickets.sql row: over its measured lengths, or at ``digits``."""
        if row.get("weight_seed") is None:
            raise ValueError(f"group {row.get('group_label')!r} has no complete grid of at least 2 weight "
                             f"x 2 data seeds to fit: {row.get('skipped_reason')}")
        entry = row
        if digits is not None:
            entry = next((e for e in row["by_length"] or [] if e["digits"] == digits), None)
            if entry is None:
                measured = ", ".join(str(e["digits"]) for e in row["by_length"] or [])
                raise ValueError(f"group {row['group_label']!r} measured no accuracy at {digits} digits "
                                 f"(its lengths: {measured})")
        return cls(entry["grand_mean"], entry["sigma2_weight"], entry["sigma2_data"], entry["sigma2_residual"],
                   row["n_weight_seeds"], row["n_data_seeds"])


@dataclass(frozen=True)
class SeedPlan:
    metric: str
    target: float
    data_seeds: int
    #: the fewest weight seeds whose mean half width is at most the target at
    #: data_seeds; None when not even max_weight_seeds reach it
    weight_seeds: int | None
    #: the mean half width at the planned design (or at max_weight_seeds)
    half_width: float
    #: the mean half width at the pilot's own design
    pilot_half_width: float


def check_target(metric: str, half_width: float) -> None:
    """Refuse an unknown metric or a half width outside (0, 1), naming the value."""
    if metric not in PLAN_METRICS:
        raise ValueError(f"unknown metric {metric!r}; choose one of: {', '.join(PLAN_METRICS)}")
    if not 0 < half_width < 1:
        raise ValueError(f"target half width {half_width} is outside (0, 1)")


def simulate(fit: PilotFit, a: int, b: int, studies: int) -> np.ndarray:
    """`studies` grids of a x b accuracies from the fit, shape (studies, a, b)."""
    rng = np.random.default_rng([a, b, studies])
    sd = np.sqrt([max(fit.sigma2_weight, 0), max(fit.sigma2_data, 0), max(fit.sigma2_residual, 0)])
    y = (fit.mean + sd[0] * rng.standard_normal((studies, a, 1)) + sd[1] * rng.standard_normal((studies, 1, b))
         + sd[2] * rng.standard_normal((studies, a, b)))
    return np.clip(y, 0, 1)


def mean_squares(y: np.ndarray) -> tuple[np.ndarray, ...]:
    """Grand mean, MS_weight, MS_data, MS_residual and the cells' variance per study."""
    return (*mean_interval.grid_mean_squares(y), y.reshape(len(y), -1).var(axis=1, ddof=1))


def success_half_widths(y: np.ndarray, threshold: float, level: float) -> np.ndarray:
    """success.sql's interval over each simulated study's cells."""
    rate = mean_interval.success_rate((y >= threshold).astype(float), y)
    low, high = mean_interval.wilson_rate_bounds(rate.p, rate.n_eff, rate.df, level)
    return (high - low) / 2


def half_widths(fit: PilotFit, metric: str, a: int, b: int, threshold: float, level: float,
                studies: int) -> np.ndarray:
    """The half width of ``metric``'s interval in each of `studies` simulated a x b grids."""
    y = simulate(fit, a, b, studies)
    if metric == "success":
        return success_half_widths(y, threshold, level)
    m, ms_w, ms_d, ms_e, _ = mean_squares(y)
    if metric == "mean_accuracy":
        low, high = mean_interval.crossed_mean_bounds(m, ms_w, ms_d, ms_e, a, b, level)
        return (high - low) / 2
    bounds = share_bounds(ms_w, ms_d, ms_e, a, b, level, PLANNING_DRAWS, independent=True)
    return np.nan_to_num((bounds[:, 1] - bounds[:, 0]) / 2, nan=0.5)


#: data seed counts a plan tries when the caller does not fix them (with the pilot's)
DATA_SEED_CHOICES = (2, 3, 5, 8, 10, 16, 20, 32, 64)


def plan(fit: PilotFit, metric: str, half_width: float, data_seeds: int | None = None,
         threshold: float = 0.9, level: float = 0.95, max_weight_seeds: int = 512,
         studies: int = STUDIES) -> SeedPlan:
    """The design with the fewest trials whose mean half width of ``metric``'s interval
    is at most ``half_width``: at ``data_seeds`` when given, else over the pilot's data
    seeds and DATA_SEED_CHOICES (ties: the fewer weight seeds)."""
    check_target(metric, half_width)
    if fit.weight_seeds < 2 or fit.data_seeds < 2:
        raise ValueError(f"a pilot needs at least 2 weight and 2 data seeds; it has {fit.weight_seeds} x "
                         f"{fit.data_seeds}")
    if data_seeds is not None and data_seeds < 2:
        raise ValueError(f"a plan needs at least 2 data seeds, not {data_seeds}")
    choices = [data_seeds] if data_seeds else sorted({fit.data_seeds, *DATA_SEED_CHOICES})
    best: SeedPlan | None = None
    for b in choices:
        cap = max_weight_seeds if best is None or best.weight_seeds is None else min(
            max_weight_seeds, best.weight_seeds * best.data_seeds // b)
        if cap < 2:
            break
        found = _plan_at(fit, metric, half_width, b, threshold, level, cap, studies)
        if found.weight_seeds is not None and (best is None or best.weight_seeds is None or found.weight_seeds
                                               * b < best.weight_seeds * best.data_seeds) or best is None or (best.weight_seeds is None and found.half_width < best.half_width):
            best = found
    return best


def _plan_at(fit: PilotFit, metric: str, half_width: float, b: int, threshold: float, level: float,
             max_weight_seeds: int, studies: int) -> SeedPlan:
    """The fewest weight seeds at b data seeds."""

    def expected(a: int) -> float:
        return float(np.mean(half_widths(fit, metric, a, b, threshold, level, studies)))

    pilot = float(np.mean(half_widths(fit, metric, fit.weight_seeds, fit.data_seeds, threshold, level, studies)))
    weight_seeds, reached = fewest_seeds(expected, half_width, max_weight_seeds)
    return SeedPlan(metric, half_width, b, weight_seeds, reached, pilot)


def fewest_seeds(expected, half_width: float, max_seeds: int) -> tuple[int | None, float]:
    """The fewest seeds n >= 2 with expected(n) <= half_width, by doubling then bisection
    (expected falls as n grows; each n is computed once), and its expected half width;
    (None, expected(max_seeds)) when not even max_seeds reach it."""
    cache: dict[int, float] = {}

    def at(n: int) -> float:
        if n not in cache:
            cache[n] = expected(n)
        return cache[n]

    low, high = 1, 2  # at(low) > target, or low = 1 (no interval has one seed)
    while at(high) > half_width:
        if high >= max_seeds:
            return None, at(high)
        low, high = high, min(2 * high, max_seeds)
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if at(middle) > half_width else (low, middle)
    return high, at(high)


# --- a study's groups as pilots -------------------------------------------------------------


def group_plans(lucky_rows: list[dict], metric: str, half_width: float, digits: int | None = None,
                data_seeds: int | None = None, threshold: float = 0.9, level: float = 0.95,
                at_pilot_data_seeds: bool = False) -> list[dict]:
    """One row per group of lucky_tickets.sql's rows: its pilot design and its plan for
    ``metric`` (at ``data_seeds``, or with ``at_pilot_data_seeds`` at the pilot's own, or
    over the data seeds `plan` tries); a group that cannot be a pilot says why."""
    check_target(metric, half_width)
    rows = []
    for row in {r["group_id"]: r for r in lucky_rows}.values():
        shown = {"group": row["group_label"], "pilot": None, "metric": metric, "target half width": half_width}
        try:
            fit = PilotFit.from_lucky_row(row, digits)
            found = plan(fit, metric, half_width, fit.data_seeds if at_pilot_data_seeds else data_seeds,
                         threshold, level)
        except ValueError as error:
            rows.append({**shown, "plan": f"no plan: {error}"})
            continue
        rows.append({**shown, **plan_words(fit, found)})
    return rows


def plan_words(fit: PilotFit, found: SeedPlan) -> dict:
    """A plan as table cells: the pilot, its half width, the design and its half width."""
    if found.weight_seeds is None:
        design = f"not reached at {found.data_seeds} data seeds: the most weight seeds tried give ±{found.half_width:.3f}"
    else:
        design = (f"{found.weight_seeds} weight x {found.data_seeds} data seeds "
                  f"({found.weight_seeds * found.data_seeds} trials): ±{found.half_width:.3f}")
    return {"pilot": f"{fit.weight_seeds} x {fit.data_seeds}", "pilot half width": round(found.pilot_half_width, 3),
            "plan": design}
