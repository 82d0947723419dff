"""The interval of a mean over seeds, in numpy: the same formulas as the SQL macros
crossed_mean_variance, crossed_mean_df and seed_mean_interval (analysis/sql/macros/
macros.sql), for seed planning (analysis/seed_planning.py) and the coverage simulation
(tests/test_mean_interval.py), which checks the two against each other; and success.sql's
interval of a success rate over seeds (success_interval.sql's seed_success_interval:
success_rate, wilson_rate_bounds), for seed planning and compare_interval.py.

For a crossed grid of a weight x b data seeds with mean squares MS_w, MS_d, MS_e (the
two-way random-effects layout without replication), P the larger of MS_w and MS_d on
k_P degrees of freedom and Q the other on k_Q:

    V = (max(P, MS_e) + max(Q − MS_e, 0)) / (ab)
    ν = (max(P, MS_e) + max(Q − MS_e, 0))² / (max(P, MS_e)²/k_P + max(Q − MS_e, 0)²/k_Q)

and, when neither component is positive (P ≤ MS_e), V = MS_e/(ab) on min(a, b) − 1
degrees of freedom: the grid cannot say which seed kind varies, so it is given the
fewer seeds'. 
and the interval is Wilson's score interval at the effective number of seed pairs
n_eff = m(1 − m)/V with t_ν in place of z (Korn & Graubard, "Confidence intervals for
proportions with small expected number of positive counts estimated from survey
data", Survey Methodology 24, 1998). When every cell ties (V = 0), Wilson's interval
over the n cells with z: the largest variance a mean of n values in [0, 1] can have.
docs/analysis.md says why this V and ν, and gives the coverage measured.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import special

#: a variance of the mean at or below this is rounding of cells that tie (macros.sql's
#: rounding_tie): a real spread of accuracies on up to 10^6 questions gives over 1e-18
ROUNDING_TIE = 1e-24


def crossed_variance_df(ms_w, ms_d, ms_e, a: int, b: int) -> tuple[np.ndarray, np.ndarray]:
    """V, the variance of the grand mean of a x b crossed cells, and its degrees of freedom ν."""
    ms_w, ms_d, ms_e = (np.asarray(x, dtype=float) for x in (ms_w, ms_d, ms_e))
    # ties within 1e-9 go to the same side in SQL and here, whatever the rounding
    weight_larger = ms_w >= ms_d * (1 - 1e-9)
    larger, smaller = np.maximum(ms_w, ms_d), np.minimum(ms_w, ms_d)
    k_larger = np.where(weight_larger, a - 1, b - 1)
    k_smaller = np.where(weight_larger, b - 1, a - 1)
    excess = np.maximum(smaller - ms_e, 0)
    base = np.maximum(larger, ms_e)
    total = base + excess
    with np.errstate(divide="ignore", invalid="ignore"):
        df = total ** 2 / (base ** 2 / k_larger + excess ** 2 / k_smaller)
    neither = larger <= ms_e * (1 + 1e-9)
    return total / (a * b), np.where(neither, min(a, b) - 1, df)


def t_quantile(level: float, df) -> np.ndarray:
    """t_ν at (1 + level)/2, ν at least 1 (an undefined ν, no spread at all, counts as 1)."""
    df = np.maximum(np.nan_to_num(np.asarray(df, dtype=float), nan=1.0), 1.0)
    return special.stdtrit(df, (1 + level) / 2)


def wilson_bounds(mean, variance, t, cells, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Wilson's interval at n_eff = m(1 − m)/V with t for z; when V = 0 (every one of the
    `cells` ties), Wilson's over the cells with z; and the normal interval, clipped, for a
    mean of 0 or 1 that somehow has a spread."""
    m, v, t, cells = np.broadcast_arrays(*(np.asarray(x, dtype=float) for x in (mean, variance, t, cells)))
    tied = v <= ROUNDING_TIE
    inside = (m > 0) & (m < 1) & ~tied
    z = np.full_like(t, special.ndtri((1 + level) / 2))
    with np.errstate(divide="ignore", invalid="ignore"):
        n = np.where(inside, m * (1 - m) / v, np.where(tied, cells, 1.0))
        t = np.where(tied, z, t)
        centre = (m + t * t / (2 * n)) / (1 + t * t / n)
        half = t / (1 + t * t / n) * np.sqrt(m * (1 - m) / n + t * t / (4 * n * n))
    spread = t * np.sqrt(np.maximum(v, 0))
    wilson = inside | tied
    # a bound at the mean's own end is exact (Wilson's formula leaves 1e-17 there)
    low = np.where(wilson, np.where(m <= 0, 0.0, centre - half), m - spread)
    high = np.where(wilson, np.where(m >= 1, 1.0, centre + half), m + spread)
    return np.maximum(low, 0), np.minimum(high, 1)


