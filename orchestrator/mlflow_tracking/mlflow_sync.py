"""A trial's MLflow run as a function of its rows in the results folder.

`sync_trial` is the one path from the Parquet store to MLflow. It brings the trial's
run up to date with the trial's rows: params and tags from its `trials` row, one
metric per step of its `train` and `eval` rows (orchestrator.studies.metric_names; a step the
run has is not logged again), and the end its status gives (RUN_END). It may be
called any number of times: the driver's MLflow thread (orchestrator.mlflow_tracking.syncer)
calls it for the trials the Tune callback marks as the worker writes rows
(orchestrator.running.mlflow_callback), and at start-up for the study's trials that
are `behind` (a driver that died, or a tracking server that was down, left their runs
behind their rows), which is also where the run of an interrupted trial catches up
with the rows of its last checkpoint.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import groupby
from pathlib import Path
from typing import Any

from orchestrator.mlflow_tracking.group_runs import PARENT_TAG
from orchestrator.mlflow_tracking.handed import Handed
from orchestrator.mlflow_tracking.run_artifacts import run_artifacts
from orchestrator.mlflow_tracking.tracking import RUN_NAME_TAG, StudyTracker
from orchestrator.store.provenance import PROVENANCE_COLUMNS
from orchestrator.store.results_store import read_trial_row, read_trial_rows, read_trial_statuses
from orchestrator.store.trial_rows import flatten_config
from orchestrator.studies.config_paths import TRIAL_CONFIG
from orchestrator.studies.metric_names import eval_metrics, length_results, train_metrics
from results_contract import groups
from results_contract.trial_status import TrialStatus

#: how a trial's status ends its run: MLflow's run status and the run's `status` tag.
#: A `running` trial that no driver runs was interrupted; the next run resumes it in
#: the same MLflow run.
RUN_END = {
    TrialStatus.DONE: ("FINISHED", "done"),
    TrialStatus.DIVERGED: ("FAILED", "diverged"),
    TrialStatus.FAILED: ("FAILED", "failed"),
    TrialStatus.RUNNING: ("KILLED", "killed"),
    # stopped by a search's pruner: killed on purpose, and final
    TrialStatus.PRUNED: ("KILLED", "pruned"),
}
#: trials columns repeated as run tags, to filter runs by in the MLflow UI
TAGGED_COLUMNS = ("task", "pe", "arch", "size", "distribution", "positions",
                  "weight_seed", "data_seed", "eval_seed", "perturb_seed", "train_max_digits",
                  *PROVENANCE_COLUMNS)


def describe(row: Mapping[str, Any]) -> tuple[str, dict[str, str], dict[str, object]]:
    """(trial_id, MLflow tags, MLflow params) of a trial's `trials` row."""
    config = json.loads(row["config_json"])
    tags = {
        "trial_id": row["trial_id"],
        "study": row["study"],
        "group": row.get("group_id"),  # the trial's columns group_id and group_label
        "group_label": row.get("group_label"),
        RUN_NAME_TAG: groups.run_name(config),  # e.g. rope-tiny-addition-w0-d3
        **{k: row[k] for k in TAGGED_COLUMNS if k in row},
    }
    return row["trial_id"], {k: str(v) for k, v in tags.items() if v is not None}, flatten_config(config)


def up_to_date(runs: Sequence[Mapping[str, str]], status: str) -> bool:
    """Whether a trial with ``status`` has a run that already ended as it says: a run is
    ended only after every row was logged, so such a run has nothing to catch up on."""
    end = RUN_END[TrialStatus(status)]
    return status != TrialStatus.RUNNING and any((r["status"], r["outcome"]) == end for r in runs)


