"""`lg-study sync`: what a run's start-up does to a study's MLflow runs, done alone by
an MlflowSyncer, and what it did."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from orchestrator.mlflow_tracking.handed import Handed
from orchestrator.mlflow_tracking.lag_ledger import Lag
from orchestrator.mlflow_tracking.syncer import MlflowSyncer
from orchestrator.store.storage_faults import StorageFault


@dataclass
class Synced:
    """What `lg-study sync` did: the trials whose runs it brought up to date, the groups
    whose parents' numbers it rewrote and whose figures it drew, what is still owed
    (the server is down) and a local store's storage fault."""

    trials: list[str]
    groups: set[str]
    figures: set[str]
    lag: Lag
    fault: StorageFault | None


def sync_runs(tracking_uri: str, experiment: str, root: Path, study: str, run_names: dict[str, str],
              handed: Handed | None = None) -> Synced:
    """What a run's start-up does to the study's MLflow runs, alone (`lg-study sync`):
    writes an earlier run left owed, runs left RUNNING ended as KILLED, then every run
    behind its trial's rows brought up to date, and the groups' parents. Hold the study
    lock. ``run_names``: trial id -> its run's name, as a run of the study names it;
    ``handed``: the groups' numbers and names and the accuracy plot (MlflowSyncer)."""
    from orchestrator.store.results_store import read_trial_statuses

    syncer = MlflowSyncer(tracking_uri, experiment, root, study, say=lambda words: None, run_names=run_names,
                          handed=handed)
    syncer.job("end_running_runs")
    syncer.job("sync_study", sorted(read_trial_statuses(root, study)))
    lag = syncer.close()
    return Synced(syncer.results["sync_study"], syncer.groups_written, syncer.figures_drawn, lag, syncer.fault)
