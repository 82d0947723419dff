"""A results folder that moved: its MLflow store's artifact locations name the old path
until a command opens it, which re-points them at this folder's `mlartifacts/`, says so
once and changes nothing else (orchestrator.mlflow_tracking.moved_store).

The store is a real SQLite MLflow store written by StudyTracker, as `lg-study run`
writes it (runs with metrics, tags, params and artifacts); no Ray, to stay fast.
"""

from __future__ import annotations

import shutil
import sqlite3
from datetime import datetime, timezone
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient
from typer.testing import CliRunner

from orchestrator.cli import app
from orchestrator.mlflow_tracking.mlflow_sync import describe
from orchestrator.mlflow_tracking.moved_store import repoint_moved_artifacts
from orchestrator.mlflow_tracking.tracking import StudyTracker
from orchestrator.store.trial_rows import trials_row
from orchestrator.studies.study import load_study
from results_contract.experiments import default_store_uri

QUICKSTART = Path(__file__).parents[1] / "studies" / "quickstart.yaml"
STARTED = datetime(2025, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
#: the columns a move changes; every other cell of every table stays as it was
MOVED_COLUMNS = {("experiments", "artifact_location"), ("runs", "artifact_uri")}


def write_store(results: Path, experiment: str, trials: int = 2) -> dict[str, list[str]]:
    """Finished runs with metrics and two artifacts each, and one run left RUNNING
    with none (an interrupted trial): run id -> its artifact names."""
    study = load_study(QUICKSTART)
    tracker = StudyTracker(default_store_uri(results), experiment)
    made = {}
    for index, config in enumerate(study.trials[: trials + 1]):
        row = trials_row(study.name, config, "done", "cpu", STARTED, group_label=study.group_label(config))
        trial_id, tags, params = describe(row)
        run_id = tracker.run_for_trial(trial_id, tags, params)
        tracker.log_metrics(run_id, {"loss": 0.5 + index, "acc/digits_004": 0.25}, step=100)
        if index == trials:
            made[run_id] = []
            continue
        files = results / f"files-{index}"
        files.mkdir()
        (files / "config.yaml").write_text(f"trial: {trial_id}\n")
        (files / "attention_biases.npz").write_bytes(bytes(range(index + 5)))
        tracker.finish(run_id, "FINISHED", {"summary/ood_accuracy_mean": 0.1},
                       {p.name: p for p in files.iterdir()})
        shutil.rmtree(files)
        made[run_id] = ["attention_biases.npz", "config.yaml"]
    return made


def table_cells(database: Path) -> dict[str, list[tuple]]:
    """Every table's rows, without the columns a move changes."""
    with sqlite3.connect(database) as con:
        tables = [name for (name,) in con.execute("select name from sqlite_master where type = 'table'")]
        cells = {}
        for table in tables:
            columns = [c[1] for c in con.execute(f"pragma table_info({table})") if (table, c[1]) not in MOVED_COLUMNS]
            cells[table] = sorted(con.execute(f"select {', '.join(columns)} from {table}").fetchall(), key=repr)
    return cells


def listed(uri: str, run_ids) -> dict[str, list[str]]:
    client = MlflowClient(uri)
    return {run_id: sorted(f.path for f in client.list_artifacts(run_id)) for run_id in run_ids}


@pytest.fixture
def moved(tmp_path: Path) -> tuple[Path, Path, dict[str, list[str]], dict]:
    """A store written under old/results, then the folder moved to new/results (the old
    one gone): (old, new, the artifacts of each run, the store's cells before the move)."""
    old, new = tmp_path / "old" / "results", tmp_path / "new" / "results"
    made = write_store(old, "quickstart")
    made.update(write_store(old, "quickstart/laptop", trials=1))  # a profile's experiment
    assert listed(default_store_uri(old), made) == made
    cells = table_cells(old / "mlflow.db")
    new.parent.mkdir()
    shutil.move(old, new)
    return old, new, made, cells


def test_a_moved_store_lists_no_artifacts_until_repointed_then_every_one(moved) -> None:
    old, new, made, cells = moved
    uri = default_store_uri(new)
    assert all(files == [] for files in listed(uri, made).values())  # what the user saw
    repointed = repoint_moved_artifacts(uri)
    assert sorted((r.old, r.new, r.runs) for r in repointed) == [
        ((old / "mlartifacts" / "quickstart").as_uri(), (new / "mlartifacts" / "quickstart").as_uri(), 3),
        ((old / "mlartifacts" / "quickstart" / "laptop").as_uri(),
         (new / "mlartifacts" / "quickstart" / "laptop").as_uri(), 2),
    ]
    assert listed(uri, made) == made
    assert table_cells(new / "mlflow.db") == cells  # runs, metrics, params, tags: bit for bit
    assert repoint_moved_artifacts(uri) == []  # said once
    client = MlflowClient(uri)
    for run_id in made:
        assert client.get_run(run_id).info.artifact_uri == f"{(new / 'mlartifacts').as_uri()}/" \
            f"{client.get_experiment(client.get_run(run_id).info.experiment_id).name}/{run_id}/artifacts"


def test_a_moved_store_reached_through_a_symlink_is_repointed_to_where_it_is(moved, tmp_path: Path) -> None:
    _, new, made, cells = moved
    mount = tmp_path / "laptop-mount"
    mount.symlink_to(new)
    uri = default_store_uri(mount)
    assert len(repoint_moved_artifacts(uri)) == 2
    assert listed(uri, made) == made
    assert table_cells(new / "mlflow.db") == cells


def test_a_store_that_did_not_move_or_left_its_artifacts_where_they_are_is_left_alone(tmp_path: Path) -> None:
    in_place = tmp_path / "in-place"
    write_store(in_place, "quickstart", trials=1)
    before = (in_place / "mlflow.db").read_bytes()
    assert repoint_moved_artifacts(default_store_uri(in_place)) == []
    assert (in_place / "mlflow.db").read_bytes() == before
    copied = tmp_path / "copied"  # the database alone, its artifacts still in the old folder
    copied.mkdir()
    shutil.copy(in_place / "mlflow.db", copied / "mlflow.db")
    assert repoint_moved_artifacts(default_store_uri(copied)) == []
    assert (copied / "mlflow.db").read_bytes() == before


@pytest.mark.parametrize("left_behind", ["mlartifacts/quickstart/laptop", "mlartifacts"])
def test_artifacts_not_brought_from_a_folder_now_gone_are_written_here(moved, left_behind: str) -> None:
    """An experiment moved without its artifacts, whose old folder is gone, is pointed here
    (said as not brought): its runs' new artifacts are written here, where MLflow would
    otherwise try to create the old path."""
    old, new, made, _ = moved
    shutil.rmtree(new / left_behind)
    repointed = repoint_moved_artifacts(default_store_uri(new))
    brought = {r.new.rpartition("/mlartifacts/")[2]: (r.brought, r.runs) for r in repointed}
    expected = {"quickstart": (left_behind != "mlartifacts", 3), "quickstart/laptop": (False, 2)}
    assert brought == expected
    tracker = StudyTracker(default_store_uri(new), "quickstart/laptop")
    running = next(run_id for run_id, files in made.items() if not files
                   and tracker.client.get_run(run_id).info.artifact_uri.rpartition("/mlartifacts/")[2].startswith(
                       "quickstart/laptop/"))
    config = new / "config.yaml"
    config.write_text("resumed: true\n")
    tracker.finish(running, "FINISHED", {}, {"config.yaml": config})
    assert listed(default_store_uri(new), [running]) == {running: ["config.yaml"]}
    assert (new / "mlartifacts" / "quickstart" / "laptop" / running).is_dir() and not old.exists()


def test_a_new_run_in_a_moved_store_writes_its_artifacts_here(moved) -> None:
    """The run of an interrupted trial, resumed after the move, puts its artifacts in
    this folder, not under the old path (opening the store through StudyTracker re-points)."""
    old, new, made, _ = moved
    tracker = StudyTracker(default_store_uri(new), "quickstart")
    assert sorted(r.runs for r in tracker.client.repointed) == [2, 3]  # the whole store
    running = next(run_id for run_id, files in made.items() if not files)
    config = new / "config.yaml"
    config.write_text("resumed: true\n")
    tracker.finish(running, "FINISHED", {}, {"config.yaml": config})
    assert listed(default_store_uri(new), [running]) == {running: ["config.yaml"]}
    assert not old.exists()


def test_ui_and_run_say_once_that_the_store_was_repointed(moved, monkeypatch) -> None:
    """`lg-study migrate` opens the store as `run` and `ui` do (say_if_moved), without
    starting a server or Ray."""
    _, new, made, _ = moved
    runner = CliRunner()
    first = runner.invoke(app, ["migrate", "--results", str(new)])
    assert first.exit_code == 0, first.output
    said = " ".join(first.output.split())
    assert f"{new / 'mlflow.db'} was moved" in said and "(they named " in said and "nothing else was changed" in said
    assert listed(default_store_uri(new), made) == made
    second = runner.invoke(app, ["migrate", "--results", str(new)])
    assert "was moved" not in second.output


def test_a_store_moved_without_an_experiments_artifacts_says_so(moved) -> None:
    _, new, _, _ = moved
    shutil.rmtree(new / "mlartifacts" / "quickstart" / "laptop")
    said = " ".join(CliRunner().invoke(app, ["migrate", "--results", str(new)]).output.split())
    laptop = (new.parent.parent / "old" / "results" / "mlartifacts" / "quickstart" / "laptop").as_uri()
    assert f"was moved without the artifacts of its experiment at {laptop}, whose folder is gone" in said
    assert "its 2 runs list no artifacts, and new ones are written to" in said
    assert said.count("nothing else was changed") == 1  # the experiment brought along


def test_a_store_mlflow_is_still_creating_has_nothing_to_repoint(tmp_path: Path) -> None:
    """Another process's MLflow client made the store's file and has not yet made its
    tables (its migrations take seconds): a tracker opened then finds nothing moved. It
    once failed there ("no such table: experiments"), and the MLflow thread of a run
    retried its first write only after RETRY_S."""
    database = tmp_path / "results" / "mlflow.db"
    database.parent.mkdir()
    sqlite3.connect(database).close()  # the file, no table yet
    assert repoint_moved_artifacts(f"sqlite:///{database}") == []
    assert repoint_moved_artifacts(f"sqlite:///{database}", locked=True) == []
