"""Quantiles of the chi-square and F distributions as DuckDB functions.

The intervals of variance components (replicates.sql) need quantiles at degrees of
freedom that DuckDB cannot compute. `register_quantiles` gives a connection
`chi2_quantile(p, df)`, `f_quantile(p, df1, df2)` and `t_quantile(p, df)`: the
p-quantiles (lower tail) from scipy.stats. `lg-study query` and the report register them on every connection; in the
DuckDB command-line client the files that call them cannot run.
"""

from __future__ import annotations

import duckdb

try:
    from duckdb.sqltypes import DOUBLE
except ImportError:  # duckdb < 2
    from duckdb.typing import DOUBLE


def chi2_quantile(p: float, df: float) -> float:
    from scipy.stats import chi2  # imported on first use: it costs a few tenths of a second

    return float(chi2.ppf(p, df))


def f_quantile(p: float, df1: float, df2: float) -> float:
    from scipy.stats import f

    return float(f.ppf(p, df1, df2))


def t_quantile(p: float, df: float) -> float:
    from scipy.stats import t

    return float(t.ppf(p, df))


def register_quantiles(con: duckdb.DuckDBPyConnection) -> None:
    con.create_function("chi2_quantile", chi2_quantile, [DOUBLE, DOUBLE], DOUBLE, side_effects=False)
    con.create_function("t_quantile", t_quantile, [DOUBLE, DOUBLE], DOUBLE, side_effects=False)
    con.create_function("f_quantile", f_quantile, [DOUBLE, DOUBLE, DOUBLE], DOUBLE, side_effects=False)
