"""Generalized confidence intervals of the variance shares of a crossed weight x data
seed grid, as the DuckDB function `share_intervals` (lucky_tickets.sql) and as numpy for
seed planning (analysis/seed_planning.py).

The layout is the two-way random-effects model without replication over a weight
seeds x b data seeds: with the mean squares MS_w, MS_d, MS_e and their expectations
θ_w = σ²_e + b·σ²_w, θ_d = σ²_e + a·σ²_d, θ_e = σ²_e, the quantities
(a − 1)MS_w/θ_w, (b − 1)MS_d/θ_d and (a − 1)(b − 1)MS_e/θ_e are independent χ² with
a − 1, b − 1 and (a − 1)(b − 1) degrees of freedom. The generalized pivotal quantities
(Weerahandi, "Generalized confidence intervals", JASA 88, 1993; for ratios of this
very layout, the parts x operators gauge study, Hamada & Weerahandi, "Measurement
system assessment via generalized inference", J. Quality Technology 32, 2000) are

    θ*_w = (a − 1)·ms_w / W,   θ*_d = (b − 1)·ms_d / D,   θ*_e = (a − 1)(b − 1)·ms_e / E
    σ²*_w = max(0, (θ*_w − θ*_e)/b),  σ²*_d = max(0, (θ*_d − θ*_e)/a),  σ²*_e = θ*_e
    share*_k = σ²*_k / (σ²*_w + σ²*_d + σ²*_e)

with ms the observed mean squares and W, D, E drawn from their χ² distributions; the
interval of a share is the (1 − level)/2 and (1 + level)/2 quantiles of share* over
DRAWS draws. Unlike the percentile bootstrap over seeds, it does not shrink the
components; coverage measured by simulation in tests/test_share_intervals.py and
docs/analysis.md. The draws come from a generator seeded by (a, b), so the same mean
squares give the same interval in any query and any row order.
"""

from __future__ import annotations

from functools import lru_cache

import duckdb
import numpy as np
import pyarrow as pa

try:
    from duckdb.sqltypes import DOUBLE
except ImportError:  # duckdb < 2
    from duckdb.typing import DOUBLE

#: draws of the pivots per interval: the Monte Carlo error of a 2.5 % quantile is then
#: about 0.003 on the share scale
DRAWS = 10_000
PARTS = ("weight", "data", "residual")
BOUNDS = tuple(f"{part}_{end}" for part in PARTS for end in ("low", "high"))


