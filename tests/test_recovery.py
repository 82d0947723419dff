"""The pieces that make a study survive faults, without Ray: MLflow runs re-attached
without repeated steps and interrupted ones ended, MLflow brought up to date from
Parquet, the study lock, checkpoints and the rows a resumed trial continues, the
driver's `failed` row, SIGTERM, damaged results."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import textwrap
from datetime import datetime, timezone
from pathlib import Path
from types import SimpleNamespace

import pyarrow.parquet as pq
import pytest
import torch
from typer.testing import CliRunner

from analysis.query import QueryError, open_results, run_query
from lengthgen import train
from orchestrator.cli import app
from orchestrator.mlflow_tracking.mlflow_sync import sync_study
from orchestrator.mlflow_tracking.tracking import StudyTracker
from orchestrator.running.recovery import TrialFailureCallback, stop_on_sigterm
from orchestrator.running.trainable import (
    load_checkpoint,
    resume_history,
    save_checkpoint,
    write_history,
)
from orchestrator.running.tune_runner import trial_params
from orchestrator.store.results_store import (
    read_trial_row,
    read_trial_statuses,
    remove_temp_files,
    write_trial_table,
)
from orchestrator.store.study_locks import StudyBusy, study_lock
from orchestrator.store.trial_rows import result_rows, trials_row
from orchestrator.studies.study import load_study
from results_contract.damaged import DamagedResultsWarning
from results_contract.experiments import default_store_uri
from results_contract.layout import checkpoint_path, table_path

STUDY = Path(__file__).parent / "study_files" / "good_two_trials.yaml"
TINY = {"train.steps": 6, "train.log_every": 3, "eval.every": 3, "eval.samples": 4}
STARTED = datetime(2025, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
runner = CliRunner()


@pytest.fixture(scope="module")
def tiny_study(tmp_path_factory) -> Path:
    """The two-trial study, six steps long."""
    path = tmp_path_factory.mktemp("study") / "tiny.yaml"
    path.write_text(STUDY.read_text() + "  tiny: {" + ", ".join(f"{k}: {v}" for k, v in TINY.items()) + "}\n")
    return path


@pytest.fixture(scope="module")
def trained(tiny_study):
    """One real tiny trial: its config, result and its first checkpoint (step 3)."""
    config = load_study(tiny_study, "tiny").trials[0]
    states = []

    def keep(report):  # a copy now: the state's tensors are the live model's
        if report.checkpoint:
            buffer = io.BytesIO()
            torch.save(report.checkpoint(), buffer)
            states.append(torch.load(io.BytesIO(buffer.getvalue()), weights_only=True))

    result = train(config, on_report=keep, device="cpu")
    return config, result, states[0]


def test_reattached_run_skips_steps_it_already_has(tracker: StudyTracker) -> None:
    run_id = tracker.run_for_trial("t", {}, {})
    for step in (10, 20, 30):
        tracker.log_metrics(run_id, {"loss": 1.0 / step, "acc/digits_003": 0.5}, step)
    tracker.log_metrics(run_id, {"loss": 9.0}, 20)  # a repeat in the same process
    # the next driver re-attaches; the trial resumes from its checkpoint at step 20
    resumed = StudyTracker(tracker.client.tracking_uri, tracker.study)
    assert resumed.run_for_trial("t", {}, {}) == run_id
    for step in (30, 40):
        resumed.log_metrics(run_id, {"loss": 1.0 / step, "acc/digits_003": 0.75}, step)
    history = tracker.client.get_metric_history(run_id, "loss")
    assert [(m.step, m.value) for m in history] == [(10, 0.1), (20, 0.05), (30, 1 / 30), (40, 0.025)]
    assert [m.step for m in tracker.client.get_metric_history(run_id, "acc/digits_003")] == [10, 20, 30, 40]


def test_running_runs_are_ended_as_killed_and_resumed_later(tracker: StudyTracker) -> None:
    left = tracker.run_for_trial("a", {}, {})
    done = tracker.run_for_trial("b", {}, {})
    tracker.finish(done, "FINISHED", {}, {})
    assert tracker.end_running_runs("KILLED") == ["a"]
    run = tracker.client.get_run(left)
    assert (run.info.status, run.data.tags["status"]) == ("KILLED", "killed")
    assert tracker.client.get_run(done).info.status == "FINISHED"
    # the trial runs again: the same run, RUNNING again, then finished
    assert tracker.run_for_trial("a", {}, {}) == left
    assert tracker.client.get_run(left).info.status == "RUNNING"
    tracker.finish(left, "FINISHED", {}, {})
    assert tracker.runs_by_trial() == {
        "a": [{"run_id": left, "status": "FINISHED", "outcome": "done"}],
        "b": [{"run_id": done, "status": "FINISHED", "outcome": "done"}],
    }
    assert tracker.delete_runs() == 2 and tracker.runs_by_trial() == {}


def test_finished_trial_without_its_mlflow_run_is_completed_from_parquet(
    tmp_path, trained, tiny_study, tracker
) -> None:
    config, result, _ = trained
    study = load_study(tiny_study, "tiny")
    root = tmp_path / "results"
    for table, rows in result_rows(result).items():
        write_trial_table(root, study.name, table, config.trial_id, rows)
    write_trial_table(root, study.name, "trials", config.trial_id,
                      [trials_row(study.name, config, "done", "cpu", STARTED)])

    def sync():
        return sync_study(tracker, root, study.name, [c.trial_id for c in study.trials])

    assert sync() == [config.trial_id]
    assert sync() == []  # nothing left to repair
    [entry] = tracker.runs_by_trial()[config.trial_id]
    run = tracker.client.get_run(entry["run_id"])
    assert (run.info.status, run.data.tags["status"]) == ("FINISHED", "done")
    assert [m.step for m in tracker.client.get_metric_history(entry["run_id"], "loss")] == [3, 6]
    assert [m.step for m in tracker.client.get_metric_history(entry["run_id"], "acc/digits_003")] == [3, 6]
    assert run.data.metrics["summary/in_distribution_accuracy"] == result.summary["in_distribution_accuracy"]
    assert {a.path for a in tracker.client.list_artifacts(entry["run_id"])} >= {"config.yaml"}


def test_checkpoint_round_trip_is_weights_only(tmp_path, trained) -> None:
    config, result, state = trained
    path = checkpoint_path(tmp_path, "two_trials", config.trial_id)
    state = dict(state)
    write_history(tmp_path, "two_trials", config.trial_id, state.pop("history"))  # as the trainable does
    save_checkpoint(path, state)
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary file left
    torch.load(path, weights_only=True)  # plain tensors, dicts, lists, numbers, strings
    loaded = load_checkpoint(path, config)
    assert loaded["step"] == state["step"] == 3 and "history" not in loaded
    loaded["history"] = resume_history(tmp_path, "two_trials", config.trial_id, loaded)
    resumed = train(config, resume_state=loaded, device="cpu")
    assert [t.loss for t in resumed.train] == pytest.approx([t.loss for t in result.train])
    assert [t.step for t in resumed.train] == [3, 6] and [s for s, _ in resumed.eval] == [3, 3, 6, 6]


def test_a_resumed_trial_continues_the_rows_up_to_its_checkpoint(tmp_path, trained) -> None:
    """The rows are the history a resumed trial continues: those of steps after the
    checkpoint (written before an interruption) are left out, as the trial trains
    those steps again; a checkpoint of the previous version brings its own history."""
    config, result, state = trained
    rows = result_rows(result)  # steps 3 and 6, the checkpoint is at 3
    for table in ("train", "eval"):
        write_trial_table(tmp_path, "s", table, config.trial_id, rows[table])
    history = resume_history(tmp_path, "s", config.trial_id, {k: v for k, v in state.items() if k != "history"})
    assert history == {"train": state["history"]["train"],
                       "eval": [tuple(pair) for pair in state["history"]["eval"]],
                       "long_loss": [tuple(pair) for pair in state["history"]["long_loss"]]}
    assert [t["step"] for t in history["train"]] == [3]
    assert resume_history(tmp_path, "s", config.trial_id, state) is state["history"]
    # rows that do not reach the checkpoint (a damaged file) give none: the trial starts over
    write_trial_table(tmp_path, "s", "eval", config.trial_id, [])
    assert resume_history(tmp_path, "s", config.trial_id, {"step": 3}) is None


def test_unusable_checkpoints_are_ignored(tmp_path, trained, tiny_study, capsys) -> None:
    config, _, state = trained
    path = checkpoint_path(tmp_path, "two_trials", config.trial_id)
    save_checkpoint(path, state)
    path.write_bytes(path.read_bytes()[:100])  # truncated
    assert load_checkpoint(path, config) is None
    other = load_study(tiny_study, "tiny").trials[1]
    save_checkpoint(path, state)
    assert load_checkpoint(path, other) is None  # another config's state
    assert "ignoring" in capsys.readouterr().err


def test_study_lock_admits_one_driver_and_dies_with_it(tmp_path) -> None:
    with study_lock(tmp_path, "s"), pytest.raises(StudyBusy, match=f"pid {os.getpid()}"), \
            study_lock(tmp_path, "s"):
        pass
    with study_lock(tmp_path, "s"):  # released
        pass
    # another driver (the same flock on the same file, without lg-study's imports)
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import fcntl, os, time
        fd = os.open({str(tmp_path / ".s.lock")!r}, os.O_RDWR)
        fcntl.flock(fd, fcntl.LOCK_EX)
        print("locked", flush=True)
        time.sleep(60)
    """)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "locked"
    with pytest.raises(StudyBusy), study_lock(tmp_path, "s"):
        pass
    holder.kill()  # SIGKILL: no cleanup runs, the kernel drops the lock
    holder.wait()
    with study_lock(tmp_path, "s"):
        pass


