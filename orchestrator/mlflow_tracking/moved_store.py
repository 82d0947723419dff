"""A local MLflow store whose folder moved (copied to a laptop, reached under another
mount point): its experiments' and runs' artifact locations still name the old path,
so MLflow (and `lg-study ui`) lists no artifact, although the files sit beside the
database in ``mlartifacts/``. `repoint_moved_artifacts` points them at this folder. An
experiment whose artifacts were not brought along is pointed here too when its old
folder is gone (another machine): its runs' new artifacts are written here, where
MLflow would otherwise fail to create the old path; while the old folder is there, it
is left alone, since its runs' artifacts are still found there.

MLflow's API cannot change an experiment's artifact location or a run's artifact URI
(both are set once, at creation), so the two columns are updated in the store's SQLite
file, in one transaction, under the lock every call of lg-study's takes
(mlflow_store.SerializedClient); nothing else changes. Standard library only:
`lg-study ui` calls it without loading MLflow.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

#: the folder beside the database that holds the experiments' artifacts
#: (mlflow_store.artifact_location)
ARTIFACTS = "mlartifacts"


@dataclass(frozen=True)
class Repointed:
    """One experiment's artifacts found under this folder: its old and new location, how
    many of its runs were re-pointed, and whether its artifacts were brought along (if
    not, its old folder is gone: the runs' earlier artifacts are not found anywhere)."""

    old: str
    new: str
    runs: int
    brought: bool = True


def sqlite_database(tracking_uri: str) -> Path | None:
    """The file of a SQLite store, None for anything else. SQLAlchemy's form: the path
    follows ``sqlite:///`` (so ``sqlite:////abs/mlflow.db`` is absolute)."""
    if not tracking_uri.startswith("sqlite:///"):
        return None
    database = tracking_uri.removeprefix("sqlite:///").partition("?")[0]
    return None if database in ("", ":memory:") else Path(database)


def lock_file(database: Path) -> Path:
    """``mlflow.db.lock`` beside ``mlflow.db``: held around every call into the store."""
    return database.with_name(database.name + ".lock")


@contextlib.contextmanager
def store_turn(database: Path) -> Iterator[None]:
    """Hold the store's lock (a new descriptor: not while this process holds it by another)."""
    fd = os.open(lock_file(database), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def repoint_moved_artifacts(tracking_uri: str, locked: bool = False) -> list[Repointed]:
    """Point the artifact locations of the store's experiments, and of their runs, that
    name another folder's ``mlartifacts/<experiment>`` at this folder's, where that
    folder holds them; return what was re-pointed ([] when nothing was: a second call,
    a store that never moved, a tracking server). ``locked``: the caller holds the store's
    lock already."""
    database = sqlite_database(tracking_uri)
    if database is None or not database.is_file():
        return []
    done = []
    with contextlib.nullcontext() if locked else store_turn(database), \
            contextlib.closing(sqlite3.connect(database, timeout=120)) as con, con:  # one transaction
        if not con.execute("select 1 from sqlite_master where type = 'table' and name = 'experiments'").fetchone():
            return []  # a store MLflow is still creating (another process's client): nothing has moved
        for experiment_id, old in con.execute("select experiment_id, artifact_location from experiments").fetchall():
            new = moved_location(old, database.parent / ARTIFACTS)
            if new is None:
                continue
            brought = Path(unquote(urlparse(new).path)).is_dir()
            con.execute("update experiments set artifact_location = ? where experiment_id = ?", (new, experiment_id))
            runs = con.execute(
                "update runs set artifact_uri = ? || substr(artifact_uri, ?) "
                "where experiment_id = ? and substr(artifact_uri, 1, ?) = ?",
                (new, len(old) + 1, experiment_id, len(old) + 1, old + "/")).rowcount
            done.append(Repointed(old, new, runs, brought))
    return done


def moved_location(location: str | None, artifacts: Path) -> str | None:
    """This folder's location for an experiment whose artifact ``location`` names
    ``.../mlartifacts/<experiment>`` elsewhere, when ``artifacts/<experiment>`` is here
    (as mlflow_store.artifact_location writes it) or the old one is gone; None when it
    needs no change."""
    parsed = urlparse(location or "")
    if parsed.scheme not in ("file", "") or f"/{ARTIFACTS}/" not in parsed.path:
        return None
    old = Path(unquote(parsed.path))
    here = artifacts / unquote(parsed.path).rpartition(f"/{ARTIFACTS}/")[2]
    if not here.is_dir() and old.exists():
        return None  # not brought along, and still found where they are
    new = here.resolve().as_uri()
    with contextlib.suppress(OSError):
        if new == location or old.resolve() == here.resolve():
            return None  # this folder already, or under another name that still leads here
    return new
