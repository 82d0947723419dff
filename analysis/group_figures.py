"""A configuration group's figures from the report, one group a figure: what its MLflow
parent run holds as artifacts (issue 54). The code that runs a study asks for them
(orchestrator.running.group_answers) and hands the files to the MLflow writers, which
draw nothing themselves.

Each figure is the report's own, drawn by the same function from the same SQL file's
rows (analysis/questions.py names them), with the rows of one group: accuracy against
test length with the group's mean and interval (final_accuracy.sql, variance.sql),
its success probability (success.sql), and for a group that crosses weight and data
seeds its seed heatmap and variance shares per length (lucky_tickets.sql), as PNG. The
bootstraps the report keeps for comparison draw nothing here, so they are not run
(resamples 0). A figure with nothing to draw (a group that crosses no seeds) is left
out.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from analysis.query import open_results, read_once, run_sql_file, sql_file

#: the files each figure reads, with the parameters that leave the bootstraps out
QUESTION_PARAMS: dict[str, dict[str, str]] = {
    "final_accuracy.sql": {},
    "variance.sql": {"resamples": "0"},
    "success.sql": {},
    "lucky_tickets.sql": {"resamples": "0"},
}
#: the report's file name of a figure -> (its drawing function in analysis.plots, the
#: files whose rows it takes, in its order)
FIGURES: dict[str, tuple[str, tuple[str, ...]]] = {
    "accuracy_by_group.png": ("accuracy_by_group", ("final_accuracy.sql", "variance.sql")),
    "success.png": ("success_probability", ("success.sql",)),
    "seed_heatmap.png": ("seed_heatmaps", ("lucky_tickets.sql",)),
    "variance_shares_by_length.png": ("variance_shares_by_length", ("lucky_tickets.sql",)),
}


def group_rows(root: Path, study: str, group_ids: Collection[str] | None, threshold: float | None = None,
               trial_ids: Collection[str] | None = None,
               questions: Mapping[str, Mapping[str, str]] = QUESTION_PARAMS,
               groups_of: Collection[str] | None = None) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """group id -> question -> its rows of that group, for ``group_ids`` alone (None: every
    group the rows name, or with ``groups_of``, the groups of those trials); with
    ``trial_ids`` (every trial of those groups) only their files are read. ``questions``:
    file -> parameters (the figures' by default); ``threshold`` is success.sql's."""
    params = {question: dict(given) for question, given in questions.items()}
    if threshold is not None and "success.sql" in params:
        params["success.sql"]["threshold"] = str(threshold)
    found: dict[str, dict[str, list[dict[str, Any]]]] = {g: {q: [] for q in params} for g in group_ids or ()}
    if group_ids is not None and not group_ids:
        return found
    with open_results(root, study, trial_ids) as con:
        read_once(con, groups=group_ids, groups_of=groups_of)
        for question, given in params.items():
            for row in run_sql_file(con, sql_file(question), given).to_pylist():
                if group_ids is None:
                    found.setdefault(row["group_id"], {q: [] for q in params})
                if row["group_id"] in found:
                    found[row["group_id"]][question].append(row)
    return found


def draw_figures(rows: Mapping[str, Mapping[str, list[dict[str, Any]]]], folder: Path) -> dict[str, dict[str, Path]]:
    """Draw each group's figures from its rows (group id -> question -> rows, as
    `group_rows` gives them) into ``folder/<group id>/`` as PNG (the UI shows PNG; their
    SVG would cost a quarter more); return group id -> the figure's file name -> its PNG
    (a group without a finished trial has none)."""
    from analysis import figures, plots  # matplotlib: only when figures are drawn

    drawn: dict[str, dict[str, Path]] = {}
    with figures.png_only():
        for group_id, tables in rows.items():
            for name, (function, questions) in FIGURES.items():
                path = getattr(plots, function)(*(tables[q] for q in questions), Path(folder) / group_id / name)
                if path is not None:
                    drawn.setdefault(group_id, {})[name] = path
    return drawn


def draw_group_figures(root: Path, study: str, group_ids: Collection[str], folder: Path,
                       threshold: float | None = None,
                       trial_ids: Collection[str] | None = None) -> dict[str, dict[str, Path]]:
    """The groups' figures (`draw_figures`) from their rows read now; ``threshold``: the
    success threshold (success.sql's default without it); ``trial_ids``: every trial of
    the groups, whose files alone are read."""
    return draw_figures(group_rows(root, study, group_ids, threshold, trial_ids), folder)
