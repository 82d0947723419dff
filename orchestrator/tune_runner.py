"""Run a study's trials with Ray Tune: the only module that starts Ray.

Finished trials (status done or diverged in the `trials` table) are not run
again, so re-running a study resumes it. MLflow is written from the driver
only, by `MlflowTuneCallback`; progress is drawn by `ProgressCallback`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import ray
from ray import tune
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from orchestrator.results_store import read_trial_statuses
from orchestrator.study import Study
from orchestrator.tracking import MlflowTuneCallback, StudyTracker
from orchestrator.trainable import run_trial
from orchestrator.trial_rows import config_columns, flatten_config

FINISHED = ("done", "diverged")


@dataclass
class RunSummary:
    total: int
    skipped: int
    ran: int = 0
    failed: list[str] = field(default_factory=list)
    wall_s: float = 0.0


def describe_trial(params: dict[str, Any]) -> tuple[str, dict[str, str], dict[str, object]]:
    """(trial_id, MLflow tags, MLflow params) of one Tune trial's config."""
    columns = params["columns"]
    tags = {"trial_id": params["trial_id"], "study": params["study"]}
    tags.update({k: str(v) for k, v in columns.items() if k in TAGGED_COLUMNS})
    return params["trial_id"], tags, flatten_config(params["config"])


TAGGED_COLUMNS = ("task", "pe", "arch", "size", "distribution", "positions",
                  "weight_seed", "data_seed", "eval_seed", "train_max_digits")


class ProgressCallback(tune.Callback):
    """Trials done / running / failed with an ETA, drawn with rich in the driver."""

    def __init__(self, progress: Progress, total: int) -> None:
        self.progress = progress
        self.total = total
        self.task = progress.add_task("trials", total=total)
        self.running: set[str] = set()
        self.done = self.failed = 0
        self.started = time.perf_counter()

    def __getstate__(self) -> dict:
        # Tune pickles callbacks into its experiment file; a live display is not picklable.
        return {**self.__dict__, "progress": None}

    def _refresh(self, finished: str | None = None) -> None:
        if self.progress is None:
            return
        status = f"running {len(self.running)}  done {self.done}  failed {self.failed}"
        self.progress.update(self.task, completed=self.done + self.failed, description=status)
        if finished and not self.progress.console.is_terminal:
            # no live bar in a log file: one line per finished trial instead
            elapsed = time.perf_counter() - self.started
            count = self.done + self.failed
            eta = elapsed / count * (self.total - count)
            self.progress.console.print(
                f"[{count}/{self.total}] {finished}; {status}; elapsed {elapsed:.0f} s, ETA {eta:.0f} s",
                highlight=False,
            )

    def on_trial_start(self, iteration, trials, trial, **info):
        self.running.add(trial.trial_id)
        self._refresh()

    def on_trial_complete(self, iteration, trials, trial, **info):
        self.running.discard(trial.trial_id)
        self.done += 1
        self._refresh(f"trial {trial.config['trial']['trial_id']} finished")

    def on_trial_error(self, iteration, trials, trial, **info):
        self.running.discard(trial.trial_id)
        self.failed += 1
        self._refresh(f"trial {trial.config['trial']['trial_id']} failed")


def start_ray(address: str | None, num_cpus: int | None = None) -> None:
    """Connect to `address` (or RAY_ADDRESS), else start a local Ray on this machine."""
    if ray.is_initialized():
        return
    address = address or os.environ.get("RAY_ADDRESS")
    quiet = {"include_dashboard": False, "logging_level": logging.WARNING, "log_to_driver": False}
    if address:
        ray.init(address=address, **quiet)
    else:
        ray.init(num_cpus=num_cpus, **quiet)


class ResourceError(ValueError):
    """The cluster can never hold one trial of the study."""


def check_resources(resources) -> None:
    """Refuse a study whose trials need more of a resource than the whole cluster has:
    Tune would otherwise leave them pending forever."""
    available = ray.cluster_resources()
    for name, needed in (("CPU", resources.cpus_per_trial), ("GPU", resources.gpus_per_trial)):
        if needed > available.get(name, 0):
            raise ResourceError(
                f"resources: each trial asks for {needed:g} {name}, but the Ray cluster has "
                f"{available.get(name, 0):g}; lower resources.{name.lower()}s_per_trial or add nodes"
            )


def run_study(
    study: Study,
    results_root: Path,
    tracking_uri: str,
    address: str | None = None,
    console: Console | None = None,
) -> RunSummary:
    console = console or Console(stderr=True)
    results_root = Path(results_root).resolve()
    statuses = read_trial_statuses(results_root, study.name)
    pending = [t for t in study.trials if statuses.get(t.trial_id) not in FINISHED]
    summary = RunSummary(total=len(study.trials), skipped=len(study.trials) - len(pending))
    if not pending:
        return summary

    resources = study.spec.resources
    trials = [
        {
            "trial_id": config.trial_id,
            "study": study.name,
            "config": config.to_dict(),
            "columns": config_columns(config),
            "results_root": str(results_root),
            "threads": max(1, int(resources.cpus_per_trial)),
            "device": "cuda" if resources.gpus_per_trial > 0 else "cpu",
        }
        for config in pending
    ]
    # checkpoints at every evaluation are intended; Tune's warning about them is noise here
    os.environ.setdefault("TUNE_WARN_EXCESSIVE_EXPERIMENT_CHECKPOINT_SYNC_THRESHOLD_S", "0")
    start_ray(address)
    check_resources(resources)
    results_root.mkdir(parents=True, exist_ok=True)
    tracker = StudyTracker(tracking_uri, study.name)
    run_name = f"{study.name}-{datetime.now(timezone.utc):%Y%m%dT%H%M%S}"
    started = time.perf_counter()
    with Progress(
        SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
        TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(), console=console,
    ) as progress:
        progress_callback = ProgressCallback(progress, len(trials))
        tuner = tune.Tuner(
            tune.with_resources(run_trial, {"cpu": resources.cpus_per_trial, "gpu": resources.gpus_per_trial}),
            param_space={"trial": tune.grid_search(trials)},
            tune_config=tune.TuneConfig(
                max_concurrent_trials=resources.max_concurrent_trials, reuse_actors=True
            ),
            run_config=tune.RunConfig(
                name=run_name,
                storage_path=str(results_root / study.name / "_tune"),
                callbacks=[
                    MlflowTuneCallback(tracker, lambda c: describe_trial(c["trial"]), lambda c: c["trial"]["config"]),
                    progress_callback,
                ],
                failure_config=tune.FailureConfig(max_failures=0),
                checkpoint_config=tune.CheckpointConfig(num_to_keep=1),
                verbose=0,
            ),
        )
        # Tune prints its own tables to stdout even at verbose=0; keep them in a log file
        log_path = results_root / study.name / "_tune" / f"{run_name}.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(log_path, "w") as log, contextlib.redirect_stdout(log):
            grid = tuner.fit()
    summary.ran = len(trials)
    summary.failed = [
        f"{r.config['trial']['trial_id']}: {type(r.error).__name__}: {str(r.error).strip().splitlines()[-1] if str(r.error).strip() else ''}"
        for r in grid
        if r.error is not None
    ]
    summary.wall_s = time.perf_counter() - started
    return summary
