"""Does configuration A differ from B beyond seed luck? The intervals and tests of
compare.sql in numpy, for the coverage simulation (tests/compare_coverage.py), seed
planning of comparisons, and the p-value of the success difference, which inverts its
interval (registered in DuckDB as `success_difference_p`, analysis/query.py).

The unit is the seed: seed pairs that share a weight seed (or a data seed) share its
luck, so a·b seed pairs are not a·b independent draws.

Accuracy. Paired (both groups on the same seed pairs): the differences
d_wd = y^A_wd − y^B_wd are a crossed grid like any group's accuracies,
d_wd = Δ + α_w + β_d + ε_wd, and Var(d̄) = σ²_α/a + σ²_β/b + σ²_ε/(ab): V and ν are
the mean's (analysis/mean_interval.crossed_variance_df: a component at 0 dropped);
one seed kind (b = 1) or holes: the cells as independent, V = s²/n on n − 1. Not
paired: each group's V and ν as above, V = V_A + V_B on Welch–Satterthwaite's
ν = V²/(V_A²/ν_A + V_B²/ν_B). Interval d̄ ± t_ν·√V within [−1, 1]; p = 2·P(T_ν > |d̄|/√V).
When V = 0 (every seed pair's difference ties, e.g. both groups score 0 on every
seed), the spread says nothing: the interval is Newcombe's combination (MOVER) of the
groups' own intervals (variance.sql's, Wilson over the cells when a group ties), and
p the score test at the largest variance means of n values in [0, 1] can have,
z = |Δ| / √(p̄(1 − p̄)(1/n_A + 1/n_B)).

Success (a seed pair succeeds when its accuracy reaches the threshold). Each group's
success rate has success.sql's interval: Wilson at the effective number of seed pairs
n_eff with t_ν for z. The difference's interval is Newcombe's hybrid score interval
(method 10) built from those two intervals (Zou & Donner's MOVER), with φ the
correlation of the two groups' successes over the shared seed pairs (paired; 0
unpaired, and 0 with 4 seed pairs or fewer, where one estimated on 1 degree of freedom
covered 0.87):
    low  = Δ − √((p_A − l_A)² − 2φ(p_A − l_A)(u_B − p_B) + (u_B − p_B)²)
    high = Δ + √((u_A − p_A)² − 2φ(u_A − p_A)(p_B − l_B) + (p_B − l_B)²)
Its p-value is the level at which the interval's end reaches 0 (found by bisection),
so that p < 1 − level exactly when the interval excludes 0.

Probability of improvement (Agarwal et al. 2021; Bouthillier et al. 2021). Paired:
the share of shared seed pairs on which A scores above B (ties count ½), with
variance.sql's interval of a mean over seeds. Not paired: P(A > B) for runs of A and B
that share no seed, the mean of h(y^A_i, y^B_j) over such pairs, its variance from the
Hajek projection (DeLong et al. 1988): each group's placement values (a seed pair's
share of wins) as a crossed grid, V = V_A + V_B on Welch's ν, and Wilson at
n_eff = θ(1 − θ)/V with t_ν.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import optimize, special

from analysis.mean_interval import (
    ROUNDING_TIE,
    SuccessRate,
    grid_variance,
    success_rate,
    t_quantile,
    wilson_bounds,
    wilson_rate_bounds,
)

#: fewer seed pairs than this and the paired correlation of successes is not estimated
MIN_PAIRS_FOR_PHI = 5


@dataclass(frozen=True)
class Difference:
    """A difference with its interval and two-sided p-value, per simulated study."""

    diff: np.ndarray
    low: np.ndarray
    high: np.ndarray
    p: np.ndarray


def welch_df(v_a, df_a, v_b, df_b) -> np.ndarray:
    """Welch–Satterthwaite's degrees of freedom of V_A + V_B (a term at 0 adds none)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        parts = np.where(v_a > 0, v_a ** 2 / df_a, 0) + np.where(v_b > 0, v_b ** 2 / df_b, 0)
        return (v_a + v_b) ** 2 / parts


def t_difference(diff, v, df, level: float) -> Difference:
    """diff ± t_ν·√V within [−1, 1], and the two-sided t test of no difference."""
    t = t_quantile(level, df)
    spread = t * np.sqrt(v)
    with np.errstate(divide="ignore", invalid="ignore"):
        statistic = np.abs(diff) / np.sqrt(v)
    p = 2 * special.stdtr(np.maximum(np.nan_to_num(df, nan=1.0), 1.0), -statistic)
    return Difference(diff, np.maximum(diff - spread, -1), np.minimum(diff + spread, 1), p)


