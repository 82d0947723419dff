"""Storage faults no retry can fix (orchestrator.store.storage_faults): recognised in an
exception's chain and in Tune's error text, never retried (the worker raises
StorageFault and writes no `failed` row; the driver's callback trips the Stopper that
ends the study), and told in one message with exit 74. And `status` telling a dead
driver's trials (interrupted) from a running driver's (store/study_locks.driver_of).

The real full disk in the middle of a real study is tests/test_full_disk.py (slow).
"""

from __future__ import annotations

import errno
import pickle
import sqlite3
from datetime import datetime, timezone
from pathlib import Path
from types import SimpleNamespace

import pytest
import sqlalchemy.exc
from mlflow.exceptions import MlflowException
from typer.testing import CliRunner

from orchestrator.cli import app
from orchestrator.running import trainable
from orchestrator.running.recovery import StorageFaultStop, TrialFailureCallback
from orchestrator.running.tune_runner import _recover_line, trial_params
from orchestrator.store.results_store import read_trial_row, write_trial_table
from orchestrator.store.storage_faults import (
    EXIT_CODE,
    StorageFault,
    fault_from_text,
    fault_of,
    free_space,
    words,
)
from orchestrator.store.study_locks import driver_of, study_lock
from orchestrator.store.trial_rows import trials_row
from orchestrator.studies.study import load_study

