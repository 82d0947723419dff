"""Quantiles of the chi-square and F distributions as DuckDB functions.

The intervals of variance components (replicates.sql) need quantiles at degrees of
freedom that DuckDB cannot compute. `register_quantiles` gives a connection
`chi2_quantile(p, df)`, `f_quantile(p, df1, df2)` and `t_quantile(p, df)`: the
p-quantiles (lower tail) that scipy.stats's ``ppf`` gives, computed by the scipy.special
functions ``ppf`` calls (``stdtrit``, ``gammaincinv``, ``fdtri``) with its argument checks:
importing scipy.stats cost `lg-study status` 0.4-0.6 s of its 3 s budget for one t
quantile (`tests/test_quantiles.py` checks equality bit for bit). `lg-study query` and
the report register them on every connection; in the DuckDB command-line client the
files that call them cannot run.
"""

from __future__ import annotations

import math

import duckdb

try:
    from duckdb.sqltypes import DOUBLE
except ImportError:  # duckdb < 2
    from duckdb.typing import DOUBLE


def _ppf(p: float, dfs: tuple[float, ...], support: tuple[float, float], inside) -> float:
    """What scipy.stats's ppf gives: NaN off p in [0, 1] or at a degree of freedom <= 0,
    the support's ends at p = 0 and 1, ``inside()`` between."""
    if not (0.0 <= p <= 1.0 and all(df > 0 for df in dfs)):
        return math.nan
    if p in (0.0, 1.0):
        return support[int(p)]
    return float(inside())


def chi2_quantile(p: float, df: float) -> float:
    from scipy.special import gammaincinv  # imported on first use

    return _ppf(p, (df,), (0.0, math.inf), lambda: 2 * gammaincinv(df / 2, p))


def f_quantile(p: float, df1: float, df2: float) -> float:
    from scipy.special import fdtri

    return _ppf(p, (df1, df2), (0.0, math.inf), lambda: fdtri(df1, df2, p))


def t_quantile(p: float, df: float) -> float:
    from scipy.special import stdtrit

    return _ppf(p, (df,), (-math.inf, math.inf), lambda: stdtrit(df, p))


def t_cdf(x: float, df: float) -> float:
    """P(T_ν <= x), what scipy.stats.t.cdf gives (df = inf: the normal's); compare.sql's
    p-values."""
    from scipy.special import stdtr

    if math.isnan(x) or not df > 0:
        return math.nan
    return float(stdtr(df, x))


def register_quantiles(con: duckdb.DuckDBPyConnection) -> None:
    con.create_function("chi2_quantile", chi2_quantile, [DOUBLE, DOUBLE], DOUBLE, side_effects=False)
    con.create_function("t_quantile", t_quantile, [DOUBLE, DOUBLE], DOUBLE, side_effects=False)
    con.create_function("f_quantile", f_quantile, [DOUBLE, DOUBLE, DOUBLE], DOUBLE, side_effects=False)
    con.create_function("t_cdf", t_cdf, [DOUBLE, DOUBLE], DOUBLE, side_effects=False)
