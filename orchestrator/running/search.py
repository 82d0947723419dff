"""Optuna search over config fields: the `search` block of a study file (docs/search.md).

The driver asks Optuna for points (values of `search.params`), runs each point as one
ordinary trial per combination of `search.repeat` (its seeds) through
`tune_runner.run_trials`, and tells Optuna the point's score: the mean over its seeds
of `search.metric` at each trial's final evaluation, read from the trials' Parquet
files. A diverged seed scores 0, the worst value of every metric (all of them are
maximized): divergence comes from the point's values, so the point pays for it.

Resuming needs no bookkeeping of its own. The Optuna study is stored in
`<results>/<study>/optuna.db` (orchestrator.store.search_store). Points told before are not
run again; a point asked but not told (its driver stopped, or one of its trials
failed) is run again with its stored values, which give the same trial ids, so
run_trials skips the trials already finished in `trials` and runs only the others.

With `search.pruner`, a batch runs under a Tune stopper (orchestrator.running.point_pruning)
that asks Optuna's pruner about each point as its seeds report; a pruned point is told
PRUNED, and one whose pruning was decided before its driver stopped is settled from
that stored decision instead of being run again.
"""

from __future__ import annotations

import dataclasses
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
import pydantic
from optuna.trial import TrialState

from lengthgen import TrialConfig
from orchestrator.running.point_pruning import PRUNED_AT, PointPruner, settle_pruned
from orchestrator.running.run_context import RunContext, RunSummary
from orchestrator.running.tune_runner import check_resources, run_trials, start_ray
from orchestrator.store.results_store import read_trial_rows, read_trial_statuses
from orchestrator.store.search_curves import metric_curve
from orchestrator.store.search_store import (
    SCORES,
    TOLD,
    TRIAL_IDS,
    SearchState,
    SearchStore,
)
from orchestrator.store.study_locks import SEARCH_LOCK, check_not_busy, study_lock
from orchestrator.studies.metric_names import eval_metrics, length_results
from orchestrator.studies.study import Study
from results_contract.trial_status import FINISHED, TrialStatus

#: the score of a diverged seed-trial
DIVERGED_SCORE = 0.0
#: MLflow tags on the run of each seed-trial: the search (Optuna study) and the point's number
SEARCH_TAG, POINT_TAG = "search", "search_point"


@dataclass
class SearchSummary(RunSummary):
    """Every batch of trials added up (total = points x seeds), and the points."""

    #: points scored by this run
    scored: int = 0
    #: points this run pruned (search.pruner)
    points_pruned: int = 0
    state: SearchState | None = None


def point_trials(study: Study, params: dict[str, Any]) -> list[TrialConfig]:
    """The seed-trials of a point: base, the point's values, one repeat combination each."""
    return [study.config_with({**params, **seeds}) for seeds in study.spec.search.repeat_settings()]


def seed_score(results_root: Path, study_name: str, trial_id: str, status: str, metric: str) -> float:
    """A finished seed-trial's score: ``metric`` at its final evaluation, computed from
    its `eval` rows by orchestrator.studies.metric_names, as MLflow has it; DIVERGED_SCORE if it diverged."""
    if status == TrialStatus.DIVERGED:
        return DIVERGED_SCORE
    rows = read_trial_rows(results_root, study_name, "eval", trial_id)
    if not rows:
        raise RuntimeError(f"trial {trial_id} is {status} but has no readable eval rows under "
                           f"{Path(results_root) / study_name}")
    final = max(r["step"] for r in rows)
    return float(eval_metrics(length_results(r for r in rows if r["step"] == final))[metric])


def run_search(study: Study, context: RunContext) -> SearchSummary:
    """Score the search's missing points, ``search.parallel_points`` at a time.

    Points asked but not told before (an interrupted run) run first; a point with a
    failed trial stays open for the next run (as run_trials runs failed trials again).
    ``context.restart`` deletes the study's results, its Optuna storage and MLflow runs first.
    Raises StudyBusy when another driver runs the study, SearchChanged when the stored
    search came from a different file.
    """
    search = study.spec.search
    results_root = context.results_root
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # the run prints its own lines
    check_not_busy(results_root, study.name, SEARCH_LOCK)
    start_ray(context.address)
    check_resources(study, results_root)  # refused before anything is written
    with study_lock(results_root, study.name, SEARCH_LOCK):
        if context.restart:  # deletes the results folder (optuna.db with it) and the study's MLflow runs
            run_trials(dataclasses.replace(study, trials=[], axis_values=[]), context)
        store = SearchStore(study, results_root)
        seeds = len(search.repeat_settings())
        told = len(store.trials(TOLD))
        summary = SearchSummary(total=study.trial_count, skipped=min(told, search.points) * seeds)
        running = store.trials((TrialState.RUNNING,))
        decided = {t.number for t in running if _settle_decided(study, store, t, results_root, summary)}
        if decided:  # run_trials trains none of their (pruned) seeds, and ends their MLflow runs as pruned
            settled = {c.trial_id: c for t in running if t.number in decided for c in point_trials(study, t.params)}
            run_trials(dataclasses.replace(study, trials=list(settled.values()), axis_values=[]),
                       context.continuing())
        reopened = [(t.number, t.params) for t in running if t.number not in decided]
        left_open: list[int] = []
        while True:
            if reopened:
                batch, reopened = reopened[:search.parallel_points], reopened[search.parallel_points:]
            else:
                wanted = search.points - len(store.trials(TOLD)) - len(left_open)
                if wanted <= 0:
                    break
                batch = [store.ask() for _ in range(min(search.parallel_points, wanted))]
            still_open, interrupted = _run_points(study, store, batch, context.continuing(), summary)
            left_open += still_open
            if interrupted:
                break
        summary.state = store.state()
    return summary


