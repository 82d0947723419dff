"""The per-trial Parquet writer: layout, atomic replace, schemas, name checks."""

from __future__ import annotations

import os
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from orchestrator.store import results_store
from orchestrator.store.results_store import (
    EVAL_SCHEMA,
    SAMPLES_SCHEMA,
    TRIALS_CORE_SCHEMA,
    read_trial_rows,
    read_trial_statuses,
    write_trial_table,
)

STARTED = datetime(2025, 1, 2, 3, 4, 5, tzinfo=timezone.utc)


def trials_row(status: str = "done", **config: object) -> dict[str, object]:
    return {
        "status": status,
        "config_json": "{}",
        "n_params": 1234,
        "device": "cpu",
        "started_at": STARTED,
        **config,
    }


def eval_rows(n: int) -> list[dict[str, object]]:
    return [
        {"step": 100, "digits": d, "n": 10, "correct": d, "accuracy": d / 10,
         "in_distribution": d <= 5}
        for d in range(1, n + 1)
    ]


def test_writes_one_file_in_hive_layout(tmp_path: Path) -> None:
    path = write_trial_table(tmp_path, "quick", "eval", "t1", eval_rows(3))

    assert path == tmp_path / "quick" / "eval" / "trial_id=t1" / "part-0.parquet"
    assert sorted(p.name for p in path.parent.iterdir()) == ["part-0.parquet"]
    table = pq.read_table(path, partitioning=None)
    assert table.schema == EVAL_SCHEMA
    assert table["trial_id"].to_pylist() == ["t1", "t1", "t1"]
    assert table["accuracy"].to_pylist() == [0.1, 0.2, 0.3]


def test_rewrite_replaces_rows_instead_of_adding(tmp_path: Path) -> None:
    write_trial_table(tmp_path, "quick", "eval", "t1", eval_rows(3))
    path = write_trial_table(tmp_path, "quick", "eval", "t1", eval_rows(2))

    assert pq.read_table(path, partitioning=None).num_rows == 2
    assert sorted(p.name for p in path.parent.iterdir()) == ["part-0.parquet"]


def test_failed_write_keeps_old_file_and_leaves_no_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_trial_table(tmp_path, "quick", "eval", "t1", eval_rows(3))

    def write_half_then_fail(table: pa.Table, where: Path) -> None:
        assert where.name.startswith(".part-0.parquet.tmp-")  # never the readers' name
        Path(where).write_bytes(b"PAR1 half a file")
        raise OSError("disk full")

    monkeypatch.setattr(results_store.pq, "write_table", write_half_then_fail)
    with pytest.raises(OSError, match="disk full"):
        write_trial_table(tmp_path, "quick", "eval", "t1", eval_rows(1))

    assert sorted(p.name for p in path.parent.iterdir()) == ["part-0.parquet"]
    assert pq.read_table(path, partitioning=None).num_rows == 3


def test_zero_rows_write_an_empty_file_with_the_schema(tmp_path: Path) -> None:
    write_trial_table(tmp_path, "quick", "samples", "t1", [{"step": 1, "correct": True}])
    path = write_trial_table(tmp_path, "quick", "samples", "t1", [])

    table = pq.read_table(path, partitioning=None)
    assert table.num_rows == 0
    assert table.schema == SAMPLES_SCHEMA


def test_all_null_column_keeps_its_type(tmp_path: Path) -> None:
    rows = [{"step": 1, "digits": 3, "idx": 0, "correct": True, "first_wrong": None}]
    path = write_trial_table(tmp_path, "quick", "samples", "t1", rows)

    assert pq.read_schema(path).field("first_wrong").type == pa.int64()


def test_trials_schema_is_core_plus_inferred_config_columns(tmp_path: Path) -> None:
    row = trials_row(task="addition", weight_seed=2, lr=3e-4, index_hints=True,
                     window=None, train_digits=[1, 40])
    path = write_trial_table(tmp_path, "quick", "trials", "t1", [row])

    table = pq.read_table(path, partitioning=None)
    assert table.schema.names[: len(TRIALS_CORE_SCHEMA)] == TRIALS_CORE_SCHEMA.names
    assert table.schema.field("started_at").type == pa.timestamp("us", tz="UTC")
    extra = {f.name: f.type for f in table.schema if f.name not in TRIALS_CORE_SCHEMA.names}
    assert extra == {"task": pa.string(), "weight_seed": pa.int64(), "lr": pa.float64(),
                     "index_hints": pa.bool_(), "window": pa.null(),
                     "train_digits": pa.string()}
    got = table.to_pylist()[0]
    assert (got["study"], got["trial_id"], got["train_digits"]) == ("quick", "t1", "[1, 40]")


