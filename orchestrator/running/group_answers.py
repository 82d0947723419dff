"""What each configuration group's MLflow parent run shows, asked of the analysis by the
code that runs the study and handed to the MLflow thread (orchestrator.mlflow_tracking:
group_runs logs it and asks nothing itself).

The numbers are the SQL questions' own, at each length the group was evaluated at: the
mean accuracy over the seeds and its interval (variance.sql), the share of trials
that succeed and its interval (success.sql), the finished trials measured, and, for
a group that crosses weight and data seeds, the weight / data / residual shares of
the variance (lucky_tickets.sql, by_length). Bootstraps kept for comparison are not
shown, so they are not drawn (resamples 0).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import duckdb

from analysis.group_figures import QUESTION_PARAMS as FIGURE_QUESTIONS
from analysis.group_figures import draw_figures, group_rows
from orchestrator.mlflow_tracking.group_runs import GroupNumbers
from orchestrator.mlflow_tracking.handed import Handed
from orchestrator.running.trial_plots import accuracy_plot
from orchestrator.store.results_store import read_trial_groups, read_trial_row, rows_print
from orchestrator.studies.metric_names import length_metric
from results_contract import groups

if TYPE_CHECKING:
    from orchestrator.studies.study import Study

#: metric on a parent -> (question, its column), one point per evaluated length
LENGTH_METRICS: dict[str, tuple[str, str]] = {
    "mean": ("variance.sql", "mean"),
    "mean_low": ("variance.sql", "mean_low"),
    "mean_high": ("variance.sql", "mean_high"),
    "trials": ("variance.sql", "n_trials"),
    "p_success": ("success.sql", "p_success"),
    "p_success_low": ("success.sql", "p_success_low"),
    "p_success_high": ("success.sql", "p_success_high"),
    "share_weight": ("lucky_tickets.sql", "component_share_weight"),
    "share_data": ("lucky_tickets.sql", "component_share_data"),
    "share_residual": ("lucky_tickets.sql", "component_share_residual"),
}
#: reads of a group's files before its failure is said: a running trial's file replaced
#: between DuckDB's threads' opens of it reads as damaged ("TProtocolException: Invalid
#: data"; seen in test_mlflow_server with two trials rewriting theirs), and reads whole
#: a moment later
READ_TRIES = 3
READ_PAUSE_S = 0.2
T = TypeVar("T")


def _read_again_if_replaced(ask: Callable[[], T]) -> T:
    """``ask()``, asked again (READ_TRIES in all) when DuckDB fails on a file it read."""
    for attempt in range(1, READ_TRIES):
        try:
            return ask()
        except duckdb.Error:
            time.sleep(READ_PAUSE_S * attempt)
    return ask()


#: what no bootstrap is drawn for: the parents show none of the bootstrap columns
QUESTION_PARAMS: dict[str, dict[str, str]] = {
    "variance.sql": {"resamples": "0"},
    "success.sql": {},
    "lucky_tickets.sql": {"resamples": "0"},
}
#: the files a parent's numbers read (with seed_counts.sql's trials per group), and the
#: files of both its numbers and its figures, read in one pass for a group
NUMBERS_QUESTIONS: dict[str, dict[str, str]] = {"seed_counts.sql": {}, **QUESTION_PARAMS}
PARENT_QUESTIONS: dict[str, dict[str, str]] = {**NUMBERS_QUESTIONS, **FIGURE_QUESTIONS}


def _length_rows(question: str, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A question's rows of one group, one per length: lucky_tickets.sql repeats a group's
    numbers on each weight seed's row, with those of each length in `by_length`."""
    if question != "lucky_tickets.sql":
        return rows
    return next((row["by_length"] for row in rows if row.get("by_length")), [])


def group_numbers(root: Path, study: str, names: Mapping[str, str], threshold: float | None = None,
                  trials: Collection[str] | None = None) -> list[GroupNumbers]:
    """Every group of the study with a finished trial, as its parent run shows it; with
    ``trials`` (trial ids, every trial of the groups wanted), those trials' groups alone,
    read from their files alone: what it costs is theirs, not the study's. ``names``:
    group id -> short label (else the group's label); ``threshold``: the success
    threshold (success.sql's default without it)."""
    try:
        rows = group_rows(root, study, None, threshold, trials, NUMBERS_QUESTIONS, groups_of=trials)
    except LookupError:  # no results yet
        return []
    return numbers_of(rows, names)


def numbers_of(rows: Mapping[str, Mapping[str, list[dict[str, Any]]]], names: Mapping[str, str]) -> list[GroupNumbers]:
    """The parents' numbers from their groups' rows (group id -> question -> rows, as
    analysis.group_figures.group_rows reads NUMBERS_QUESTIONS), in seed_counts.sql's
    order: every group with a finished trial."""
    counts = sorted((row for tables in rows.values() for row in tables["seed_counts.sql"]),
                    key=lambda row: (row["group_label"], row["group_id"]))
    numbers = []
    for row in counts:
        finished = row["trials"] - row["unfinished"]
        if not finished:
            continue
        tables = rows[row["group_id"]]
        metrics: dict[str, float] = {}
        for name, (question, column) in LENGTH_METRICS.items():
            for answer in _length_rows(question, tables[question]):
                if answer.get(column) is not None:
                    metrics[length_metric(name, answer["digits"])] = answer[column]
        tags = {"weight_seeds": str(len(row["weight_seeds"])), "trials": str(row["trials"])}
        data_seeds = [answer["grid_data_seeds"] for answer in tables["lucky_tickets.sql"] if answer.get("grid_data_seeds")]
        if data_seeds:
            tags["data_seeds"] = str(data_seeds[-1])
        name = names.get(row["group_id"]) or row["group_label"]
        numbers.append(GroupNumbers(row["group_id"], name, finished, metrics, tags))
    return numbers


