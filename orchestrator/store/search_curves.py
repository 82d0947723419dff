"""A stored search's learning curves: for each scored point, each seed-trial's
``search.metric`` at every evaluation step, from the trials' `eval` rows, which
`lg-study replay` replays a pruner over (orchestrator.studies.pruner_replay)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import optuna
from optuna.trial import TrialState

from orchestrator.store.results_store import read_trial_rows, read_trial_statuses
from orchestrator.store.search_store import TRIAL_IDS, storage_path
from orchestrator.studies.metric_names import eval_metrics, length_results
from results_contract.trial_status import TrialStatus

#: what a diverged seed scores from its divergence on (orchestrator.running.search.DIVERGED_SCORE)
DIVERGED_VALUE = 0.0


def metric_curve(results_root: Path, study_name: str, trial_id: str, metric: str) -> dict[int, float]:
    """Evaluation step -> ``metric`` there, computed from the trial's `eval` rows as its
    MLflow run has it."""
    by_step: dict[int, list[dict]] = defaultdict(list)
    for row in read_trial_rows(results_root, study_name, "eval", trial_id):
        by_step[row["step"]].append(row)
    return {step: float(eval_metrics(length_results(rows))[metric]) for step, rows in sorted(by_step.items())}


def stored_curves(results_root: Path, study_name: str, search: str, metric: str) -> list[tuple[int, list[dict[int, float]]]]:
    """(point number, its seeds' curves) of every point the search scored, in the order
    asked. A diverged seed scores DIVERGED_VALUE at the evaluations its point's other
    seeds made after it stopped, as its final score does."""
    path = storage_path(results_root, study_name)
    if not path.is_file():
        raise LookupError(f"{path}: no search stored for study {study_name!r}; run it first")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        stored = optuna.load_study(study_name=search, storage=f"sqlite:///{path}")
    except KeyError:
        raise LookupError(f"{path}: holds no search {search!r} (another profile's?)") from None
    statuses = read_trial_statuses(results_root, study_name)
    points = []
    for trial in stored.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
        trial_ids = trial.user_attrs.get(TRIAL_IDS, [])
        curves = [metric_curve(results_root, study_name, t, metric) for t in trial_ids]
        steps = sorted(set().union(*curves)) if curves else []
        for trial_id, curve in zip(trial_ids, curves):
            if statuses.get(trial_id) == TrialStatus.DIVERGED:
                curve.update({s: DIVERGED_VALUE for s in steps if s > max(curve, default=-1)})
                curve[steps[-1]] = DIVERGED_VALUE  # its score, whatever its last evaluation
        if curves and all(curves):
            points.append((trial.number, curves))
    if not points:
        raise LookupError(f"{path}: search {search!r} has no scored point to replay")
    return points