def test_driver_marks_a_trial_whose_worker_died_failed(tmp_path) -> None:
    study = load_study(STUDY)
    config = study.trials[0]
    write_trial_table(tmp_path, study.name, "trials", config.trial_id,
                      [{**trials_row(study.name, config, "running", "cpu", STARTED), "pid": 123}])
    error_file = tmp_path / "error.txt"
    error_file.write_text("Failure # 1\nActorDiedError: first\nFailure # 2 (occurred at now)\n"
                          "ActorDiedError: The actor died unexpectedly\n")
    trial = SimpleNamespace(config={"trial": trial_params(config, study, tmp_path)},
                            num_failures=2, error_file=str(error_file))
    TrialFailureCallback(tmp_path, study.name).on_trial_error(0, [], trial)
    row = read_trial_row(tmp_path, study.name, config.trial_id)
    assert row["status"] == "failed" and row["pid"] == 123 and row["started_at"] == STARTED
    assert row["error"] == ("gave up after 2 failed attempt(s); last error: "
                            "Failure # 2 (occurred at now) ActorDiedError: The actor died unexpectedly")
    # a trial that raised wrote its own row with the traceback: it is kept
    write_trial_table(tmp_path, study.name, "trials", config.trial_id,
                      [trials_row(study.name, config, "failed", "cpu", STARTED, error="Traceback ...")])
    TrialFailureCallback(tmp_path, study.name).on_trial_error(0, [], trial)
    assert read_trial_row(tmp_path, study.name, config.trial_id)["error"] == "Traceback ..."


