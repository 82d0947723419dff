"""The Parquet results store that every trial writes, in the layout results_contract.layout
owns (``<root>/<study>/<table>/trial_id=<trial_id>/part-0.parquet``). The file also
holds the trial_id column, so it stands on its own outside the folder layout, and
compaction (orchestrator.store.compaction) can merge finished trials' files into one.
The readers here read a trial's own file when it has one, else its rows in the newest
compacted file (results_contract.layout.visible_files).
"""

from __future__ import annotations

import functools
import json
import os
import uuid
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from results_contract.damaged import DamagedResultsWarning
from results_contract.layout import (
    FILE_NAME,
    TABLES,
    check_path_component,
    compacted_generations,
    newest_compacted,
    table_path,
    visible_files,
)
from results_contract.trial_status import TrialStatus

# Fixed schemas, so that files from different trials union cleanly in DuckDB even when
# one trial has a column that is all null. analysis/sql/staging/empty_tables.sql mirrors them.
TRAIN_SCHEMA = pa.schema(
    [
        ("trial_id", pa.string()),
        ("step", pa.int64()),
        ("loss", pa.float64()),
        ("lr", pa.float64()),
        ("tokens", pa.int64()),
        ("wall_s", pa.float64()),
    ]
)
EVAL_SCHEMA = pa.schema(
    [
        ("trial_id", pa.string()),
        ("step", pa.int64()),
        ("digits", pa.int64()),
        ("n", pa.int64()),
        ("correct", pa.int64()),
        ("accuracy", pa.float64()),
        ("in_distribution", pa.bool_()),
        # eval.select best_long_loss: the loss on the long-length validation set at this
        # step, the same on every row of the step (null without a validation set)
        ("long_loss", pa.float64()),
        # eval.grid: the two operands' lengths of a grid cell's row (digits is the longer);
        # null on the rows of eval.digits (analysis/sql/staging/tables.sql keeps the two apart)
        ("first_digits", pa.int64()),
        ("second_digits", pa.int64()),
    ]
)
SAMPLES_SCHEMA = pa.schema(
    [
        ("trial_id", pa.string()),
        ("step", pa.int64()),
        ("digits", pa.int64()),
        ("idx", pa.int64()),
        ("cascade", pa.int64()),
        ("correct", pa.bool_()),
        ("wrong_digits", pa.int64()),
        ("first_wrong", pa.int64()),  # null when the answer is correct
        ("target", pa.string()),
        ("prediction", pa.string()),
        # Per answer place, least significant first (lengthgen.evaluation.SampleRecord).
        # Added later: older files lack both, and analysis/sql/staging/tables.sql reads them as null.
        ("carry_in", pa.string()),
        ("wrong_places", pa.string()),
    ]
)
FIXED_SCHEMAS = {"train": TRAIN_SCHEMA, "eval": EVAL_SCHEMA, "samples": SAMPLES_SCHEMA}

_TIMESTAMP = pa.timestamp("us", tz="UTC")
# The trials table is these columns plus one column per config setting (see trials_schema).
TRIALS_CORE_SCHEMA = pa.schema(
    [
        pa.field("study", pa.string(), nullable=False),
        pa.field("trial_id", pa.string(), nullable=False),
        pa.field("status", pa.string(), nullable=False),
        pa.field("config_json", pa.string(), nullable=False),
        pa.field("n_params", pa.int64()),  # null when a trial failed before building its model
        pa.field("device", pa.string(), nullable=False),
        pa.field("started_at", _TIMESTAMP, nullable=False),
        pa.field("finished_at", _TIMESTAMP),
        pa.field("wall_s", pa.float64()),
        pa.field("error", pa.string()),
    ]
)

