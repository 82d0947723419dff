"""Where a study's results live on disk: the one owner of the layout, imported by the
writer (orchestrator.store.results_store and the driver) and by the readers (analysis.query
and the views it builds). Standard library only.

    <root>/mlflow.db                                 the MLflow store (orchestrator.mlflow_tracking.mlflow_store)
    <root>/<study>/<table>/trial_id=<id>/part-0.parquet
                                                     one trial's rows of one table
    <root>/<study>/<table>/_compacted/gen-<n>.parquet
                                                     finished trials' rows, merged (below)
    <root>/<study>/_artifacts/<id>/                  files a trial leaves for its MLflow run
    <root>/<study>/_checkpoints/<id>.pt              a trial's last checkpoint
    <root>/<study>/_logs/run-<time>.log              Ray's, Tune's and MLflow's messages
    <root>/<study>/_slurm/job.sbatch, job-<id>.log   `lg-study slurm`'s script and its jobs' logs
    <root>/<study>/_mlflow_lag.json                  what the study's MLflow runs miss of its rows
    <root>/<study>/_superseded/science-<v>/          rows of an older science version
    <root>/<study>/_tune/                            Tune's own experiment files
    <root>/<study>/report/                           `lg-study report`'s page
    <root>/_profiles/<profile>/<study>/...           a profile's studies, kept apart

One file per trial and table means a re-run trial replaces its own rows instead of
adding duplicates. Compaction (orchestrator.store.compaction) merges the files of
finished trials into one file per table and generation, sorted by trial id, so that a
study of thousands of trials is a few files. Readers see a trial's rows of a table from
its own file when it has one, else from the newest generation (visible_files): a
trial's own file always wins, and an older generation is never read. A study name
cannot start with '_', so no study folder is taken by the others.
"""

from __future__ import annotations

import re
from pathlib import Path

TABLES = ("trials", "train", "eval", "samples")
FILE_NAME = "part-0.parquet"
#: the hive partition key of every table's folders: ``trial_id=<id>``
PARTITION_KEY = "trial_id"
#: the folder of a table's compacted files, beside its trials' folders
COMPACTED = "_compacted"
_GENERATION = re.compile(r"gen-(\d{6})\.parquet")
PROFILES = "_profiles"
ARTIFACTS = "_artifacts"
CHECKPOINTS = "_checkpoints"
LOGS = "_logs"
MLFLOW_LAG = "_mlflow_lag.json"
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


def trial_files(root: Path, study: str, table: str) -> dict[str, Path]:
    """trial_id -> the trial's own file of ``table``, for each trial that has one."""
    check_table(table)
    folder = Path(root) / study / table
    return {path.parent.name.removeprefix(f"{PARTITION_KEY}="): path
            for path in sorted(folder.glob(f"{PARTITION_KEY}=*/{FILE_NAME}"))}


def checkpoint_path(root: Path, study: str, trial_id: str) -> Path:
    """Where a trial's last checkpoint lives (its worker writes it, a resumed trial reads it)."""
    check_path_component(study, "study")
    check_path_component(trial_id, "trial_id")
    return Path(root) / study / CHECKPOINTS / f"{trial_id}.pt"


def artifact_folder(root: Path, study: str, trial_id: str) -> Path:
    """Files a trial's worker leaves for its MLflow run (e.g. ABC's bias matrices)."""
    check_path_component(study, "study")
    check_path_component(trial_id, "trial_id")
    return Path(root) / study / ARTIFACTS / trial_id


def compacted_path(root: Path, study: str, table: str, generation: int) -> Path:
    """Where generation ``generation`` (1, 2, ...) of a table's compacted rows lives."""
    check_table(table)
    check_path_component(study, "study")
    return Path(root) / study / table / COMPACTED / f"gen-{generation:06d}.parquet"


def compacted_generations(root: Path, study: str, table: str) -> dict[int, Path]:
    """generation -> its file, for every compacted file of ``table`` (oldest first); only
    the newest is read, the older ones are what a compaction has still to delete."""
    folder = Path(root) / study / table / COMPACTED
    paths = sorted(folder.glob("gen-*.parquet")) if folder.is_dir() else []
    return {generation: path for path in paths if (generation := generation_of(path)) is not None}


def generation_of(path: Path) -> int | None:
    """The generation of a compacted file, or None for any other file."""
    match = _GENERATION.fullmatch(path.name)
    return int(match.group(1)) if match and path.parent.name == COMPACTED else None


def newest_compacted(root: Path, study: str, table: str) -> Path | None:
    """The compacted file a reader of ``table`` reads (the newest generation), or None;
    found without listing the trials' own folders, which one trial's reader need not."""
    generations = compacted_generations(root, study, table)
    return generations[max(generations)] if generations else None


def visible_files(root: Path, study: str, table: str) -> tuple[Path | None, dict[str, Path]]:
    """What a reader of ``table`` reads: (the newest compacted file or None, trial_id ->
    each trial's own file). A trial's own file wins over its rows in the compacted file."""
    return newest_compacted(root, study, table), trial_files(root, study, table)


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
