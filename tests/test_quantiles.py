"""The chi-square, F and t quantiles registered in DuckDB (analysis/quantiles.py) are
scipy.stats's ppf bit for bit, computed without importing scipy.stats."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest
from scipy import stats

from analysis.quantiles import chi2_quantile, f_quantile, t_quantile

PROBABILITIES = (0.0, 1e-12, 0.0005, 0.025, 0.05, 0.1, 0.3, 0.5, 0.7, 0.9, 0.95, 0.975, 0.9995, 1 - 1e-12, 1.0,
                 -0.1, 1.1, math.nan)
DEGREES = (0.5, 1.0, 2.0, 3.0, 7.5, 14.0, 19.0, 30.0, 299.0, 1e6, 0.0, -1.0, math.nan)


def same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


@pytest.mark.parametrize("p", PROBABILITIES)
def test_t_and_chi_square_quantiles_are_scipy_stats_bit_for_bit(p: float) -> None:
    for df in DEGREES:
        assert same(t_quantile(p, df), float(stats.t.ppf(p, df))), (p, df)
        assert same(chi2_quantile(p, df), float(stats.chi2.ppf(p, df))), (p, df)


@pytest.mark.parametrize("p", PROBABILITIES)
def test_f_quantiles_are_scipy_stats_bit_for_bit(p: float) -> None:
    for df1 in DEGREES:
        for df2 in (1.0, 4.0, 28.0, 0.0, math.nan):
            assert same(f_quantile(p, df1, df2), float(stats.f.ppf(p, df1, df2))), (p, df1, df2)


def test_a_quantile_does_not_load_scipy_stats() -> None:
    code = ("import sys; from analysis.quantiles import t_quantile; t_quantile(0.975, 4.0); "
            "print('scipy.stats' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                          text=True).stdout.strip() == "False"
