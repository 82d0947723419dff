"""What every kind of run shares: where and how it runs (RunContext), and what became
of its trials (RunSummary). A grid, a search and a seed target each run one or more
batches of trials through tune_runner.run_trials with the same context."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console

from orchestrator.mlflow_tracking.lag_ledger import Lag


@dataclass(frozen=True)
class RunContext:
    """Where a study's run writes and how it starts, the same for every batch it runs."""

    #: the results root of the study's profile (resolved: Tune and the workers need an
    #: absolute path)
    results_root: Path
    #: the MLflow store the driver writes the trials' runs to
    tracking_uri: str
    #: the Ray cluster to join (or RAY_ADDRESS); None starts a local Ray
    address: str | None = None
    console: Console = field(default_factory=lambda: Console(stderr=True))
    #: delete the study's results and MLflow runs first, then train every trial
    restart: bool = False
    #: the command that brings the study's MLflow runs up to date (`lg-study sync ...`)
    sync: str = "lg-study sync STUDY.yaml"

    def __post_init__(self) -> None:
        object.__setattr__(self, "results_root", Path(self.results_root).resolve())

    def continuing(self) -> RunContext:
        """The context of the batches after a restart's wipe, which must not wipe again."""
        return dataclasses.replace(self, restart=False)


@dataclass
class RunSummary:
    total: int
    skipped: int
    ran: int = 0
    failed: list[str] = field(default_factory=list)
    wall_s: float = 0.0
    #: trials that had started before (interrupted or failed) and continued in this run
    resumed: list[str] = field(default_factory=list)
    #: trials still unfinished after this run: it was interrupted
    interrupted: list[str] = field(default_factory=list)
    #: trials a search's pruner stopped in this run (status `pruned`)
    pruned: list[str] = field(default_factory=list)
    #: trials whose MLflow run was left RUNNING and was ended as KILLED
    killed_runs: list[str] = field(default_factory=list)
    #: finished trials whose MLflow run was completed from the Parquet files (mlflow_sync)
    repaired_runs: list[str] = field(default_factory=list)
    #: trials finished in another study or profile under the same results folder, taken
    #: from there rather than trained (orchestrator.store.reuse): trial_id -> experiment trained in
    reused: dict[str, str] = field(default_factory=dict)
    #: trials finished before this run trained any (whose repaired runs are reported)
    finished_before: set[str] = field(default_factory=set)
    #: what the study's MLflow runs still miss of its rows at the end (the tracking
    #: server is down), None when caught up
    mlflow_lag: Lag | None = None

    def add_batch(self, batch: RunSummary) -> None:
        """Count one batch (a round, a search's points) into the run's summary; total and
        skipped are the caller's to set, since batches of one run may share trials."""
        self.ran += batch.ran
        self.wall_s += batch.wall_s
        for name in ("failed", "resumed", "interrupted", "pruned", "killed_runs", "repaired_runs"):
            getattr(self, name).extend(getattr(batch, name))
        self.reused.update(batch.reused)
        self.mlflow_lag = batch.mlflow_lag  # the latest batch's word on MLflow
