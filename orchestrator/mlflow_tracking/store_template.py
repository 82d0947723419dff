"""An empty SQLite MLflow store at the installed MLflow's schema, built once and copied.

MLflow sets a store up by running its schema migrations one by one: 1.2-2.7 s of CPU on
this project's machines, which every new results folder waited for (and every test that
runs a study in a folder of its own). The empty store is built once per MLflow version
into the user's cache folder and each new store is a copy of it. The one thing a store
records of where it was made, its Default experiment's artifact folder (`mlruns/0`
under the making process's working directory, as MLflow writes it), is set as MLflow
would have set it; lg-study's own experiments name their artifact folders themselves.
Where the cache cannot be written, the store is built in a temporary folder, as before.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
from pathlib import Path

import mlflow
from mlflow.tracking import MlflowClient

#: MLflow's Default experiment, which every store has from its first migration
DEFAULT_EXPERIMENT_ID = 0


def cache_folder() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "lg-study"


def build_empty_store(database: Path) -> None:
    """Run MLflow's migrations on a new store at `database`, in memory (/dev/shm) where
    it can, since each migration commits with an fsync."""
    memory = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
    with tempfile.TemporaryDirectory(dir=memory) as folder:
        built = Path(folder) / database.name
        MlflowClient(f"sqlite:///{built}").search_experiments(max_results=1)  # runs the migrations
        shutil.copyfile(built, database)


def empty_store() -> Path | None:
    """The cached empty store of this MLflow version, built if missing (atomically, so
    processes racing to build it each leave a whole file); None where the cache cannot
    be written."""
    template = cache_folder() / f"mlflow-{mlflow.__version__}.db"
    if template.exists():
        return template
    try:
        template.parent.mkdir(parents=True, exist_ok=True)
        staged = template.with_name(f".{template.name}.{os.getpid()}.tmp")
        build_empty_store(staged)
        os.replace(staged, template)
    except OSError:
        return None
    return template


def copy_empty_store(target: Path) -> None:
    """A new empty store at `target` (a path no one else uses): a copy of the cached one,
    its Default experiment's artifact folder under this process's working directory."""
    template = empty_store()
    if template is None:
        build_empty_store(target)
        return
    shutil.copyfile(template, target)
    con = sqlite3.connect(target)
    try:
        with con:
            con.execute("update experiments set artifact_location = ? where experiment_id = ?",
                        (str(Path.cwd() / "mlruns" / str(DEFAULT_EXPERIMENT_ID)), DEFAULT_EXPERIMENT_ID))
    finally:
        con.close()
