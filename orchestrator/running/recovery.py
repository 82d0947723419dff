"""What makes a study safe to stop, crash and run again (docs/reliability.md).

- one driver per study at a time (orchestrator.store.study_locks.study_lock), so the
  tables and the MLflow runs have a single writer; the lock dies with its process.
- `stop_on_sigterm`: SIGTERM stops a run the way Ctrl-C does.
- `TrialFailureCallback`: a trial whose worker died and that has no retries left is
  written to `trials` as `failed` by the driver (the worker cannot write it); a trial
  that met a storage fault (a full disk: orchestrator.store.storage_faults) stops the
  study through `StorageFaultStop` instead, not retried and left `running`.
- the MLflow runs are a function of the Parquet files (orchestrator.mlflow_tracking.mlflow_sync): at
  start-up the driver brings the run of every trial that a killed driver left behind
  its rows up to date (mlflow_sync.sync_study).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import threading
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ray import tune

from orchestrator.running.seed_batches import members
from orchestrator.store.results_store import read_trial_row, write_trial_table
from orchestrator.store.storage_faults import StorageFault, fault_from_text
from orchestrator.store.trial_rows import trials_row
from orchestrator.studies.config_paths import TRIAL_CONFIG
from results_contract.layout import check_path_component
from results_contract.trial_status import FINISHED, TrialStatus

ERROR_CHARS = 4000  # the end of a worker's error text kept in `trials.error`


def wipe_study(root: Path, study: str) -> None:
    """Delete the study's results folder (tables, checkpoints, Tune logs). Hold the lock."""
    check_path_component(study, "study")
    shutil.rmtree(Path(root) / study, ignore_errors=True)


@contextlib.contextmanager
def stop_on_sigterm() -> Iterator[None]:
    """While fitting: SIGTERM acts as Ctrl-C (a first one stops Tune gracefully, a second
    one stops at once); afterwards the SIGINT handler is put back (Tune leaves its own
    installed after the run)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous_int, previous_term = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)

    def on_sigterm(signum: int, frame: Any) -> None:
        handler = signal.getsignal(signal.SIGINT)  # Tune's during fit, then the default
        if not callable(handler):
            raise KeyboardInterrupt
        handler(signal.SIGINT, frame)

    signal.signal(signal.SIGTERM, on_sigterm)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous_term)
        signal.signal(signal.SIGINT, previous_int)


class StorageFaultStop(tune.Stopper):
    """Stops the whole study, as Ctrl-C does, once a storage fault was met (trip): Tune
    asks stop_all after handling each event, so a trial whose attempt met the fault and
    that Tune has just queued again is stopped before that retry starts."""

    def __init__(self) -> None:
        self.fault: StorageFault | None = None

    def trip(self, fault: StorageFault) -> None:
        self.fault = self.fault or fault
        # the stopped trials' failed tasks are never fetched, and Ray's driver logs each as
        # an "Unhandled error" when it is freed, after the terminal is given back: the
        # message that ends the run says it all
        os.environ["RAY_IGNORE_UNHANDLED_ERRORS"] = "1"

    def __call__(self, trial_id: str, result: dict) -> bool:
        return False

    def stop_all(self) -> bool:
        return self.fault is not None


class TrialFailureCallback(tune.Callback):
    """Writes `failed` (with Tune's error text) to `trials` when Tune gives up on a
    trial. A trial that raised has written its own row with the traceback; a trial
    whose worker process died has only its `running` row, which this replaces.

    An attempt that met a storage fault trips ``stop`` instead, whether Tune would
    retry the trial or not: the trial keeps its `running` row (interrupted; the next run
    resumes it) and the study stops."""

    def __init__(self, root: Path, study: str, stop: StorageFaultStop | None = None) -> None:
        self.root, self.study = Path(root), study
        self.stop = stop or StorageFaultStop()

    def on_trial_recover(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._storage_fault(trial)

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        if self._storage_fault(trial):
            return
        seeds = members(trial.config["trial"])
        for params in seeds:  # every seed of a seed batch but those it finished
            self._failed(trial, params, kept=(TrialStatus.FAILED, *FINISHED) if len(seeds) > 1 else (TrialStatus.FAILED,))

    def _failed(self, trial: Any, params: dict[str, Any], kept: tuple[str, ...]) -> None:
        trial_id = params["trial_id"]
        row = read_trial_row(self.root, self.study, trial_id)
        if row is not None and row["status"] in kept:
            return
        attempts = getattr(trial, "num_failures", 1)
        message = f"gave up after {attempts} failed attempt(s); last error: {_last_error(trial)}"
        now = datetime.now(timezone.utc)
        if row is None:  # the worker died before writing anything
            config = TRIAL_CONFIG.validate_python(params["config"])
            row = trials_row(self.study, config, TrialStatus.FAILED, params.get("device", "cpu"), now,
                             group_label=params.get("group_label"))
        started = row["started_at"]
        row.update(status=TrialStatus.FAILED, finished_at=now, error=message,
                   wall_s=(now - started).total_seconds() if started else None)
        write_trial_table(self.root, self.study, "trials", trial_id, [row])


    def _storage_fault(self, trial: Any) -> bool:
        """Trip the stop when the trial's last failure was a storage fault; say whether."""
        fault = fault_from_text(_last_error(trial), self.root)
        if fault is not None:
            self.stop.trip(fault)
        return fault is not None


def _last_error(trial: Any) -> str:
    """The last failure Tune recorded for the trial (its error.txt), shortened."""
    text = ""
    with contextlib.suppress(Exception):
        if trial.error_file and Path(trial.error_file).exists():
            text = Path(trial.error_file).read_text()
            text = text[text.rfind("Failure #"):] if "Failure #" in text else text
    text = " ".join(text.split()) or "unknown (Tune recorded no error text)"
    return text if len(text) <= ERROR_CHARS else "..." + text[-ERROR_CHARS:]