def crossed_mean_bounds(mean, ms_w, ms_d, ms_e, a: int, b: int,
                        level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """variance.sql's mean_low and mean_high for crossed grids of a x b seeds."""
    variance, df = crossed_variance_df(ms_w, ms_d, ms_e, a, b)
    return wilson_bounds(mean, variance, t_quantile(level, df), a * b, level)


def grid_mean_squares(y: np.ndarray) -> tuple[np.ndarray, ...]:
    """Grand mean, MS_weight, MS_data, MS_residual of grids y of shape (studies, a, b)."""
    _, a, b = y.shape
    m = y.mean(axis=(1, 2), keepdims=True)
    rows, columns = y.mean(axis=2, keepdims=True), y.mean(axis=1, keepdims=True)
    ms_w = b * ((rows - m) ** 2).sum(axis=(1, 2)) / (a - 1)
    ms_d = a * ((columns - m) ** 2).sum(axis=(1, 2)) / (b - 1)
    ms_e = ((y - rows - columns + m) ** 2).sum(axis=(1, 2)) / ((a - 1) * (b - 1))
    return m[:, 0, 0], ms_w, ms_d, ms_e


def grid_bounds(y: np.ndarray, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """The mean's interval of each crossed grid y[i] (shape (studies, a, b))."""
    _, a, b = y.shape
    return crossed_mean_bounds(*grid_mean_squares(y), a, b, level)


def grid_variance(y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean, V (variance of the mean over seeds) and ν of grids y (studies, a, b):
    crossed seeds when a, b >= 2, else the cells as independent."""
    _, a, b = y.shape
    if a >= 2 and b >= 2:
        m, ms_w, ms_d, ms_e = grid_mean_squares(y)
        v, df = crossed_variance_df(ms_w, ms_d, ms_e, a, b)
        return m, v, df
    flat = y.reshape(len(y), -1)
    n = flat.shape[1]
    return flat.mean(axis=1), flat.var(axis=1, ddof=1) / n, np.full(len(y), n - 1.0)


def wilson(p, n, z) -> tuple[np.ndarray, np.ndarray]:
    """Wilson's score interval of a share p out of n (exactly 0 and 1 at its own end)."""
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return np.where(p <= 0, 0.0, np.maximum(centre - half, 0)), np.where(p >= 1, 1.0, np.minimum(centre + half, 1))


@dataclass(frozen=True)
class SuccessRate:
    """success.sql's interval parts of each study's success rate: the rate, the effective
    number of seed pairs before the t adjustment and its degrees of freedom (NaN: Wilson
    with z, no adjustment)."""

    p: np.ndarray
    n_eff: np.ndarray
    df: np.ndarray


def success_rate(s: np.ndarray, y: np.ndarray) -> SuccessRate:
    """success.sql's effective n and ν from grids of successes s and accuracies y."""
    _, a, b = s.shape
    n = a * b
    p, v_s, df_s = grid_variance(s)
    if a < 2 or b < 2:
        return SuccessRate(p, np.full(len(p), float(n)), np.full(len(p), np.nan))
    _, v_y, df_y = grid_variance(y)
    s2_y = y.reshape(len(y), -1).var(axis=1, ddof=1)
    inside = (p > 0) & (p < 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        n_inside = np.minimum(p * (1 - p) / v_s, n)
        n_bound = np.where(s2_y > 0, n / np.maximum(v_y * n / s2_y, 1), n)
    return SuccessRate(p, np.where(inside, n_inside, n_bound),
                       np.where(inside, df_s, np.nan_to_num(df_y, nan=n - 1)))


def wilson_rate_bounds(p, n_eff, df, level: float) -> tuple[np.ndarray, np.ndarray]:
    """success.sql's p_success_low/high: Wilson at n_eff·(z/t_ν)², exact at 0 and 1."""
    z = special.ndtri((1 + level) / 2)
    with np.errstate(invalid="ignore", divide="ignore"):
        adjust = np.where(np.isnan(df), 1.0, (z / t_quantile(level, df)) ** 2)
    return wilson(p, n_eff * adjust, z)