def mover(m_a, low_a, high_a, m_b, low_b, high_b, phi=0.0) -> tuple[np.ndarray, np.ndarray]:
    """Newcombe's (MOVER) interval of m_a − m_b from the two groups' intervals."""
    da_low, da_high = m_a - low_a, high_a - m_a
    db_low, db_high = m_b - low_b, high_b - m_b
    diff = m_a - m_b
    low = diff - np.sqrt(np.maximum(da_low ** 2 - 2 * phi * da_low * db_high + db_high ** 2, 0))
    high = diff + np.sqrt(np.maximum(da_high ** 2 - 2 * phi * da_high * db_low + db_low ** 2, 0))
    return np.maximum(low, -1), np.minimum(high, 1)


def tied_difference(y_a, y_b, level: float) -> Difference:
    """The rule for differences that all tie (V = 0): MOVER of the groups' own intervals
    and the score test at the largest variance."""
    n_a, n_b = y_a[0].size, y_b[0].size
    low_a, high_a = group_bounds(y_a, level)
    low_b, high_b = group_bounds(y_b, level)
    m_a, m_b = y_a.mean(axis=(1, 2)), y_b.mean(axis=(1, 2))
    low, high = mover(m_a, low_a, high_a, m_b, low_b, high_b)
    pooled = (m_a + m_b) / 2
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.abs(m_a - m_b) / np.sqrt(pooled * (1 - pooled) * (1 / n_a + 1 / n_b))
    p = np.where(m_a == m_b, 1.0, 2 * special.ndtr(-z))
    return Difference(m_a - m_b, low, high, p)