def test_read_trial_statuses(tmp_path: Path) -> None:
    assert read_trial_statuses(tmp_path, "nothing_here") == {}
    write_trial_table(tmp_path, "quick", "trials", "t1", [trials_row("done")])
    write_trial_table(tmp_path, "quick", "trials", "t2", [trials_row("running", pe="fire")])
    stray = tmp_path / "quick" / "trials" / "trial_id=t3" / ".part-0.parquet.tmp-99"
    stray.parent.mkdir()
    stray.write_bytes(b"not parquet")

    assert read_trial_statuses(tmp_path, "quick") == {"t1": "done", "t2": "running"}


def test_unknown_table_lists_the_valid_ones(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="trials, train, eval, samples"):
        write_trial_table(tmp_path, "quick", "evals", "t1", [])


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({"step": 1, "acuracy": 0.5}, "unknown columns"),
        ({"step": 1, "trial_id": "other"}, "trial_id='other'"),
    ],
)
def test_bad_fixed_rows_are_refused(tmp_path: Path, row: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        write_trial_table(tmp_path, "quick", "eval", "t1", [row])
    assert not (tmp_path / "quick" / "eval" / "trial_id=t1" / "part-0.parquet").exists()


@pytest.mark.parametrize(
    ("row", "message"),
    [
        (trials_row(status="finished"), "not one of running, done, diverged, failed"),
        ({**trials_row(), "device": None}, "missing required columns"),
        (trials_row(seed={1, 2}), "cannot store"),
    ],
)
def test_bad_trials_rows_are_refused(tmp_path: Path, row: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        write_trial_table(tmp_path, "quick", "trials", "t1", [row])


@pytest.mark.parametrize("name", ["", ".", "..", "../up", "a/b", ".hidden", "a b", "x\n", "é"])
@pytest.mark.parametrize("field", ["study", "trial_id"])
def test_unsafe_names_are_rejected(tmp_path: Path, name: str, field: str) -> None:
    names = {"study": "quick", "trial_id": "t1", field: name}
    with pytest.raises(ValueError, match="not a safe folder name"):
        write_trial_table(tmp_path, names["study"], "eval", names["trial_id"], [])
    assert list(tmp_path.iterdir()) == []


def test_safe_names_are_accepted(tmp_path: Path) -> None:
    path = write_trial_table(tmp_path, "seed_robustness-v1.2", "train", "3fa9c0d1", [])
    assert path.exists()


@pytest.mark.parametrize("read", [
    lambda root: read_trial_rows(root, "quick", "eval", "t1"),
    lambda root: results_store.read_table_rows(root, "quick", "eval"),
], ids=["one trial", "every trial"])
def test_a_file_replaced_while_it_is_read_is_read_as_it_was_opened(tmp_path: Path, monkeypatch, read) -> None:
    """A worker's rename landing once the reader has the file open (pyarrow reading a
    path opens it again for its pages, which mixed two files' bytes) leaves the reader
    with the rows it opened, whole."""
    write_trial_table(tmp_path, "quick", "eval", "t1", eval_rows(3))
    newer = write_trial_table(tmp_path / "newer", "quick", "eval", "t1", eval_rows(2))
    path = tmp_path / "quick" / "eval" / "trial_id=t1" / "part-0.parquet"
    real_read = results_store.pq.read_table

    def replaced_once_open(source, *args, **kwargs):
        if newer.exists():
            os.replace(newer, path)
        return real_read(source, *args, **kwargs)

    monkeypatch.setattr(results_store.pq, "read_table", replaced_once_open)
    assert [row["digits"] for row in read(tmp_path)] == [1, 2, 3]
    assert pq.read_table(path, partitioning=None).num_rows == 2  # the rename did land
