"""MLflow tracking against a real SQLite store; a trial's run made from its rows
(mlflow_sync), and the Tune callback doing so in a small real Ray run."""

from __future__ import annotations

import math
import pickle
import sys
from datetime import datetime, timezone
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from analysis.plots import accuracy_vs_length
from orchestrator.mlflow_tracking.handed import Handed
from orchestrator.mlflow_tracking.mlflow_store import create_sqlite_store
from orchestrator.mlflow_tracking.mlflow_sync import sync_trial
from orchestrator.mlflow_tracking.syncer import MlflowSyncer
from orchestrator.mlflow_tracking.tracking import StudyTracker
from orchestrator.running.mlflow_callback import MlflowTuneCallback
from orchestrator.running.trial_plots import accuracy_plot
from orchestrator.store.results_store import write_trial_table
from orchestrator.store.trial_rows import flatten_config, trials_row
from orchestrator.studies.config_paths import TRIAL_CONFIG
from results_contract.experiments import default_store_uri

CONFIG = {
    "task": {"name": "addition", "train_digits": [1, 5]},
    "model": {"pe": "fire", "size": "tiny"},
    "seeds": {"weight": 0, "data": 1},
}


STARTED = datetime(2025, 1, 2, 3, 4, 5, tzinfo=timezone.utc)


def trial_row(weight: int, status: str) -> dict[str, Any]:
    config = TRIAL_CONFIG.validate_python({**CONFIG, "seeds": {"weight": weight, "data": 1}})
    return trials_row("cb", config, status, "cpu", STARTED)


def train_row(step: int) -> dict[str, Any]:
    return {"step": step, "loss": 1.0 / step, "lr": 1e-3, "tokens": 8 * step, "wall_s": 0.1 * step}


def eval_rows(step: int) -> list[dict[str, Any]]:
    return [{"step": step, "digits": d, "n": 4, "correct": step, "accuracy": step / 4,
             "in_distribution": d <= 5} for d in (5, 10)]


def test_default_store_uri_is_absolute_sqlite(tmp_path: Path) -> None:
    uri = default_store_uri(tmp_path / "r")
    assert uri == f"sqlite:///{(tmp_path / 'r').resolve()}/mlflow.db"
    assert not (tmp_path / "r").exists()  # naming the store writes nothing


def test_new_sqlite_store_is_set_up_aside_and_never_replaces_an_existing_one(tmp_path: Path) -> None:
    from mlflow.tracking import MlflowClient

    database = tmp_path / "r" / "mlflow.db"
    StudyTracker(f"sqlite:///{database}", "first")  # set up in /dev/shm, then linked into place

    def files() -> list[str]:  # besides the write-ahead log's own (sqlite_journal.py)
        return sorted(p.name for p in database.parent.iterdir() if not p.name.endswith(("-wal", "-shm")))

    assert files() == ["mlflow.db", "mlflow.db.lock"]
    create_sqlite_store(database)  # as a process that takes no lock (mlflow ui) might meanwhile
    assert MlflowClient(f"sqlite:///{database}").get_experiment_by_name("first") is not None
    assert files() == ["mlflow.db", "mlflow.db.lock"]


def test_flatten_config_dotted_keys_and_json_lists() -> None:
    assert flatten_config(CONFIG) == {
        "task.name": "addition",
        "task.train_digits": "[1, 5]",
        "model.pe": "fire",
        "model.size": "tiny",
        "seeds.weight": 0,
        "seeds.data": 1,
    }


def test_one_run_per_trial_with_flattened_params(tracker: StudyTracker, mlflow_store: str) -> None:
    params = flatten_config(CONFIG)
    run_id = tracker.run_for_trial("abc", {"pe": "fire"}, params)
    assert tracker.run_for_trial("abc", {"pe": "fire"}, params) == run_id
    # A fresh tracker (a resumed study) finds the run in the store, not in its cache.
    again = StudyTracker(tracker.client.tracking_uri, tracker.study)
    assert again.run_for_trial("abc", {"pe": "fire"}, params) == run_id
    assert tracker.runs_by_trial() == {"abc": [{"run_id": run_id, "status": "RUNNING", "outcome": ""}]}
    run = tracker.client.get_run(run_id)
    assert run.data.params["model.pe"] == "fire"
    assert run.data.params["task.train_digits"] == "[1, 5]"
    assert run.data.tags["trial_id"] == "abc"
    # Artifacts live beside the database, not under the current directory.
    db_dir = Path(mlflow_store.removeprefix("sqlite:///")).parent
    assert run.info.artifact_uri.startswith((db_dir / "mlartifacts").as_uri())


