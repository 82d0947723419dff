"""A local MLflow store commits through a write-ahead log synced at checkpoints, except on
a network file system (orchestrator/mlflow_tracking/sqlite_journal.py); a process killed
after a commit loses nothing of it."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from orchestrator.mlflow_tracking import sqlite_journal
from orchestrator.mlflow_tracking.mlflow_store import SerializedClient
from orchestrator.mlflow_tracking.sqlite_journal import file_system, write_ahead_log_safe


def _mounts(tmp_path: Path, *lines: str) -> Path:
    table = tmp_path / "mounts"
    table.write_text("".join(f"{line} 0 0\n" for line in lines))
    return table


def _journal_mode(database: Path) -> str:
    with sqlite3.connect(database) as con:
        return con.execute("pragma journal_mode").fetchone()[0]


def _synchronous(database: Path) -> int:
    """What a connection SQLAlchemy opens (as MLflow's store does) syncs: 1 NORMAL, 2 FULL."""
    engine = create_engine(f"sqlite:///{database}")
    with engine.connect() as con:
        level = con.execute(text("pragma synchronous")).scalar()
    engine.dispose()
    return level


def test_the_deepest_mount_point_names_the_file_system(tmp_path: Path) -> None:
    table = _mounts(tmp_path, "/dev/vda / ext4 rw", f"server:/export {tmp_path}/shared nfs4 rw",
                    f"tmpfs {tmp_path}/shared/scratch tmpfs rw")
    assert file_system(tmp_path / "results", table) == "ext4"
    assert file_system(tmp_path / "shared" / "results", table) == "nfs4"
    assert file_system(tmp_path / "shared" / "scratch" / "r", table) == "tmpfs"
    assert not write_ahead_log_safe(tmp_path / "shared" / "mlflow.db", table)
    assert write_ahead_log_safe(tmp_path / "mlflow.db", table)
    assert file_system(tmp_path, tmp_path / "no-such-table") is None
    assert not write_ahead_log_safe(tmp_path / "mlflow.db", tmp_path / "no-such-table")


@pytest.mark.skipif(not Path("/proc/self/mounts").exists(), reason="no Linux mount table here")
def test_a_local_store_logs_ahead_and_syncs_at_checkpoints(tmp_path: Path) -> None:
    client = SerializedClient(f"sqlite:///{tmp_path}/mlflow.db")
    client.create_experiment("x")
    assert _journal_mode(tmp_path / "mlflow.db") == "wal"
    assert _synchronous(tmp_path / "mlflow.db") == 1
    other = tmp_path / "other.db"  # another SQLite database of the process keeps its defaults
    sqlite3.connect(other).close()
    assert _synchronous(other) == 2


def test_a_store_on_a_network_file_system_keeps_the_default_journal(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(sqlite_journal, "MOUNTS", _mounts(tmp_path, f"server:/export {tmp_path} nfs rw"))
    SerializedClient(f"sqlite:///{tmp_path}/mlflow.db").create_experiment("x")
    assert _journal_mode(tmp_path / "mlflow.db") == "delete"
    assert _synchronous(tmp_path / "mlflow.db") == 2


@pytest.mark.skipif(not Path("/proc/self/mounts").exists(), reason="no Linux mount table here")
def test_a_process_killed_after_its_commits_loses_none_of_them(tmp_path: Path) -> None:
    script = textwrap.dedent(f"""
        import os, signal
        from mlflow.entities import Metric
        from orchestrator.mlflow_tracking.mlflow_store import SerializedClient
        client = SerializedClient("sqlite:///{tmp_path}/mlflow.db")
        run = client.create_run(client.create_experiment("x")).info.run_id
        for step in range(20):
            client.log_batch(run, metrics=[Metric("loss", 1.0 / (step + 1), 0, step)])
        print(run, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)  # no clean close: the log is not checkpointed
        """)
    done = subprocess.run([sys.executable, "-c", script], check=False, capture_output=True, text=True)
    assert done.returncode == -signal.SIGKILL
    assert (tmp_path / "mlflow.db-wal").exists()
    run = SerializedClient(f"sqlite:///{tmp_path}/mlflow.db").get_run(done.stdout.strip())
    history = SerializedClient(f"sqlite:///{tmp_path}/mlflow.db").get_metric_history(run.info.run_id, "loss")
    assert sorted(m.step for m in history) == list(range(20))
    assert os.path.getsize(tmp_path / "mlflow.db") > 0