def sync_trial(
    tracker: StudyTracker, root: Path, study: str, trial_id: str, live: bool = False,
    run_name: str | None = None, handed: Handed | None = None,
) -> str | None:
    """Bring the trial's MLflow run up to date with its rows; return the run's id, or
    None when the trial has no `trials` row yet (nothing to show).

    The run is created or re-attached, gets the steps it lacks, and ends as RUN_END
    says, with its artifacts (orchestrator.mlflow_tracking.run_artifacts) when it ends other than
    killed. ``live``: a driver runs the trial now, so a `running` trial's run stays
    RUNNING rather than ending as killed. ``run_name``: the name the driver gives the run
    (its group's short label and seeds, results_contract.groups.run_name); without it a new run is
    named from its row alone and an existing run keeps its name. The run is nested under
    its group's parent run (group_runs), made now for the group's first trial and named
    as ``handed.group_names`` says, else by the group's label; ``handed.accuracy_plot``
    draws the accuracy plot its worker did not leave (none without it).
    """
    row = read_trial_row(root, study, trial_id)
    if row is None:
        return None
    trial_id, tags, params = describe(row)
    handed = handed or Handed()
    if "group" in tags:
        name = handed.group_names.get(tags["group"])
        tags[PARENT_TAG] = tracker.groups.parent(tags["group"], tags.get("group_label", ""), name, params)
    run_id = tracker.run_for_trial(trial_id, tags, params, run_name)
    eval_rows = read_trial_rows(root, study, "eval", trial_id)
    tracker.log_steps(run_id, _steps(read_trial_rows(root, study, "train", trial_id), eval_rows))
    status = TrialStatus(row["status"])
    if live and status == TrialStatus.RUNNING:
        return run_id
    run_status, outcome = RUN_END[status]
    with tempfile.TemporaryDirectory() as folder:
        artifacts = {}
        if status != TrialStatus.RUNNING:
            artifacts = run_artifacts(root, study, trial_id, _config(row), eval_rows, Path(folder),
                                      handed.accuracy_plot)
        tracker.finish(run_id, run_status, {}, artifacts, outcome)
    return run_id


def behind(tracker: StudyTracker, root: Path, study: str, trial_ids: Iterable[str]) -> list[str]:
    """The trials among ``trial_ids`` with a `trials` row whose run has not already
    ended as their status says (up_to_date): those a sync_trial would change."""
    statuses = read_trial_statuses(root, study)
    runs = tracker.runs_by_trial()
    return [t for t in sorted(set(trial_ids) & set(statuses)) if not up_to_date(runs.get(t, []), statuses[t])]


def sync_study(tracker: StudyTracker, root: Path, study: str, trial_ids: Iterable[str],
               handed: Handed | None = None) -> list[str]:
    """sync_trial for each of ``trial_ids`` that is behind; return the trial ids synced.

    Run at a driver's start-up (by its MLflow thread, orchestrator.mlflow_tracking.syncer,
    one trial at a time), under the study lock and after it ended the runs left RUNNING:
    a trial still `running` then was interrupted, and its run ends as killed with every
    row up to its last checkpoint (its next attempt re-attaches it).
    """
    synced = behind(tracker, root, study, trial_ids)
    for trial_id in synced:
        sync_trial(tracker, root, study, trial_id, handed=handed)
    return synced


def _steps(train_rows: list[dict], eval_rows: list[dict]) -> Iterator[tuple[int, dict[str, float]]]:
    """(step, metrics) of every train row and of every evaluation."""
    for row in train_rows:
        yield row["step"], train_metrics(row)
    by_step = sorted(eval_rows, key=lambda row: row["step"])
    for step, rows in groupby(by_step, key=lambda row: row["step"]):
        yield step, eval_metrics(length_results(rows))


def _config(row: Mapping[str, Any]) -> dict[str, Any]:
    """The trial's resolved config, its sections in TrialConfig's order when it still
    validates (config_json sorts them)."""
    config = json.loads(row["config_json"])
    try:  # pydantic's ValidationError is a ValueError
        return TRIAL_CONFIG.validate_python(config).to_dict()
    except ValueError:
        return config