def _run_points(study: Study, store: SearchStore, batch: list[tuple[int, dict]],
                context: RunContext, summary: SearchSummary) -> tuple[list[int], bool]:
    """Run the seed-trials of a batch of points and tell Optuna the score of each point
    whose trials all finished; return the points left open and whether it was interrupted."""
    trials_of: dict[int, list[TrialConfig]] = {}
    for number, params in batch:
        try:
            trials_of[number] = point_trials(study, params)
        except pydantic.ValidationError as error:
            # values that no trial accepts together (load_study tries each value on base alone)
            store.set_attrs(number, {"error": str(error)})
            store.optuna.tell(number, state=TrialState.FAIL)
            continue
        store.set_attrs(number, {TRIAL_IDS: [t.trial_id for t in trials_of[number]]})
    configs = {t.trial_id: t for trials in trials_of.values() for t in trials}  # two points may share one
    # the trials' runs are tagged with their point once their rows are in MLflow
    tags = {t.trial_id: {SEARCH_TAG: store.name, POINT_TAG: str(number)} for number, trials in trials_of.items()
            for t in trials}
    pruner = _point_pruner(study, store, trials_of, context.results_root)
    run = run_trials(dataclasses.replace(study, trials=list(configs.values()), axis_values=[]), context, tags,
                     pruner)
    summary.skipped += run.skipped
    summary.add_batch(run)
    results_root = context.results_root
    statuses = read_trial_statuses(results_root, study.name)
    still_open = []
    for number, trials in trials_of.items():
        if pruner is not None and number in pruner.pruned:
            store.optuna.tell(number, state=TrialState.PRUNED)  # Optuna keeps the step's value
            summary.points_pruned += 1
            continue
        if any(statuses.get(t.trial_id) not in FINISHED for t in trials):
            still_open.append(number)
            continue
        metric = study.spec.search.metric
        scores = {t.trial_id: seed_score(results_root, study.name, t.trial_id, statuses[t.trial_id], metric)
                  for t in trials}
        store.set_attrs(number, {SCORES: scores})
        store.optuna.tell(number, statistics.fmean(scores.values()))
        summary.scored += 1
    return still_open, bool(run.interrupted)


def _point_pruner(study: Study, store: SearchStore, trials_of: dict[int, list[TrialConfig]],
                  results_root: Path) -> PointPruner | None:
    """The batch's Tune stopper for search.pruner (None: none), with the evaluations its
    points' seeds stored before (a resumed point): a step that all seeds had reached
    before an interruption is judged once the last of them reports it again."""
    search = study.spec.search
    if not search.pruner.prunes:
        return None
    points = {number: [t.trial_id for t in trials] for number, trials in trials_of.items()}
    last_steps = {number: max(t.train.steps for t in trials) for number, trials in trials_of.items()}
    pruner = PointPruner(store.optuna, points, search.metric, last_steps, search.pruner)
    for number, trial_ids in points.items():
        for trial_id in trial_ids:
            for step, value in metric_curve(results_root, study.name, trial_id, search.metric).items():
                pruner.values[(number, step)][trial_id] = value
    pruner.judge_stored()
    return pruner


def _settle_decided(study: Study, store: SearchStore, point: optuna.trial.FrozenTrial, results_root: Path,
                    summary: SearchSummary) -> bool:
    """Settle a point whose pruning was decided before its driver stopped (PRUNED_AT):
    its seeds marked `pruned` as the pruner left them, told PRUNED, not run again."""
    step = point.user_attrs.get(PRUNED_AT)
    if step is None:
        return False
    for trial_id in point.user_attrs.get(TRIAL_IDS, []):
        settle_pruned(results_root, study.name, trial_id, step)
    store.optuna.tell(point.number, state=TrialState.PRUNED)
    summary.points_pruned += 1
    return True
