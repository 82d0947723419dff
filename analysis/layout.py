"""Where a study's results live on disk: the one owner of the layout, imported by the
writer (orchestrator.store.results_store and the driver) and by the readers (analysis.query
and the views it builds). Standard library only.

    <root>/mlflow.db                                 the MLflow store (orchestrator.mlflow_tracking.mlflow_store)
    <root>/<study>/<table>/trial_id=<id>/part-0.parquet
                                                     one trial's rows of one table
    <root>/<study>/_artifacts/<id>/                  files a trial leaves for its MLflow run
    <root>/<study>/_checkpoints/<id>.pt              a trial's last checkpoint
    <root>/<study>/_logs/run-<time>.log              Ray's, Tune's and MLflow's messages
    <root>/<study>/_superseded/science-<v>/          rows of an older science version
    <root>/<study>/_tune/                            Tune's own experiment files
    <root>/<study>/report/                           `lg-study report`'s page
    <root>/_profiles/<profile>/<study>/...           a profile's studies, kept apart

One file per trial and table means a re-run trial replaces its own rows instead of
adding duplicates, and DuckDB reads a whole study with one hive-partitioned glob. A
study name cannot start with '_', so no study folder is taken by the others.
"""

from __future__ import annotations

import re
from pathlib import Path

TABLES = ("trials", "train", "eval", "samples")
FILE_NAME = "part-0.parquet"
#: the hive partition key of every table's folders: ``trial_id=<id>``
PARTITION_KEY = "trial_id"
PROFILES = "_profiles"
ARTIFACTS = "_artifacts"
CHECKPOINTS = "_checkpoints"
LOGS = "_logs"
SUPERSEDED = "_superseded"
TUNE = "_tune"
REPORT = "report"

# Letters, digits, '_', '-', '.', and no leading '.': rules out '..', hidden files and '/'.
_SAFE_COMPONENT = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]*")


def check_path_component(value: str, what: str) -> str:
    """Return ``value`` if it is safe as one folder name, else raise ValueError naming ``what``."""
    if not isinstance(value, str) or not _SAFE_COMPONENT.fullmatch(value):
        raise ValueError(
            f"{what} {value!r} is not a safe folder name: use letters, digits, '_', '-', '.',"
            " not starting with '.'"
        )
    return value


def check_table(table: str) -> None:
    if table not in TABLES:
        raise ValueError(f"unknown results table {table!r}; valid tables: {', '.join(TABLES)}")


def table_path(root: Path, study: str, table: str, trial_id: str) -> Path:
    """Where one trial's rows of one table live."""
    check_table(table)
    check_path_component(study, "study")
    check_path_component(trial_id, "trial_id")
    return Path(root) / study / table / f"{PARTITION_KEY}={trial_id}" / FILE_NAME


def profile_root(root: Path, profile: str | None) -> Path:
    """The results root a study's trials under ``profile`` live in (``root`` for none):
    every reader and writer takes it as its root, so each profile is kept apart. The
    default (unprofiled) run of a study keeps ``<root>/<study>/``; the MLflow store
    stays at the root."""
    return Path(root) if profile is None else Path(root) / PROFILES / profile


def list_profiles(root: Path) -> list[str]:
    """Profiles with a results root under ``root`` (one or more studies run with them)."""
    folder = Path(root) / PROFILES
    return sorted(p.name for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []


def results_roots(root: Path) -> list[Path]:
    """Every results root that shares ``root``'s results folder: the folder itself, then
    each profile's root (``root`` may be either kind)."""
    top = Path(root).resolve()
    if top.parent.name == PROFILES:
        top = top.parent.parent
    return [top, *(profile_root(top, name) for name in list_profiles(top))]


def list_studies(root: Path) -> list[str]:
    """Studies under ``root``: folders holding at least one results table folder."""
    root = Path(root)
    if not root.is_dir():
        return []
    return sorted(
        folder.name
        for folder in root.iterdir()
        if folder.is_dir()
        and not folder.name.startswith(".")
        and any((folder / table).is_dir() for table in TABLES)
    )
