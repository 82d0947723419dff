"""The Tune callback that keeps a study's MLflow runs in step with its trials as they
run. It makes no MLflow call: Tune's loop only marks a trial's run as behind its rows
(on the trial's id and whether the worker wrote rows), and the driver's MLflow thread
syncs it from the results folder (orchestrator.mlflow_tracking.syncer), so a slow or
dead tracking server never holds training up."""

from __future__ import annotations

from typing import Any

from ray.tune import Callback

from orchestrator.mlflow_tracking.syncer import MlflowSyncer
from orchestrator.running.seed_batches import members
from orchestrator.running.trainable import ROWS_WRITTEN


class MlflowTuneCallback(Callback):
    """Each trial's run marked for a sync when its worker reports rows written (and at
    its first report of an attempt, so a started trial shows), and when the trial ends.

    Tune's trial is read for ``config["trial"]`` (results_root, study, trial_id) and
    ``num_failures`` only.
    """

    def __init__(self, syncer: MlflowSyncer | None) -> None:
        self.syncer = syncer
        #: trials synced in their current attempt
        self._attached: set[str] = set()

    def __reduce__(self) -> tuple[type[MlflowTuneCallback], tuple[None]]:
        # Tune pickles RunConfig callbacks into tuner.pkl, which lg-study never reads back
        # (docs/reliability.md); a live thread does not pickle
        return MlflowTuneCallback, (None,)

    def on_trial_result(self, iteration: int, trials: list, trial: Any, result: dict, **info: Any) -> None:
        trial_id = trial.config["trial"]["trial_id"]  # a seed batch's first seed
        if result.get(ROWS_WRITTEN) or trial_id not in self._attached:
            self._mark(trial, live=True)
            self._attached.add(trial_id)

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._mark(trial, live=False)

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        # the trial's `failed` row is written by then (the worker, or recovery.TrialFailureCallback)
        self._mark(trial, live=False)

    def on_trial_recover(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        # the worker died and Tune retries the trial from its checkpoint, in the same run
        self._mark(trial, live=True, tags={"worker_failures": str(getattr(trial, "num_failures", ""))})

    def _mark(self, trial: Any, live: bool, tags: dict[str, str] | None = None) -> None:
        """Mark the MLflow run of every seed the Tune trial trains (one, or a seed batch's)."""
        first = trial.config["trial"]
        if not live:
            self._attached.discard(first["trial_id"])
        if self.syncer is None:
            return
        for params in members(first):
            self.syncer.trial(params, live, tags)
