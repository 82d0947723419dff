"""The Tune callback that keeps a study's MLflow runs in step with its trials as they
run, in the Ray driver. It reads nothing from Tune's results but the trial's id and
whether the worker wrote rows: every event syncs the trial's run from the results
folder (orchestrator.mlflow_tracking.mlflow_sync)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ray.tune import Callback

from orchestrator.mlflow_tracking.mlflow_store import sqlite_database
from orchestrator.mlflow_tracking.mlflow_sync import sync_trial
from orchestrator.mlflow_tracking.tracking import StudyTracker
from orchestrator.running.recovery import StorageFaultStop
from orchestrator.running.seed_batches import members
from orchestrator.running.trainable import ROWS_WRITTEN
from orchestrator.store.storage_faults import fault_of


class MlflowTuneCallback(Callback):
    """Each trial's run synced when its worker reports rows written (and at its first
    report of an attempt, so a started trial shows), and when the trial ends.

    Tune's trial is read for ``config["trial"]`` (results_root, study, trial_id) and
    ``num_failures`` only. A sync that meets a storage fault (the store's disk is full)
    trips ``stop``, which stops the study; the next run's start-up syncs what was missed.
    """

    def __init__(self, tracker: StudyTracker, stop: StorageFaultStop | None = None) -> None:
        self.tracker = tracker
        self.stop = stop or StorageFaultStop()
        #: trials synced in their current attempt
        self._attached: set[str] = set()

    def on_trial_result(self, iteration: int, trials: list, trial: Any, result: dict, **info: Any) -> None:
        trial_id = trial.config["trial"]["trial_id"]  # a seed batch's first seed
        if result.get(ROWS_WRITTEN) or trial_id not in self._attached:
            self._sync(trial, live=True)
            self._attached.add(trial_id)

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._sync(trial, live=False)

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        # the trial's `failed` row is written by then (the worker, or recovery.TrialFailureCallback)
        self._sync(trial, live=False)

    def on_trial_recover(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        # the worker died and Tune retries the trial from its checkpoint, in the same run
        for run_id in self._sync(trial, live=True):
            if run_id is not None:
                self.tracker.set_tags(run_id, {"worker_failures": str(getattr(trial, "num_failures", ""))})

    def _sync(self, trial: Any, live: bool) -> list[str | None]:
        """The MLflow run of every seed the Tune trial trains (one, or a seed batch's)."""
        first = trial.config["trial"]
        if not live:
            self._attached.discard(first["trial_id"])
        return [self._sync_one(params, live) for params in members(first)]

    def _sync_one(self, params: dict[str, Any], live: bool) -> str | None:
        root = Path(params["results_root"])
        try:
            return sync_trial(self.tracker, root, params["study"], params["trial_id"], live,
                              params.get("run_name"))
        except Exception as error:
            fault = fault_of(error, root, sqlite_database(self.tracker.client.tracking_uri))
            if fault is None:
                raise
            self.stop.trip(fault)
            return None
