"""Where a study's MLflow runs live: the tracking store beside its results and the
experiment its trials' runs are in. The tracker (orchestrator.mlflow_tracking) writes
them under these names and `lg-study ui` opens them by these names, without loading
MLflow: standard library only."""

from __future__ import annotations

from pathlib import Path

#: the SQLite file of the MLflow store, at the top of the results folder (profiles share it)
MLFLOW_STORE = "mlflow.db"


def default_store_uri(results_root: Path) -> str:
    """The SQLite store ``lg-study run`` writes beside the results (absolute, so that a
    Ray worker in another directory reaches the same store); its folder is made when a
    study first runs."""
    return f"sqlite:///{Path(results_root).resolve()}/{MLFLOW_STORE}"


def experiment_name(study: str, profile: str | None = None) -> str:
    """The MLflow experiment of a study's trials: the study's name, and
    ``<study>/<profile>`` for a profile's (each profile is kept apart, as its results are)."""
    return study if profile is None else f"{study}/{profile}"
