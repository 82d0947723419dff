"""lucky_tickets.sql's intervals of the variance components (σ²_weight, σ²_data: modified
large-sample; σ²_residual: exact chi-square), their coverage measured by simulation at
a laptop's 3 x 5 seeds and, in the slow tier, 8 x 8 and a cluster's 24 x 20; and the
residual's interval against scipy. The truth: y = 0.5 + u_w + v_d + e with the variances
the statistics issue simulated (0.15², 0.05², 0.05²), unclipped."""

from __future__ import annotations

import numpy as np
import pytest
from analysis_rows import run
from memory_study import crossed_study, normal_tables
from scipy import stats

SIGMA2 = (0.15 ** 2, 0.05 ** 2, 0.05 ** 2)
PARTS = ("weight", "data", "residual")


def coverage(a: int, b: int, count: int, seed: int) -> dict[str, float]:
    tables = normal_tables(np.random.default_rng(seed), count, a, b, SIGMA2)
    with crossed_study(tables).connect() as con:
        rows = {r["group_id"]: r for r in run(con, "lucky_tickets", resamples=2)}
    assert len(rows) == count
    truth = dict(zip(PARTS, SIGMA2, strict=True))
    return {part: float(np.mean([r[f"sigma2_{part}_low"] <= truth[part] <= r[f"sigma2_{part}_high"]
                                 for r in rows.values()])) for part in PARTS}


def test_the_residual_interval_is_the_exact_chi_square_one():
    y = normal_tables(np.random.default_rng(1), 1, 4, 6, SIGMA2)[0]
    with crossed_study([y]).connect() as con:
        row = run(con, "lucky_tickets", resamples=2)[0]
    df = 3 * 5
    ss = row["ms_residual"] * df
    assert (row["sigma2_residual_low"], row["sigma2_residual_high"]) == pytest.approx(
        (ss / stats.chi2.ppf(0.975, df), ss / stats.chi2.ppf(0.025, df)), rel=1e-9)
    for part in PARTS:
        assert row[f"sigma2_{part}_low"] <= row[f"sigma2_{part}"] <= row[f"sigma2_{part}_high"]


def test_component_intervals_hold_their_level_at_three_by_five_seeds():
    covered = coverage(3, 5, 1000, seed=35)
    assert all(0.93 <= value <= 0.97 for value in covered.values()), covered


@pytest.mark.slow
@pytest.mark.parametrize("a, b", [(8, 8), (24, 20)])
def test_component_intervals_hold_their_level_at_cluster_designs(a, b):
    covered = coverage(a, b, 1000, seed=a * b)
    assert all(0.93 <= value <= 0.97 for value in covered.values()), covered


def test_the_report_says_in_words_when_the_seeds_are_too_few():
    from analysis.report_html import with_intervals
    from analysis.report_sections import too_few_seeds as _too_few_seeds
    from analysis.report_sections import too_few_seeds_words as _too_few_seeds_words

    def group_row(a: int, b: int) -> dict:
        y = normal_tables(np.random.default_rng(a), 1, a, b, SIGMA2)[0]
        with crossed_study([y]).connect() as con:
            return with_intervals(run(con, "lucky_tickets", resamples=200)[0])

    laptop, cluster = group_row(3, 5), group_row(24, 20)
    assert _too_few_seeds(laptop) and not _too_few_seeds(cluster)
    words = _too_few_seeds_words(laptop)
    assert "with 3 weight × 5 data seeds" in words and "cannot tell" in words and "a − 1 = 2" in words

