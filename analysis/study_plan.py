"""`lg-study plan` over a stored study: its crossed groups' fits (lucky_tickets.sql) as
pilots for seed planning (analysis/seed_planning.py, which stays free of the results
store so that the report's records can use it)."""

from __future__ import annotations

from analysis.query import open_results, run_sql_file, sql_file
from analysis.seed_planning import check_target, group_plans


def plan_study(results_root, study: str, metric: str, half_width: float, digits: int | None = None,
               data_seeds: int | None = None, threshold: float = 0.9) -> list[dict]:
    """`lg-study plan`: every group of a study as a pilot (lucky_tickets.sql's fit)."""
    check_target(metric, half_width)
    with open_results(results_root, study) as con:
        lucky = run_sql_file(con, sql_file("lucky_tickets.sql"), {"resamples": "2"}).to_pylist()
    if not lucky:
        raise ValueError(f"study {study!r} has no group that crosses weight and data seeds to serve as a pilot")
    return group_plans(lucky, metric, half_width, digits, data_seeds, threshold)
