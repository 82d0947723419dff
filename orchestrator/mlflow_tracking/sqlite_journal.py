"""How a local SQLite store commits: a write-ahead log, synced at checkpoints, where the
file system allows one.

SQLite's default journal writes, syncs and deletes a journal file at every commit, and
MLflow commits every call: about 25 ms a call on this machine's disk, eight or more
calls per trial, in the driver that every trial of a study waits on. With a
write-ahead log and ``synchronous=NORMAL`` a commit is an append (a log_batch 27.5 ->
3.8 ms here, `docs/performance.md`). What that gives up: the last commits before a
power cut or an OS crash may be rolled back (never half-applied); a killed process
loses nothing. A study's runs are made from its Parquet rows, and a run left behind
its rows is synced again at the next start (`mlflow_sync.sync_study`).

The log's index is shared memory, which processes on other hosts cannot see: on a
network file system the store keeps SQLite's default journal (SQLite's documentation,
"Write-Ahead Logging", section "Disadvantages").
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

from sqlalchemy import event
from sqlalchemy.engine import Engine

#: file-system types (/proc/mounts) whose files other hosts may share
NETWORK_FILE_SYSTEMS = frozenset({
    "nfs", "nfs4", "cifs", "smb3", "smbfs", "lustre", "gpfs", "beegfs", "ceph", "glusterfs",
    "9p", "afs", "panfs", "fuse.sshfs", "fuse.glusterfs", "fuse.s3fs",
})
MOUNTS = Path("/proc/self/mounts")

#: the stores whose connections commit with synchronous=NORMAL (resolved paths)
_LOGGED: set[Path] = set()


def file_system(path: Path, mounts: Path | None = None) -> str | None:
    """The type of the file system holding ``path`` (its deepest mount point), None
    where the mount table cannot be read (not Linux)."""
    try:
        table = (mounts or MOUNTS).read_text().splitlines()
    except OSError:
        return None
    path, found, depth = Path(path).resolve(), None, -1
    for line in table:
        fields = line.split()
        if len(fields) < 3:
            continue
        point = Path(fields[1].replace("\\040", " "))
        if (point == path or point in path.parents) and len(point.parts) > depth:
            found, depth = fields[2], len(point.parts)
    return found


def write_ahead_log_safe(database: Path, mounts: Path | None = None) -> bool:
    kind = file_system(Path(database).parent, mounts)
    return kind is not None and kind not in NETWORK_FILE_SYSTEMS


def use_write_ahead_log(database: Path) -> bool:
    """Switch ``database`` to a write-ahead log where that is safe, and have this
    process's connections to it commit without a sync each; True when it logs ahead.
    A store another process holds open stays as it is (the switch needs it alone)."""
    database = Path(database).resolve()
    if not write_ahead_log_safe(database):
        return False
    try:
        with contextlib.closing(sqlite3.connect(database, timeout=5)) as con:
            [(mode,)] = con.execute("pragma journal_mode=wal").fetchall()  # the mode it is in after
    except sqlite3.Error:
        return False
    if mode.lower() == "wal":
        _LOGGED.add(database)
    return mode.lower() == "wal"


@event.listens_for(Engine, "connect")
def _sync_at_checkpoints(connection, record) -> None:
    """MLflow's SQLAlchemy engines open their own connections: those to a logged store
    sync the log at checkpoints, not at every commit (a per-connection setting)."""
    if not _LOGGED or not isinstance(connection, sqlite3.Connection):
        return
    for _, name, file in connection.execute("pragma database_list").fetchall():
        if name == "main" and file and Path(file).resolve() in _LOGGED:
            connection.execute("pragma synchronous=normal")