def test_many_params_are_chunked(tracker: StudyTracker) -> None:
    params = {f"p.k{i:03d}": i for i in range(250)}
    run_id = tracker.run_for_trial("big", {}, params)
    assert len(tracker.client.get_run(run_id).data.params) == 250


def test_metrics_by_step_including_nan(tracker: StudyTracker) -> None:
    run_id = tracker.run_for_trial("m", {}, {})
    tracker.log_metrics(run_id, {"loss": 2.0, "acc/digits_005": 0.25, "lr": None}, step=0)
    tracker.log_metrics(run_id, {"loss": float("nan")}, step=10)
    history = tracker.client.get_metric_history(run_id, "loss")
    assert [m.step for m in history] == [0, 10]
    assert history[0].value == 2.0 and math.isnan(history[1].value)
    assert tracker.client.get_metric_history(run_id, "lr") == []


def test_finish_logs_summary_artifacts_and_status(tracker: StudyTracker, tmp_path: Path) -> None:
    run_id = tracker.run_for_trial("f", {}, {})
    cfg = tmp_path / "whatever.yaml"
    cfg.write_text("a: 1\n")
    png = accuracy_vs_length([1, 5, 10], [1.0, 0.9, 0.1], 5, "t", tmp_path / "acc.png")
    tracker.finish(
        run_id, "FINISHED", {"summary/acc_id": 0.95}, {"config.yaml": cfg, "acc.png": png}
    )
    run = tracker.client.get_run(run_id)
    assert run.info.status == "FINISHED"
    assert run.data.tags["status"] == "done"
    assert run.data.metrics["summary/acc_id"] == 0.95
    names = {a.path for a in tracker.client.list_artifacts(run_id)}
    assert names == {"config.yaml", "acc.png"}


def test_reattached_running_run_ends_finished_without_duplicate(
    tracker: StudyTracker,
) -> None:
    left_running = tracker.run_for_trial("r", {}, {"a": 1})
    failed = tracker.run_for_trial("x", {}, {"a": 1})
    tracker.finish(failed, "FAILED", {}, {})
    # A resumed study: new process, same store; params unchanged, one new param.
    resumed = StudyTracker(tracker.client.tracking_uri, tracker.study)
    assert resumed.run_for_trial("r", {}, {"a": 1, "b": 2}) == left_running
    assert resumed.run_for_trial("x", {}, {"a": 1}) == failed
    assert tracker.client.get_run(failed).info.status == "RUNNING"
    resumed.finish(left_running, "FINISHED", {}, {})
    resumed.finish(failed, "FINISHED", {}, {})
    runs = resumed.runs_by_trial()
    assert runs == {
        "r": [{"run_id": left_running, "status": "FINISHED", "outcome": "done"}],
        "x": [{"run_id": failed, "status": "FINISHED", "outcome": "done"}],
    }
    assert tracker.client.get_run(left_running).data.params == {"a": "1", "b": "2"}