def short_names(study: Study) -> dict[str, str]:
    """Group id -> the group's short label among the study's groups: its parent's name."""
    return {groups.group_id(config): study.short_label(config) for config in study.trials}


class GroupAnswers:
    """A study's groups as its MLflow thread is handed them (Handed): their numbers and
    figures asked of the analysis, each for the groups named alone, whose trials this
    knows: the study's planned trials by their config, and a trial it is told of that
    no config names (a seed `seeds: until` added) by its trials row. The MLflow thread
    asks one thing at a time."""

    def __init__(self, study: Study, root: Path) -> None:
        until = study.spec.seeds.until
        #: successes counted at the threshold of a `seeds: until` target
        self.threshold = until.threshold if until is not None else None
        self.root, self.study, self.names = root, study.name, short_names(study)
        self.group_of = {config.trial_id: groups.group_id(config) for config in study.trials}
        #: group id -> its trials the study file plans (a `seeds: until` group: its design's)
        self.planned = Counter(self.group_of.values())
        self._read = False  # whether the study's trials rows were read for their groups
        #: group id -> (its trials' files' print when read, question -> its rows)
        self._answered: dict[str, tuple[tuple, dict[str, list[dict[str, Any]]]]] = {}

    def numbers(self, trials: Collection[str] | None = None) -> list[GroupNumbers]:
        """Every group's numbers; with ``trials``, those of these trials' groups alone."""
        if trials is None:
            answered = _read_again_if_replaced(
                lambda: group_numbers(self.root, self.study, self.names, self.threshold))
        else:
            answered = numbers_of(self._rows({self._group(t) for t in trials} - {None}), self.names)
        for numbers in answered:
            numbers.complete = int(numbers.tags["trials"]) == numbers.step >= self.planned.get(numbers.group_id, 0)
        return answered

    def figures(self, group_ids: Collection[str], folder: Path) -> dict[str, dict[str, Path]]:
        """The groups' figures drawn into ``folder``: group id -> name -> file."""
        return draw_figures(self._rows(group_ids), folder)

    def _rows(self, group_ids: Collection[str]) -> dict[str, dict[str, list[dict[str, Any]]]]:
        """group id -> question -> its rows (PARENT_QUESTIONS), read again only for the
        groups whose trials' files changed since they were last read: a group's numbers
        and then its figures, or its numbers asked again for a trial whose rows an
        earlier answer already held, cost one read."""
        wanted = sorted(set(group_ids))
        members = self._members_by_group(wanted)
        compacted = rows_print(self.root, self.study)
        prints = {group_id: (compacted, rows_print(self.root, self.study, members[group_id])) for group_id in wanted}
        stale = [group_id for group_id in wanted if self._answered.get(group_id, (None,))[0] != prints[group_id]]
        if stale:
            trial_ids = set().union(*(members[group_id] for group_id in stale))
            try:
                fresh = _read_again_if_replaced(
                    lambda: group_rows(self.root, self.study, stale, self.threshold, trial_ids, PARENT_QUESTIONS))
            except LookupError:  # no results yet: no rows, none kept
                return {group_id: {question: [] for question in PARENT_QUESTIONS} for group_id in wanted}
            for group_id in stale:
                self._answered[group_id] = (prints[group_id], fresh[group_id])
        return {group_id: self._answered[group_id][1] for group_id in wanted}

    def _members_by_group(self, group_ids: Collection[str]) -> dict[str, set[str]]:
        """group id -> every trial of the group, as far as they are known."""
        if not self._read:  # once: trials of an earlier run that no config names
            self.group_of.update(read_trial_groups(self.root, self.study))
            self._read = True
        found: dict[str, set[str]] = {group_id: set() for group_id in group_ids}
        for trial_id, group_id in self.group_of.items():
            if group_id in found:
                found[group_id].add(trial_id)
        return found

    def _group(self, trial_id: str) -> str | None:
        if trial_id not in self.group_of:
            row = read_trial_row(self.root, self.study, trial_id)
            if row is None or not row.get("group_id"):
                return None
            self.group_of[trial_id] = row["group_id"]
        return self.group_of[trial_id]


def handed(study: Study, root: Path) -> Handed:
    """What the study's MLflow thread is handed: GroupAnswers' numbers and figures, the
    groups' short labels, the accuracy plot."""
    answers = GroupAnswers(study, root)
    return Handed(answers.numbers, answers.names, accuracy_plot, answers.figures)
