"""A new SQLite store is a copy of an empty one built once per MLflow version: the same
schema and Default experiment as MLflow's own set-up gives, its artifact folder under
the making process's working directory; built in place where the cache cannot be written."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from mlflow import MlflowClient

from orchestrator.mlflow_tracking import store_template
from orchestrator.mlflow_tracking.mlflow_store import create_sqlite_store


def clauses(sql: str | None) -> list[str]:
    """A table's definition as its sorted clauses: MLflow's own migrations write a table's
    constraints in an order that differs from one set-up to the next."""
    return sorted(line.strip().rstrip(",") for line in (sql or "").splitlines())


def schema(database: Path) -> tuple:
    con = sqlite3.connect(database)
    try:
        tables = [(kind, name, clauses(sql)) for kind, name, sql in
                  con.execute("select type, name, sql from sqlite_master order by type, name")]
        version = con.execute("select version_num from alembic_version").fetchall()
        experiments = con.execute("select experiment_id, name, artifact_location, lifecycle_stage from experiments").fetchall()
    finally:
        con.close()
    return tables, version, experiments


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    return tmp_path / "cache" / "lg-study"


def test_a_copied_store_is_what_mlflows_set_up_gives(cache, tmp_path):
    own = tmp_path / "own.db"
    MlflowClient(f"sqlite:///{own}").search_experiments(max_results=1)  # MLflow's set-up, in this folder
    for name in ("first", "second"):  # the first builds the cached store, the second copies it
        create_sqlite_store(tmp_path / name / "mlflow.db")
        assert schema(tmp_path / name / "mlflow.db") == schema(own)
    assert [p.name for p in cache.iterdir()] == [f"mlflow-{store_template.mlflow.__version__}.db"]


def test_the_default_experiments_folder_is_the_making_process_s(cache, tmp_path, monkeypatch):
    create_sqlite_store(tmp_path / "a" / "mlflow.db")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    create_sqlite_store(tmp_path / "b" / "mlflow.db")
    (default,) = MlflowClient(f"sqlite:///{tmp_path / 'b' / 'mlflow.db'}").search_experiments()
    assert default.artifact_location == str(elsewhere / "mlruns" / "0")


def test_a_cache_that_cannot_be_written_builds_the_store_in_place(tmp_path, monkeypatch):
    (tmp_path / "a_file").write_text("")  # a cache folder under a file: no one can make it
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "a_file"))
    monkeypatch.chdir(tmp_path)
    own = tmp_path / "own.db"
    MlflowClient(f"sqlite:///{own}").search_experiments(max_results=1)
    create_sqlite_store(tmp_path / "a" / "mlflow.db")
    assert schema(tmp_path / "a" / "mlflow.db") == schema(own)