def group_bounds(y: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    """variance.sql's interval of each grid's mean (Wilson at the effective n)."""
    m, v, df = grid_variance(y)
    return wilson_bounds(m, v, t_quantile(level, df), y[0].size, level)


def accuracy_difference(y_a: np.ndarray, y_b: np.ndarray, paired: bool,
                        level: float = 0.95) -> Difference:
    """compare.sql's accuracy_diff, its interval and p, per study of grids (studies, a, b)."""
    if paired:
        diff, v, df = grid_variance(y_a - y_b)
    else:
        m_a, v_a, df_a = grid_variance(y_a)
        m_b, v_b, df_b = grid_variance(y_b)
        diff, v, df = m_a - m_b, v_a + v_b, welch_df(v_a, df_a, v_b, df_b)
    spread = t_difference(diff, v, df, level)
    tied = tied_difference(y_a, y_b, level)
    pick = v > ROUNDING_TIE
    return Difference(diff, np.where(pick, spread.low, tied.low), np.where(pick, spread.high, tied.high),
                      np.where(pick, spread.p, tied.p))


def success_bounds(a: SuccessRate, b: SuccessRate, phi, level: float) -> tuple[np.ndarray, np.ndarray]:
    """The success difference's MOVER interval at `level`."""
    low_a, high_a = wilson_rate_bounds(a.p, a.n_eff, a.df, level)
    low_b, high_b = wilson_rate_bounds(b.p, b.n_eff, b.df, level)
    return mover(a.p, low_a, high_a, b.p, low_b, high_b, phi)


def success_p(p_a, n_a, df_a, p_b, n_b, df_b, phi) -> float:
    """The two-sided p-value of the success difference: 1 − the level at which its
    interval's end nearest 0 reaches 0 (1 when the rates are equal)."""
    a = SuccessRate(np.array([p_a]), np.array([n_a]), np.array([np.nan if df_a is None else df_a]))
    b = SuccessRate(np.array([p_b]), np.array([n_b]), np.array([np.nan if df_b is None else df_b]))
    if p_a == p_b:
        return 1.0
    side = 0 if p_a > p_b else 1

    def end(log_alpha: float) -> float:
        bounds = success_bounds(a, b, phi, 1 - np.exp(log_alpha))
        return float(bounds[side][0]) * (1 if side == 0 else -1)

    smallest = np.log(1e-15)
    if end(smallest) > 0:
        return 1e-15
    if end(-1e-12) <= 0:
        return 1.0
    return float(np.exp(optimize.brentq(end, smallest, -1e-12, xtol=1e-10)))


def success_phi(s_a: np.ndarray, s_b: np.ndarray) -> np.ndarray:
    """The correlation of the two groups' successes over their shared seed pairs, 0 where
    either is constant or there are fewer than MIN_PAIRS_FOR_PHI pairs."""
    flat_a, flat_b = s_a.reshape(len(s_a), -1), s_b.reshape(len(s_b), -1)
    if flat_a.shape[1] < MIN_PAIRS_FOR_PHI:
        return np.zeros(len(s_a))
    centred_a = flat_a - flat_a.mean(axis=1, keepdims=True)
    centred_b = flat_b - flat_b.mean(axis=1, keepdims=True)
    scale = np.sqrt((centred_a ** 2).sum(axis=1) * (centred_b ** 2).sum(axis=1))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(scale > 0, (centred_a * centred_b).sum(axis=1) / scale, 0.0)


def success_difference(y_a: np.ndarray, y_b: np.ndarray, threshold: float, paired: bool,
                       level: float = 0.95, with_p: bool = True) -> Difference:
    """compare.sql's success_diff, its interval and p, per study (without p: 0 where the
    interval excludes 0, else 1)."""
    s_a, s_b = (y_a >= threshold).astype(float), (y_b >= threshold).astype(float)
    rate_a, rate_b = success_rate(s_a, y_a), success_rate(s_b, y_b)
    phi = success_phi(s_a, s_b) if paired else np.zeros(len(y_a))
    low, high = success_bounds(rate_a, rate_b, phi, level)
    # p < 1 − level exactly where the interval excludes 0 (success_p); the simulation
    # reads its tests from the interval and the tests check the equivalence
    p = np.where((low > 0) | (high < 0), 0.0, 1.0) if not with_p else np.array([
        success_p(*args) for args in zip(rate_a.p, rate_a.n_eff, rate_a.df,
                                         rate_b.p, rate_b.n_eff, rate_b.df, phi)])
    return Difference(rate_a.p - rate_b.p, low, high, p)


def wins(y_a, y_b) -> np.ndarray:
    """h(a, b): 1 when a scores above b, ½ on a tie."""
    return (y_a > y_b) + 0.5 * (y_a == y_b)


def improvement(y_a: np.ndarray, y_b: np.ndarray, paired: bool,
                level: float = 0.95) -> Difference:
    """compare.sql's p_improvement and its interval per study (p: NaN, it has none).
    Not paired, the grids' seeds are read as the same seeds by position (the simulation's
    layout) and pairs sharing a seed are left out; seeds apart, every pair counts."""
    if paired:
        rate = success_rate(wins(y_a, y_b), y_a - y_b)
        low, high = wilson_rate_bounds(rate.p, rate.n_eff, rate.df, level)
        return Difference(rate.p, low, high, np.full(len(rate.p), np.nan))
    studies, a, b = y_a.shape
    flat_a, flat_b = y_a.reshape(studies, -1), y_b.reshape(studies, -1)
    weight, data = np.divmod(np.arange(a * b), b)
    apart = (weight[:, None] != weight[None, :]) & (data[:, None] != data[None, :])
    h = wins(flat_a[:, :, None], flat_b[:, None, :]) * apart
    place_a = (h.sum(axis=2) / apart.sum(axis=1)).reshape(studies, a, b)
    place_b = (h.sum(axis=1) / apart.sum(axis=0)).reshape(studies, a, b)
    theta, v_a, df_a = grid_variance(place_a)
    _, v_b, df_b = grid_variance(place_b)
    v = v_a + v_b
    with np.errstate(divide="ignore", invalid="ignore"):
        n_eff = np.where(v > 0, np.minimum(theta * (1 - theta) / v, a * b), a * b)
    df = np.where(v > 0, welch_df(v_a, df_a, v_b, df_b), np.nan)
    low, high = wilson_rate_bounds(theta, n_eff, df, level)
    return Difference(theta, low, high, np.full(studies, np.nan))


def _success_p_or_null(p_a, n_a, df_a, p_b, n_b, df_b, phi):
    if None in (p_a, n_a, p_b, n_b):
        return None
    return success_p(p_a, n_a, df_a, p_b, n_b, df_b, 0.0 if phi is None else phi)


def register_comparison_functions(con) -> None:
    """`success_difference_p(p_a, n_eff_a, df_a, p_b, n_eff_b, df_b, phi)` for compare.sql:
    the p-value its success interval implies (success_p)."""
    from analysis.quantiles import DOUBLE

    con.create_function("success_difference_p", _success_p_or_null, [DOUBLE] * 7, DOUBLE,
                        null_handling="special", side_effects=False)