@lru_cache(maxsize=256)
def _chi2_draws(a: int, b: int, draws: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """W/(a − 1), D/(b − 1), E/((a − 1)(b − 1)): the χ² draws scaled by their degrees of
    freedom, the same for every grid of a x b seeds."""
    rng = np.random.default_rng([a, b, draws])
    df = (a - 1, b - 1, (a - 1) * (b - 1))
    return tuple(rng.chisquare(k, draws) / k for k in df)


def _independent_draws(a: int, b: int, studies: int, draws: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """_chi2_draws, fresh for each of `studies` studies: shape (studies, draws) each."""
    rng = np.random.default_rng([a, b, draws, studies])
    df = (a - 1, b - 1, (a - 1) * (b - 1))
    return tuple(rng.chisquare(k, (studies, draws)) / k for k in df)


def share_draws(ms_weight, ms_data, ms_residual, a: int, b: int, draws: int = DRAWS,
                independent: bool = False) -> np.ndarray:
    """share* of each part, shape (3, studies, draws), for mean squares of shape
    (studies,) from grids of a x b seeds; NaN where every σ²* is 0. The draws are the
    same for every study (as the DuckDB function's), or with ``independent`` fresh per
    study: seed planning takes a median over simulated studies, whose Monte Carlo
    errors then average out instead of adding up."""
    studies = len(np.atleast_1d(ms_weight))
    w, d, e = (_independent_draws(int(a), int(b), studies, draws) if independent
               else _chi2_draws(int(a), int(b), draws))
    theta_w = np.asarray(ms_weight, dtype=float)[:, None] / w
    theta_d = np.asarray(ms_data, dtype=float)[:, None] / d
    theta_e = np.asarray(ms_residual, dtype=float)[:, None] / e
    sigma2 = np.stack([np.maximum(theta_w - theta_e, 0) / b, np.maximum(theta_d - theta_e, 0) / a, theta_e])
    total = sigma2.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, sigma2 / total, np.nan)


#: studies whose draws are worked on at once: 16 × 10,000 draws of three shares stay in
#: the CPU's cache, where 1,000 studies at once (240 MB of temporaries) took 4.6 times
#: longer for the same bits
BLOCK = 16


def share_bounds(ms_weight, ms_data, ms_residual, a: int, b: int, level: float = 0.95,
                 draws: int = DRAWS, independent: bool = False) -> np.ndarray:
    """The intervals of the three shares, shape (studies, 6) in BOUNDS order; NaN for a
    grid whose values are all equal (no variance to share out). With the draws shared
    by every study, in blocks of BLOCK studies (each study's interval is its own: the
    same bits in any block); ``independent`` draws depend on the number of studies, so
    those come in one block."""
    columns = [np.atleast_1d(np.asarray(c, dtype=float)) for c in (ms_weight, ms_data, ms_residual)]
    if independent or len(columns[0]) <= BLOCK:
        return _bounds(*columns, a, b, level, draws, independent)
    return np.concatenate([_bounds(*(c[start:start + BLOCK] for c in columns), a, b, level, draws, False)
                           for start in range(0, len(columns[0]), BLOCK)])


def _bounds(ms_weight, ms_data, ms_residual, a: int, b: int, level: float, draws: int,
            independent: bool) -> np.ndarray:
    shares = share_draws(ms_weight, ms_data, ms_residual, a, b, draws, independent)
    constant = ~np.isfinite(shares[0]).all(axis=1)
    quantiles = np.quantile(np.nan_to_num(shares), [(1 - level) / 2, (1 + level) / 2], axis=2)
    bounds = np.moveaxis(quantiles, 0, -1)  # (3, studies, 2)
    bounds[:, constant] = np.nan
    return np.concatenate(list(bounds), axis=1)


def _udf(ms_weight, ms_data, ms_residual, a, b, level) -> pa.StructArray:
    """share_intervals over a chunk of rows, grouped by their (a, b, level)."""
    columns = [np.asarray(c.to_numpy(zero_copy_only=False), dtype=float)
               for c in (ms_weight, ms_data, ms_residual, a, b, level)]
    out = np.full((len(columns[0]), len(BOUNDS)), np.nan)
    valid = np.isfinite(np.stack(columns)).all(axis=0) & (columns[3] >= 2) & (columns[4] >= 2)
    keys = {(columns[3][i], columns[4][i], columns[5][i]) for i in np.flatnonzero(valid)}
    for key_a, key_b, key_level in sorted(keys):
        rows = valid & (columns[3] == key_a) & (columns[4] == key_b) & (columns[5] == key_level)
        out[rows] = share_bounds(columns[0][rows], columns[1][rows], columns[2][rows],
                                 int(key_a), int(key_b), float(key_level))
    arrays = [pa.array(out[:, k], mask=np.isnan(out[:, k])) for k in range(len(BOUNDS))]
    return pa.StructArray.from_arrays(arrays, names=list(BOUNDS))


def register_share_intervals(con: duckdb.DuckDBPyConnection) -> None:
    """`share_intervals(ms_weight, ms_data, ms_residual, a, b, level)`: a struct of
    weight_low, weight_high, data_low, ... residual_high."""
    struct = duckdb.struct_type({name: DOUBLE for name in BOUNDS})
    con.create_function("share_intervals", _udf, [DOUBLE] * 6, struct, type="arrow", side_effects=False)