def write_trial_table(
    root: Path, study: str, table: str, trial_id: str, rows: list[dict[str, Any]], durable: bool = True
) -> Path:
    """Replace one trial's rows of ``table`` atomically and return the file's path.

    Rows may leave out ``trial_id`` (and, for ``trials``, ``study``); they are filled in.
    Zero rows still write a valid file with the schema, replacing any older rows.
    ``durable=False`` writes the same file in place, without the temporary file and
    its fsync (4-5 ms a file here): for throwaway stores, e.g. the scale benchmark's.
    """
    path = table_path(root, study, table, trial_id)
    arrow_table = _to_arrow(table, study, trial_id, rows)
    path.parent.mkdir(parents=True, exist_ok=True)
    if not durable:
        pq.write_table(arrow_table, path)
        return path
    # Readers glob '*.parquet': a leading dot and a suffix keep the half-written file out.
    tmp = path.with_name(f".{FILE_NAME}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    try:
        pq.write_table(arrow_table, tmp)
        _fsync(tmp)  # the rename must not outlive the data after a power cut
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def _fsync(path: Path) -> None:
    with open(path, "rb") as file:
        os.fsync(file.fileno())


def read_trial_statuses(root: Path, study: str) -> dict[str, str]:
    """trial_id -> status for every trial of ``study`` with a trials row; {} if none.

    A damaged file is skipped with a warning: its trial counts as not finished, so
    the next run does it again and replaces the file.
    """
    return _trials_column(root, study, "status")


def read_trial_groups(root: Path, study: str) -> dict[str, str]:
    """trial_id -> its configuration group's id for every trial of ``study`` with a
    trials row; {} if none (a damaged file is skipped with a warning)."""
    return _trials_column(root, study, "group_id")


def _trials_column(root: Path, study: str, column: str) -> dict[str, Any]:
    check_path_component(study, "study")
    compacted, own = visible_files(root, study, "trials")
    found: dict[str, Any] = {}
    # a trial's own file is read after the compacted rows: its row wins
    for path in ([compacted] if compacted else []) + list(own.values()):
        part = _read_or_warn(path, ["trial_id", column])
        if part is not None:
            found.update(zip(part["trial_id"].to_pylist(), part[column].to_pylist()))
    return found


def read_table_rows(root: Path, study: str, table: str) -> list[dict[str, Any]]:
    """Every visible row of ``table`` in ``study`` (each trial's own file, else its
    compacted rows), as dicts in trial id order; damaged files are skipped with a warning."""
    check_path_component(study, "study")
    compacted, own = visible_files(root, study, table)
    rows: list[dict[str, Any]] = []
    merged = _read_or_warn(compacted, None) if compacted is not None else None
    if merged is not None:
        rows += [row for row in merged.to_pylist() if row["trial_id"] not in own]
    for path in own.values():
        part = _read_or_warn(path, None)
        rows += part.to_pylist() if part is not None else []
    return sorted(rows, key=lambda row: row["trial_id"])  # stable: a trial's rows keep their order


def read_trial_rows(root: Path, study: str, table: str, trial_id: str) -> list[dict[str, Any]]:
    """One trial's rows of ``table`` as dicts (JSON columns stay text); [] when it has
    none, or they cannot be read. The one reader of a single trial's rows."""
    path = table_path(root, study, table, trial_id)
    try:
        if path.is_file():  # its own file wins over compacted rows
            return read_trial_file(path).to_pylist()
        # the newest generation alone: listing every trial's folder (visible_files) made
        # each trial's MLflow sync cost in proportion to the trials before it
        compacted = newest_compacted(root, study, table)
        if compacted is None:
            return []
        stamp = _stamp(compacted)
        start, length = _compacted_index(compacted, *stamp).get(trial_id, (0, 0))
        return _compacted_table(compacted, *stamp).slice(start, length).to_pylist()
    except (OSError, pa.ArrowException):
        return []


def read_trial_file(path: Path, columns: list[str] | None = None) -> pa.Table:
    """A trial's own results file as it was when opened, though a worker may replace it
    while it is read. pyarrow given a path can open it twice (its footer, then its
    pages): a rename between the two read the footer of one file and the pages of the
    other, "Invalid data" (3 of 12,000 reads of a file replaced in a loop here; none
    through one open file). One open file keeps one inode, and no hive key of its folder."""
    with pa.OSFile(str(path)) as file:
        return pq.read_table(file, columns=columns)


def _read_or_warn(path: Path, columns: list[str] | None) -> pa.Table | None:
    try:
        return read_trial_file(path, columns)
    except (OSError, pa.ArrowException) as error:
        warnings.warn(f"skipping damaged results file {path}: {error}", DamagedResultsWarning, stacklevel=3)
        return None


def _stamp(path: Path) -> tuple[int, int]:
    stat = path.stat()
    return stat.st_mtime_ns, stat.st_size


def rows_print(root: Path, study: str, trial_ids: Iterable[str] | None = None) -> tuple:
    """What changes whenever a row of these trials does, in their own files: each file's
    inode, modification time and size (trial_ids None: the study's compacted files',
    which hold rows of many trials). A results file is replaced whole (written beside,
    then renamed over), never written in place, so a replaced file has a new inode; a
    file removed or added changes the print too."""
    stamps = []
    for table in TABLES:
        paths = (list(compacted_generations(root, study, table).values()) if trial_ids is None
                 else [table_path(root, study, table, trial_id) for trial_id in sorted(trial_ids)])
        for path in paths:
            try:
                stat = path.stat()
            except FileNotFoundError:
                continue
            stamps.append((str(path), stat.st_ino, stat.st_mtime_ns, stat.st_size))
    return tuple(stamps)


# A compacted file is never rewritten (a new generation has a new name), so a reader
# that asks for many trials' rows (MLflow's re-sync, science checks, reuse) reads it
# once; the stamp makes a replaced file a new key all the same.
@functools.lru_cache(maxsize=4)
def _compacted_table(path: Path, mtime_ns: int, size: int) -> pa.Table:
    return pq.read_table(path, partitioning=None)


@functools.lru_cache(maxsize=4)
def _compacted_index(path: Path, mtime_ns: int, size: int) -> dict[str, tuple[int, int]]:
    """trial_id -> (first row, row count) in a compacted file, whose rows are sorted by trial id."""
    ids = pq.read_table(path, columns=["trial_id"], partitioning=None)["trial_id"].to_pylist()
    index: dict[str, tuple[int, int]] = {}
    for row, trial_id in enumerate(ids):
        start, length = index.get(trial_id, (row, 0))
        index[trial_id] = (start, length + 1)
    return index


def read_trial_row(root: Path, study: str, trial_id: str) -> dict[str, Any] | None:
    """The trial's row of ``trials``, or None."""
    rows = read_trial_rows(root, study, "trials", trial_id)
    return rows[0] if rows else None


def remove_temp_files(root: Path, study: str) -> list[Path]:
    """Delete the half-written temporary files a killed writer left in the study.

    Call it only while no trial of the study runs (the driver holds the study lock).
    """
    check_path_component(study, "study")
    stale = [p for p in (Path(root) / study).glob("**/.*.tmp-*") if p.is_file()]
    for path in stale:
        path.unlink(missing_ok=True)
    return stale


def trials_schema(rows: Iterable[dict[str, Any]]) -> pa.Schema:
    """The core trials columns, then one inferred column per other key, in first-seen order."""
    rows = list(rows)
    values: dict[str, list[Any]] = {}
    for row in rows:
        for key, value in row.items():
            if key not in TRIALS_CORE_SCHEMA.names:
                values.setdefault(key, []).append(value)
    extra = [pa.field(key, _infer_type(key, vals)) for key, vals in values.items()]
    return pa.schema(list(TRIALS_CORE_SCHEMA) + extra)


def _to_arrow(table: str, study: str, trial_id: str, rows: list[dict[str, Any]]) -> pa.Table:
    filled = [_fill_key(row, "trial_id", trial_id) for row in rows]
    if table == "trials":
        filled = [_trials_row(_fill_key(row, "study", study)) for row in filled]
        return pa.Table.from_pylist(filled, schema=trials_schema(filled))
    schema = FIXED_SCHEMAS[table]
    for row in filled:
        unknown = sorted(set(row) - set(schema.names))
        if unknown:
            raise ValueError(f"{table}: unknown columns {unknown}; columns are {schema.names}")
    return pa.Table.from_pylist(filled, schema=schema)


def _fill_key(row: dict[str, Any], key: str, expected: str) -> dict[str, Any]:
    # A row that names another trial or study would land in the wrong file: refuse it.
    if row.get(key, expected) != expected:
        raise ValueError(f"row has {key}={row[key]!r} but is written for {key}={expected!r}")
    return {**row, key: expected}


def _trials_row(row: dict[str, Any]) -> dict[str, Any]:
    missing = [f.name for f in TRIALS_CORE_SCHEMA if not f.nullable and row.get(f.name) is None]
    if missing:
        raise ValueError(f"trials row is missing required columns {missing}")
    if row["status"] not in {s.value for s in TrialStatus}:
        raise ValueError(
            f"trials status {row['status']!r} is not one of {', '.join(TrialStatus)}"
        )
    # Nested settings (e.g. train_digits [1, 40]) become JSON text, one column each.
    return {
        key: json.dumps(value, sort_keys=True) if isinstance(value, (list, tuple, dict)) else value
        for key, value in row.items()
    }


def _infer_type(key: str, values: list[Any]) -> pa.DataType:
    kinds = {type(v) for v in values if v is not None}
    if not kinds:
        return pa.null()  # DuckDB unions a NULL-typed column with any type
    if kinds == {bool}:
        return pa.bool_()
    if kinds == {int}:
        return pa.int64()
    if kinds <= {int, float}:
        return pa.float64()
    if kinds == {str}:
        return pa.string()
    names = ", ".join(sorted(k.__name__ for k in kinds))
    raise ValueError(f"trials column {key!r}: cannot store values of type {names}")
