"""The MLflow client of a tracking URI: a local SQLite store set up once, and calls that
take turns between the processes sharing it.

Only the Ray driver process writes MLflow (a local SQLite store breaks with several
writers, and Tune callbacks run in the driver); `lg-study ui` reads it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from mlflow.tracking import MlflowClient

from orchestrator.mlflow_tracking.moved_store import (
    lock_file,
    repoint_moved_artifacts,
    sqlite_database,
)
from orchestrator.mlflow_tracking.sqlite_journal import use_write_ahead_log
from orchestrator.mlflow_tracking.store_template import copy_empty_store

__all__ = ["HTTP_BOUNDS", "SerializedClient", "artifact_location", "bound_http_calls", "create_sqlite_store",
           "sqlite_database"]

#: How long one MLflow call on a tracking server may take, at most. MLflow's client
#: retries a call that fails (no connection, a timeout, 429 or 5xx) 7 times with an
#: exponential backoff, each try waiting up to 120 s, and sleeps as long as a
#: Retry-After header asks: minutes per call. Here a call tries 3 times, each given
#: 10 s, with backoffs of 0 and 2-2.5 s: at most 32.5 s for a server that accepts and
#: never answers, about 2.5 s for one that refuses. The driver's MLflow thread
#: (orchestrator.mlflow_tracking.syncer) makes every call, so the bound only tells when
#: a dead server is noticed; training never waits for it. Values already set in the
#: environment are kept.
HTTP_BOUNDS = {
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",  # an int to MLflow
    "MLFLOW_HTTP_REQUEST_BACKOFF_JITTER": "0.5",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "10",
    "MLFLOW_HTTP_RESPECT_RETRY_AFTER_HEADER": "false",
}


def bound_http_calls() -> None:
    """Set HTTP_BOUNDS in this process's environment (where not set): MLflow reads them
    at every call. Also keep MLflow from printing each ended run's URL on stdout (a
    tracking server's runs; `lg-study sync` prints on the terminal)."""
    for name, value in HTTP_BOUNDS.items():
        os.environ.setdefault(name, value)
    os.environ.setdefault("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")


def artifact_location(tracking_uri: str, experiment: str) -> str | None:
    """Keep a local store's artifacts beside its database.

    MLflow's default for a SQLite store is ``./mlruns`` under the current directory,
    which scatters artifacts wherever the command happened to run.
    """
    parsed = urlparse(tracking_uri)
    if parsed.scheme != "sqlite":
        return None  # a server decides its own artifact root
    db = Path(parsed.path)
    return (db.parent / "mlartifacts" / experiment).resolve().as_uri()


class SerializedClient:
    """An MlflowClient whose calls on a local SQLite store take turns between processes.

    Two drivers (two studies) sharing ``results/mlflow.db`` otherwise race: both run
    the schema migrations of a new store and crash ("table _alembic_tmp_... already
    exists"), and later writes fail with "database is locked". Each call here holds an
    exclusive lock on ``mlflow.db.lock`` beside the database, and a call that still
    meets "database is locked" (a reader such as the MLflow UI) is retried for up to
    LOCKED_RETRY_S. Calls on a tracking server go straight through.
    """

    LOCKED_RETRY_S = 120.0

    def __init__(self, tracking_uri: str) -> None:
        bound_http_calls()
        database = sqlite_database(tracking_uri)
        self._lock_path = lock_file(database) if database is not None else None
        self._fd: int | None = None
        with self._turn():
            if database is not None and not database.exists():
                create_sqlite_store(database)
            if database is not None:
                use_write_ahead_log(database)
            # a store whose folder moved lists its artifacts again (the command line
            # said so before, calling repoint_moved_artifacts itself)
            self.repointed = repoint_moved_artifacts(tracking_uri, locked=True)
            self._client = MlflowClient(tracking_uri)

    @property
    def tracking_uri(self) -> str:
        return self._client.tracking_uri

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._client, name)
        if not callable(attr) or self._lock_path is None:
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            delay, deadline = 0.2, time.monotonic() + self.LOCKED_RETRY_S
            while True:
                with self._turn():
                    try:
                        return attr(*args, **kwargs)
                    except Exception as error:  # re-raised unless SQLite was busy
                        if "database is locked" not in str(error) or time.monotonic() > deadline:
                            raise
                time.sleep(delay)
                delay = min(2 * delay, 5.0)

        return call

    @contextlib.contextmanager
    def _turn(self) -> Iterator[None]:
        if self._lock_path is None:
            yield
            return
        if self._fd is None:
            self._lock_path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)


def create_sqlite_store(database: Path) -> None:
    """Set a new SQLite store up beside `database` and hard-link it to its name, so that
    a store another process made meanwhile (`mlflow ui` takes no lock of ours) is kept,
    never overwritten. The store is a copy of an empty one built once per MLflow version
    (orchestrator.mlflow_tracking.store_template), not a new run of MLflow's migrations.
    """
    database.parent.mkdir(parents=True, exist_ok=True)
    staged = database.with_name(f".{database.name}.{os.getpid()}.tmp")
    try:
        copy_empty_store(staged)
        with open(staged, "rb") as file:
            os.fsync(file.fileno())
        os.link(staged, database)
    except OSError:
        pass  # made meanwhile (kept), or no hard links here: MLflow sets it up in place
    finally:
        staged.unlink(missing_ok=True)