def test_sigterm_acts_as_sigint_while_fitting() -> None:
    calls = []
    previous = signal.signal(signal.SIGINT, lambda *_: calls.append("int"))
    sigterm = signal.getsignal(signal.SIGTERM)  # ray.init installs one in a driver
    try:
        with stop_on_sigterm():
            signal.signal(signal.SIGINT, lambda *_: calls.append("tune"))  # as Tune does
            os.kill(os.getpid(), signal.SIGTERM)
        assert calls == ["tune"]
        assert signal.getsignal(signal.SIGTERM) == sigterm
        os.kill(os.getpid(), signal.SIGINT)  # the handler from before is back
        assert calls == ["tune", "int"]
    finally:
        signal.signal(signal.SIGINT, previous)


def damaged_study(root: Path) -> Path:
    """A study with two good trials, one truncated eval file and a stray Parquet file."""
    study = load_study(STUDY)
    for config in study.trials:
        write_trial_table(root, study.name, "trials", config.trial_id,
                          [trials_row(study.name, config, "done", "cpu", STARTED)])
        write_trial_table(root, study.name, "eval", config.trial_id, [
            {"step": 30, "digits": 2, "n": 8, "correct": 8, "accuracy": 1.0, "in_distribution": True}])
    cut = table_path(root, study.name, "eval", study.trials[0].trial_id)
    cut.write_bytes(cut.read_bytes()[:40])
    pq.write_table(pq.read_table(table_path(root, study.name, "eval", study.trials[1].trial_id)),
                   root / study.name / "eval" / "notes.parquet")
    return cut