STUDY = Path(__file__).parent / "study_files" / "good_two_trials.yaml"
STARTED = datetime(2025, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
runner = CliRunner()


def sqlite_full() -> Exception:
    """SQLite's full disk as MLflow raises it: an MlflowException from SQLAlchemy's error."""
    try:
        try:
            raise sqlalchemy.exc.OperationalError("INSERT INTO metrics ...", {},
                                                  sqlite3.OperationalError("database or disk is full"))
        except sqlalchemy.exc.OperationalError as error:
            raise MlflowException(f"(sqlite3.OperationalError) {error.orig}") from error
    except MlflowException as raised:
        return raised


@pytest.mark.parametrize(("error", "kind"), [
    (OSError(errno.ENOSPC, "No space left on device", "/r/s/train/x.parquet"), "full"),
    (OSError(errno.ENOSPC, "Error writing bytes to file. Detail: [errno 28] No space left on device"), "full"),
    (OSError(errno.EDQUOT, "Disk quota exceeded"), "full"),
    (OSError(errno.EROFS, "Read-only file system", "/r/s/trials"), "read-only"),
    (OSError(errno.ESTALE, "Stale file handle"), "gone"),
    (sqlite_full(), "full"),
    (sqlite3.OperationalError("attempt to write a readonly database"), "read-only"),
])
def test_storage_faults_are_recognised_anywhere_in_the_chain(error: Exception, kind: str, tmp_path: Path) -> None:
    (tmp_path / ".s.lock").touch()  # a results root in use (an empty one is a mount point left behind)
    (tmp_path / "mlflow.db").touch()  # and its store (SQLite calls a deleted one "readonly" too)
    assert fault_of(error, tmp_path).kind == kind
    try:
        try:
            raise error
        except Exception as inner:
            raise RuntimeError("unexpected pos 704 vs 598") from inner  # as torch.save wraps it
    except RuntimeError as outer:
        fault = fault_of(outer, tmp_path, tmp_path / "mlflow.db")
    assert fault.kind == kind
    assert fault.path == getattr(error, "filename", None) or fault.path in (str(tmp_path), str(tmp_path / "mlflow.db"))


def test_other_errors_are_not_storage_faults(tmp_path: Path) -> None:
    assert fault_of(ValueError("bad config"), tmp_path) is None
    assert fault_of(OSError(errno.EACCES, "Permission denied"), tmp_path) is None
    missing = FileNotFoundError(errno.ENOENT, "No such file or directory", str(tmp_path / "x"))
    (tmp_path / ".s.lock").touch()
    assert fault_of(missing, tmp_path) is None  # the results root is there: another missing file
    assert fault_from_text("FileNotFoundError: [Errno 2] No such file or directory: 'x'", tmp_path) is None


@pytest.mark.parametrize("error", [
    FileNotFoundError(errno.ENOENT, "No such file or directory", "/gone/s/trials"),
    sqlite3.OperationalError("unable to open database file"),
    sqlite3.OperationalError("no such table: runs"),  # a store made again, empty, in the deleted one's place
    sqlite3.OperationalError("attempt to write a readonly database"),  # SQLite's word for a deleted database
])
def test_a_missing_file_under_a_vanished_root_is_a_fault(error: Exception, tmp_path: Path) -> None:
    assert fault_of(error, tmp_path / "removed").kind == "gone"
    (tmp_path / "mount-point").mkdir()  # an unmounted filesystem leaves its empty mount point
    assert fault_of(error, tmp_path / "mount-point").kind == "gone"
    assert fault_from_text(f"{type(error).__name__}: {error}", tmp_path / "removed").kind == "gone"
    remade = tmp_path / "remade"
    (remade / "s" / "_tune").mkdir(parents=True)  # Tune's driver made its folders again
    assert fault_of(error, remade).kind == "gone"
    (remade / ".s.lock").touch()
    in_use = fault_of(error, remade)  # the driver's lock is there: the root is in use
    assert (in_use and in_use.kind) == ("read-only" if "readonly" in str(error) else None)


def test_a_workers_fault_survives_pickling_and_tunes_error_text(tmp_path: Path) -> None:
    fault = StorageFault("full", "/r/s/_checkpoints/a.pt", "OSError: [Errno 28] No space left on device")
    assert pickle.loads(pickle.dumps(fault)).__dict__ == fault.__dict__
    text = f"Failure # 1 (occurred at 2026-11-26)\nray::ImplicitFunc.train() (pid=1)\n  File ...\n{fault}\n"
    told = fault_from_text(text, tmp_path)
    assert (told.kind, told.path, told.detail) == (fault.kind, fault.path, fault.detail)
    assert fault_from_text("sqlite3.OperationalError: database or disk is full", tmp_path).path == str(tmp_path)
    assert fault_from_text("ActorDiedError: The actor died unexpectedly", tmp_path) is None


def test_the_message_names_the_place_its_free_space_what_was_kept_and_the_command(tmp_path: Path) -> None:
    fault = StorageFault("full", str(tmp_path / "results" / "s" / "train"), "OSError: [Errno 28] No space left")
    first, kept, then = words(fault, "3 finished trials", "lg-study run s.yaml --results results")
    assert first.startswith(f"the disk holding the results is full: {fault.path} (")
    # the filesystem of its nearest existing folder (the free bytes may move meanwhile)
    assert " free now, of " in first and free_space(tmp_path).partition(", on ")[2] in first
    assert kept == "kept: 3 finished trials"
    assert then == "to continue: free space there (or raise the quota), then run  lg-study run s.yaml --results results"
    assert "read-only" in words(StorageFault("read-only", "/r"), "", "x")[0]


def a_trial(tmp_path: Path, error_text: str):
    study = load_study(STUDY)
    config = study.trials[0]
    write_trial_table(tmp_path, study.name, "trials", config.trial_id,
                      [{**trials_row(study.name, config, "running", "cpu", STARTED), "pid": 123}])
    error_file = tmp_path / "error.txt"
    error_file.write_text(error_text)
    return study, SimpleNamespace(config={"trial": trial_params(config, study, tmp_path)},
                                  num_failures=1, error_file=str(error_file))


@pytest.mark.parametrize("event", ["on_trial_recover", "on_trial_error"])
def test_a_trial_that_met_a_full_disk_stops_the_study_and_stays_running(tmp_path: Path, event: str) -> None:
    """Whether Tune would retry it (on_trial_recover) or not: the stop trips before
    Tune's next step starts the retry, and the trial is not written `failed`."""
    study, trial = a_trial(tmp_path, "Failure # 1\nStorageFault: storage fault (full): /r/x.parquet: OSError: "
                                     "[Errno 28] No space left on device\n")
    stop = StorageFaultStop()
    assert not stop.stop_all()
    getattr(TrialFailureCallback(tmp_path, study.name, stop), event)(0, [], trial)
    assert stop.stop_all() and stop.fault.path == "/r/x.parquet"
    assert not stop(trial.config["trial"]["trial_id"], {})  # it stops the whole study, not one trial
    assert read_trial_row(tmp_path, study.name, trial.config["trial"]["trial_id"])["status"] == "running"
    assert _recover_line(trial, stop).endswith("attempt 1 failed (full: /r/x.parquet); not retried: the study stops")


def test_a_trial_whose_worker_died_is_still_retried(tmp_path: Path) -> None:
    study, trial = a_trial(tmp_path, "Failure # 1\nActorDiedError: The actor died unexpectedly\n")
    stop = StorageFaultStop()
    TrialFailureCallback(tmp_path, study.name, stop).on_trial_recover(0, [], trial)
    assert not stop.stop_all()
    assert _recover_line(trial, stop).endswith("(its worker process died); retrying from its last checkpoint")


@pytest.mark.parametrize(("code", "kind"), [(errno.ENOSPC, "full"), (errno.EROFS, "read-only")])
def test_the_worker_raises_a_storage_fault_and_writes_no_failed_row(tmp_path: Path, monkeypatch, code, kind) -> None:
    study = load_study(STUDY)
    config = study.trials[0]
    params = trial_params(config, study, tmp_path)
    real_write = trainable.write_trial_table

    def write(root, name, table, trial_id, rows):
        if table != "trials":
            raise OSError(code, "the disk says no")
        return real_write(root, name, table, trial_id, rows)

    monkeypatch.setattr(trainable, "write_trial_table", write)
    monkeypatch.setattr(trainable.tune, "report", lambda metrics: None)
    (tmp_path / study.name).mkdir()  # the driver makes it and its lock before any trial starts
    (tmp_path / f".{study.name}.lock").touch()
    with pytest.raises(StorageFault) as raised:
        trainable.run_trial({"trial": params})
    assert raised.value.kind == kind
    assert read_trial_row(tmp_path, study.name, config.trial_id)["status"] == "running"


def test_a_worker_whose_study_folder_vanished_writes_nothing(tmp_path: Path) -> None:
    """Deleted, or its filesystem unmounted: the worker would make the folders again
    (under the mount point) and its rows would land where no one looks."""
    study = load_study(STUDY)
    params = trial_params(study.trials[0], study, tmp_path / "results")
    with pytest.raises(StorageFault) as raised:
        trainable.run_trial({"trial": params})
    assert raised.value.kind == "gone" and raised.value.path == str(tmp_path / "results" / study.name)
    assert not (tmp_path / "results").exists()
    (tmp_path / "results" / study.name / "_tune").mkdir(parents=True)  # made again by Tune's driver
    with pytest.raises(StorageFault, match="gone"):
        trainable.run_trial({"trial": params})
    assert sorted(p.name for p in (tmp_path / "results" / study.name).iterdir()) == ["_tune"]


def test_run_stops_on_a_full_store_with_one_message_and_exit_74(tmp_path: Path, monkeypatch) -> None:
    from orchestrator.running import dispatch

    def full(study, context):
        raise sqlite_full()

    monkeypatch.setattr(dispatch, "run_study", full)
    results = tmp_path / "results"
    results.mkdir()
    (results / f".{load_study(STUDY).name}.lock").touch()  # as the driver left it
    outcome = runner.invoke(app, ["run", str(STUDY), "--results", str(results), "--verbose"])
    said = " ".join(outcome.output.split())
    assert outcome.exit_code == EXIT_CODE == 74, outcome.output
    assert "Traceback" not in outcome.output
    assert f"stopped: the disk holding the results is full: {results.resolve() / 'mlflow.db'} (" in said
    assert "kept: 0 finished trials, and 0 interrupted ones" in said
    assert f"then run lg-study run {STUDY} --results {results}" in said


def test_exit_74_is_documented_in_help() -> None:
    said = " ".join(runner.invoke(app, ["run", "--help"]).output.split())
    assert "exit 74" in said


def test_status_shows_a_dead_drivers_trials_as_interrupted_with_the_resume_command(tmp_path: Path) -> None:
    study = load_study(STUDY)
    config = study.trials[0]
    write_trial_table(tmp_path, study.name, "trials", config.trial_id,
                      [trials_row(study.name, config, "running", "cpu", STARTED)])
    write_trial_table(tmp_path, study.name, "eval", config.trial_id, [
        {"trial_id": config.trial_id, "step": step, "digits": 2, "n": 8, "correct": 1, "accuracy": 0.125,
         "in_distribution": True} for step in (20, 40)])
    status = ["status", str(STUDY), "--results", str(tmp_path)]
    with study_lock(tmp_path, study.name):  # a live driver
        assert driver_of(tmp_path, study.name).startswith("pid ")
        live = " ".join(runner.invoke(app, status).output.split())
    assert f"{study.name}: running 1" in live and "driven by lg-study pid" in live and "interrupted" not in live
    assert driver_of(tmp_path, study.name) is None  # the lock file stays; no one holds it
    dead = runner.invoke(app, status)
    said = " ".join(dead.output.split())
    assert dead.exit_code == 0, dead.output
    assert f"{study.name}: interrupted 1" in said and "running 1" not in said
    assert "no lg-study process holds the study" in said
    assert f"{config.trial_id} │ 2025-01-02 03:04:05 │" in said and "│ 40 │" in said
    assert f"resume them (each from its last checkpoint): lg-study run {STUDY} --results {tmp_path}" in said


def test_a_deleted_store_is_gone_not_read_only(tmp_path: Path) -> None:
    """SQLite keeps writing a deleted database through its open file, then calls it
    "readonly"; the workers have meanwhile made the study's folders again."""
    (tmp_path / "s" / "trials").mkdir(parents=True)
    error = sqlite3.OperationalError("attempt to write a readonly database")
    (tmp_path / ".s.lock").touch()
    assert fault_of(error, tmp_path, tmp_path / "mlflow.db").kind == "gone"
    (tmp_path / "mlflow.db").touch()
    assert fault_of(error, tmp_path, tmp_path / "mlflow.db").kind == "read-only"
