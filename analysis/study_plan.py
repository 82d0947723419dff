"""`lg-study plan` over a stored study: its crossed groups' fits (lucky_tickets.sql) and
its one-way groups' (one_way_pilots.sql: one seed kind varied, the other held) as
pilots for seed planning (analysis/seed_planning.py and analysis/one_way_planning.py,
which stay free of the results store so that the report's records can use them)."""

from __future__ import annotations

from analysis.one_way_planning import one_way_plan_row
from analysis.query import open_results, run_sql_file, sql_file
from analysis.seed_planning import check_target, group_plans
from results_contract.groups import short_labels


def plan_study(results_root, study: str, metric: str, half_width: float, digits: int | None = None,
               data_seeds: int | None = None, threshold: float = 0.9, level: float = 0.95) -> list[dict]:
    """`lg-study plan`: every group of a study that can be a pilot, crossed or one-way."""
    check_target(metric, half_width)
    with open_results(results_root, study) as con:
        labels = [label for (label,) in con.sql("select distinct group_label from groups").fetchall()]
        lucky = run_sql_file(con, sql_file("lucky_tickets.sql"), {"resamples": "2"}).to_pylist()
        one_way = run_sql_file(con, sql_file("one_way_pilots.sql"),
                               {"digits": str(digits)} if digits is not None else {}).to_pylist()
    one_way = [row for row in one_way if row["at_digits"] == (digits or 0)]
    if not lucky and not one_way:
        raise ValueError(f"study {study!r} has no group to serve as a pilot: none crosses weight and data "
                         "seeds, and none runs at least 2 seeds of one kind (weight or data)")
    rows = group_plans(lucky, metric, half_width, digits, data_seeds, threshold, level) if lucky else []
    rows += [one_way_plan_row(row, metric, half_width, data_seeds, threshold, level) for row in one_way]
    # the group by the short label the run table and the report show (its full one in the report's key)
    short = short_labels(labels)
    # every row the same columns (pyarrow takes a table's columns from its first row); a
    # crossed pilot sees both seed kinds' variance
    return [{**row, "group": short.get(row["group"], row["group"]),
             "not in this plan": row.get("not in this plan", "")} for row in rows]