def test_query_skips_damaged_files_with_a_warning(tmp_path) -> None:
    cut = damaged_study(tmp_path)
    with pytest.warns(DamagedResultsWarning) as caught:
        con = open_results(tmp_path, "two_trials")
    with con:
        assert run_query(con, "select count(*) as n from eval").to_pylist() == [{"n": 1}]
        assert run_query(con, "select count(*) as n from trials").to_pylist() == [{"n": 2}]
    messages = sorted(str(w.message) for w in caught)
    assert messages[0].startswith(f"skipping damaged results file {tmp_path}/two_trials/eval/notes.parquet")
    assert messages[1].startswith(f"skipping damaged results file {cut}")
    outcome = runner.invoke(app, ["query", "select count(*) as n from eval", "--study", "two_trials",
                                  "--results", str(tmp_path), "--format", "json"])
    assert outcome.exit_code == 0, outcome.output
    assert json.loads(outcome.stdout) == [{"n": 1}]
    assert f"warning: skipping damaged results file {cut}" in " ".join(outcome.stderr.split())


def test_status_and_resume_survive_a_damaged_trials_file(tmp_path) -> None:
    damaged_study(tmp_path)
    study = load_study(STUDY)
    broken = table_path(tmp_path, study.name, "trials", study.trials[1].trial_id)
    broken.write_bytes(b"not a parquet file")
    with pytest.warns(DamagedResultsWarning):
        assert read_trial_statuses(tmp_path, study.name) == {study.trials[0].trial_id: "done"}
    outcome = runner.invoke(app, ["status", str(STUDY), "--results", str(tmp_path)])
    assert outcome.exit_code == 0, outcome.output
    assert "done 1" in outcome.stdout and "1 not started" in outcome.stdout
    assert f"skipping damaged results file {broken}" in " ".join(outcome.stderr.split())


@pytest.mark.filterwarnings("ignore::results_contract.damaged.DamagedResultsWarning")
def test_queries_cannot_write(tmp_path) -> None:
    damaged_study(tmp_path)
    with open_results(tmp_path, "two_trials") as con:
        for sql in (f"copy (select 1) to '{tmp_path}/x.csv'", f"attach '{tmp_path}/x.db'",
                    f"export database '{tmp_path}/dump'"):
            with pytest.raises(QueryError, match="refused"):
                run_query(con, sql)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["two_trials"]


def test_temporary_files_of_killed_writers_are_removed(tmp_path) -> None:
    path = write_trial_table(tmp_path, "s", "eval", "t1", [])
    stale = path.with_name(".part-0.parquet.tmp-99-abc")
    stale.write_bytes(b"PAR1 half")
    assert remove_temp_files(tmp_path, "s") == [stale]
    assert sorted(p.name for p in path.parent.iterdir()) == ["part-0.parquet"]


def test_restart_asks_first(tmp_path) -> None:
    damaged_study(tmp_path)
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    outcome = runner.invoke(app, ["run", str(STUDY), "--results", str(tmp_path), "--restart"], input="n\n")
    assert outcome.exit_code == 1
    assert "--restart deletes" in outcome.output and "nothing was changed" in outcome.output
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