def test_accuracy_plot_writes_png(tmp_path: Path) -> None:
    out = accuracy_vs_length([10, 20, 5], [0.5, 0.0, 1.0], 8, "acc", tmp_path / "sub" / "a.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert out.stat().st_size > 1000


def test_a_run_is_made_from_the_rows_as_they_are_written(tracker: StudyTracker, tmp_path: Path) -> None:
    """The callback marks a trial's run for the driver's MLflow thread when its worker
    reports rows written (and at its first report), which syncs it from the rows and
    ends it as the trials row says."""
    syncer = MlflowSyncer(tracker.client.tracking_uri, tracker.study, tmp_path, "cb", say=print,
                          handed=Handed(accuracy_plot=accuracy_plot))
    callback = MlflowTuneCallback(syncer)
    # Tune pickles RunConfig callbacks into tuner.pkl: the copy pickles, without the thread
    assert pickle.loads(pickle.dumps(callback)).syncer is None
    row = trial_row(0, "running")
    trial_id = row["trial_id"]
    trial = SimpleNamespace(config={"trial": {"results_root": str(tmp_path), "study": "cb",
                                              "trial_id": trial_id}}, num_failures=1)
    write_trial_table(tmp_path, "cb", "trials", trial_id, [row])
    write_trial_table(tmp_path, "cb", "train", trial_id, [train_row(1), train_row(2)])
    write_trial_table(tmp_path, "cb", "eval", trial_id, eval_rows(2))
    callback.on_trial_result(0, [trial], trial, {"step": 1, "rows_written": False})  # the first
    assert syncer.wait()
    [entry] = tracker.runs_by_trial()[trial_id]
    run_id = entry["run_id"]
    assert entry["status"] == "RUNNING"

    def steps(metric: str) -> list[int]:
        return [m.step for m in tracker.client.get_metric_history(run_id, metric)]

    assert steps("loss") == [1, 2] and steps("acc/digits_010") == [2]
    write_trial_table(tmp_path, "cb", "train", trial_id, [train_row(s) for s in (1, 2, 3)])
    callback.on_trial_result(0, [trial], trial, {"step": 3, "rows_written": False})
    assert syncer.wait()
    assert steps("loss") == [1, 2]  # no rows written since: nothing read
    callback.on_trial_recover(0, [trial], trial)  # the worker died; Tune retries it
    assert syncer.wait()
    assert steps("loss") == [1, 2, 3]
    write_trial_table(tmp_path, "cb", "trials", trial_id, [trial_row(0, "diverged")])
    callback.on_trial_complete(0, [trial], trial)
    assert syncer.close().behind is False
    run = tracker.client.get_run(run_id)
    assert (run.info.status, run.data.tags["status"]) == ("FAILED", "diverged")
    assert run.data.tags["worker_failures"] == "1"
    assert run.data.params["model.pe"] == "fire" and run.data.tags["pe"] == "fire"
    assert run.data.metrics["summary/ood_accuracy_mean"] == 0.5
    assert {a.path for a in tracker.client.list_artifacts(run_id)} == {"config.yaml", "accuracy_vs_length.png"}
    # idempotent: syncing again leaves the run as it is
    assert sync_trial(tracker, tmp_path, "cb", trial_id) == run_id
    assert steps("loss") == [1, 2, 3] and steps("summary/longest_99") == [2]
    assert tracker.client.get_run(run_id).info.status == "FAILED"


@pytest.fixture(scope="module")
def ray_local():
    ray = pytest.importorskip("ray")
    # Workers cannot import this test module (pytest put it on the driver's path only).
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    ray.shutdown()  # a Ray of one CPU of its own, not the one other modules' studies share
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    yield ray
    ray.shutdown()


def _trainable(config: dict[str, Any]) -> None:
    """A worker as orchestrator.running.trainable writes: the trials row, then rows at each
    checkpoint, each followed by a report that says so, then the final row."""
    from ray import tune

    params = config["trial"]
    root, trial_id, row = Path(params["results_root"]), params["trial_id"], params["row"]
    write_trial_table(root, "cb", "trials", trial_id, [row])
    for step in range(1, 4):
        write_trial_table(root, "cb", "train", trial_id, [train_row(s) for s in range(1, step + 1)])
        write_trial_table(root, "cb", "eval", trial_id, [r for s in range(1, step + 1) for r in eval_rows(s)])
        tune.report({"step": step, "rows_written": True})
    write_trial_table(root, "cb", "trials", trial_id, [{**row, "status": "done"}])


def test_tune_run_with_callback(ray_local: Any, tracker: StudyTracker, tmp_path: Path) -> None:
    from ray import tune

    rows = [trial_row(weight, "running") for weight in (0, 1)]
    trials = [{"results_root": str(tmp_path), "study": "cb", "trial_id": r["trial_id"], "row": r} for r in rows]
    syncer = MlflowSyncer(tracker.client.tracking_uri, tracker.study, tmp_path, "cb", say=print,
                          handed=Handed(accuracy_plot=accuracy_plot))
    tuner = tune.Tuner(
        _trainable,
        param_space={"trial": tune.grid_search(trials)},
        # Reusing the worker saves a cold actor start (~3 s here) for the second trial.
        tune_config=tune.TuneConfig(reuse_actors=True),
        run_config=tune.RunConfig(
            name="cb",
            storage_path=str(tmp_path / "ray"),
            callbacks=[MlflowTuneCallback(syncer)],
            verbose=0,
        ),
    )
    results = tuner.fit()
    assert syncer.close().behind is False
    assert not results.errors
    runs = tracker.runs_by_trial()
    assert sorted(runs) == sorted(r["trial_id"] for r in rows)
    for [entry] in runs.values():
        assert entry["status"] == "FINISHED"
        run_id = entry["run_id"]
        loss = tracker.client.get_metric_history(run_id, "loss")
        assert [m.step for m in loss] == [1, 2, 3]
        run = tracker.client.get_run(run_id)
        assert run.data.tags["status"] == "done"
        assert run.data.params["model.pe"] == "fire"
        assert "summary/in_distribution_accuracy" in run.data.metrics
        assert not any(k.startswith(("training_iteration", "time_", "rows_")) for k in run.data.metrics)
        names = {a.path for a in tracker.client.list_artifacts(run_id)}
        assert names == {"config.yaml", "accuracy_vs_length.png"}