def _share_a_new_store(uri: str, index: int, barrier, outcomes) -> None:
    try:
        barrier.wait()
        tracker = StudyTracker(uri, f"study{index}")  # the first call creates the store
        run_id = tracker.run_for_trial(f"t{index}", {}, {"a": index})
        for step in range(10):
            tracker.log_metrics(run_id, {"loss": 1.0 / (step + 1)}, step)
        tracker.finish(run_id, "FINISHED", {}, {})
        outcomes.put((index, "ok"))
    except Exception as error:  # noqa: BLE001 (the outcome is what the test checks)
        outcomes.put((index, f"{type(error).__name__}: {error}"))


@pytest.mark.slow
def test_drivers_of_several_studies_share_a_new_sqlite_store(tmp_path) -> None:
    """Without the lock beside mlflow.db, they race through its schema migrations and fail."""
    import multiprocessing

    context = multiprocessing.get_context("fork")  # the children inherit the imports
    barrier, outcomes = context.Barrier(4), context.Queue()
    uri = default_store_uri(tmp_path)
    drivers = [context.Process(target=_share_a_new_store, args=(uri, i, barrier, outcomes)) for i in range(4)]
    for driver in drivers:
        driver.start()
    for driver in drivers:
        driver.join(timeout=300)
    assert sorted(outcomes.get(timeout=5) for _ in drivers) == [(i, "ok") for i in range(4)]


def test_abc_bias_matrices_are_saved_for_the_run(tmp_path):
    import numpy as np

    from orchestrator.mlflow_tracking.run_artifacts import run_artifacts
    from orchestrator.running.trainable import save_attention_biases

    biases = {"cross/extracted": np.arange(6.0).reshape(2, 3), "cross/bias": np.zeros((2, 3))}
    path = save_attention_biases(tmp_path, "s", "abc123", biases)
    saved = np.load(path)
    assert np.array_equal(saved["cross__extracted"], biases["cross/extracted"])
    config = {"task": {"train_digits": [1, 2]}}
    artifacts = run_artifacts(tmp_path, "s", "abc123", config, [], tmp_path)
    assert artifacts == {"config.yaml": tmp_path / "config.yaml", "attention_biases.npz": path}


def test_the_workers_accuracy_plot_is_attached_and_the_driver_draws_only_without_it(tmp_path):
    from orchestrator.mlflow_tracking.run_artifacts import PLOT_FILE, run_artifacts
    from orchestrator.running.trial_plots import accuracy_plot, leave_accuracy_plot
    from results_contract.layout import artifact_folder

    config = {"task": {"train_digits": [1, 2]}}
    rows = [{"step": 5, "digits": d, "accuracy": a} for d, a in ((1, 1.0), (2, 0.9), (4, 0.1))]
    drawn_here = tmp_path / "driver"
    drawn_here.mkdir()
    without = run_artifacts(tmp_path, "s", "t0", config, rows, drawn_here, accuracy_plot)
    assert without[PLOT_FILE] == drawn_here / PLOT_FILE  # no worker plot: the driver draws one
    assert PLOT_FILE not in run_artifacts(tmp_path, "s", "t0", config, rows, drawn_here)  # no drawer handed

    left = leave_accuracy_plot(tmp_path, "s", "t1", config, rows)
    folder = artifact_folder(tmp_path, "s", "t1")
    assert left == folder / PLOT_FILE and left.read_bytes().startswith(b"\x89PNG")
    assert [p.name for p in folder.iterdir()] == [PLOT_FILE]  # no drawing left behind
    (folder / f".tmp-1-{PLOT_FILE}").write_bytes(b"half")  # a worker killed while drawing
    drawn_there = tmp_path / "driver2"
    drawn_there.mkdir()
    with_plot = run_artifacts(tmp_path, "s", "t1", config, rows, drawn_there, accuracy_plot)
    assert with_plot == {"config.yaml": drawn_there / "config.yaml", PLOT_FILE: left}
    assert leave_accuracy_plot(tmp_path, "s", "t2", config, []) is None
    assert not (artifact_folder(tmp_path, "s", "t2") / PLOT_FILE).exists()
