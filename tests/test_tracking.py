"""MLflow tracking against a real SQLite store, and the Tune callback in a small real Ray run."""

from __future__ import annotations

import math
import pickle
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from analysis.plots import accuracy_vs_length
from orchestrator.tracking import (
    MlflowTuneCallback,
    StudyTracker,
    _create_sqlite_store,
    default_tracking_uri,
)
from orchestrator.trial_rows import flatten_config

CONFIG = {
    "task": {"name": "addition", "train_digits": [1, 5]},
    "model": {"pe": "fire", "size": "tiny"},
    "seeds": {"weight": 0, "data": 1},
}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> str:
    # One database for the module: creating one (schema migrations) costs about a second.
    return default_tracking_uri(tmp_path_factory.mktemp("results"))


@pytest.fixture
def tracker(store: str, request: pytest.FixtureRequest) -> StudyTracker:
    return StudyTracker(store, request.node.name)  # one experiment per test


def describe(config: dict[str, Any]) -> tuple[str, dict[str, str], dict[str, object]]:
    trial_id = f"t{config['trial']}"
    return trial_id, {"pe": "fire"}, flatten_config(config["config"])


def test_default_tracking_uri_is_absolute_sqlite(tmp_path: Path) -> None:
    uri = default_tracking_uri(tmp_path / "r")
    assert uri == f"sqlite:///{(tmp_path / 'r').resolve()}/mlflow.db"
    assert not (tmp_path / "r").exists()  # naming the store writes nothing


def test_new_sqlite_store_is_set_up_aside_and_never_replaces_an_existing_one(tmp_path: Path) -> None:
    from mlflow.tracking import MlflowClient

    database = tmp_path / "r" / "mlflow.db"
    StudyTracker(f"sqlite:///{database}", "first")  # set up in /dev/shm, then linked into place
    assert sorted(p.name for p in database.parent.iterdir()) == ["mlflow.db", "mlflow.db.lock"]
    _create_sqlite_store(database)  # as a process that takes no lock (mlflow ui) might meanwhile
    assert MlflowClient(f"sqlite:///{database}").get_experiment_by_name("first") is not None
    assert sorted(p.name for p in database.parent.iterdir()) == ["mlflow.db", "mlflow.db.lock"]


def test_flatten_config_dotted_keys_and_json_lists() -> None:
    assert flatten_config(CONFIG) == {
        "task.name": "addition",
        "task.train_digits": "[1, 5]",
        "model.pe": "fire",
        "model.size": "tiny",
        "seeds.weight": 0,
        "seeds.data": 1,
    }


def test_one_run_per_trial_with_flattened_params(tracker: StudyTracker, store: str) -> None:
    params = flatten_config(CONFIG)
    run_id = tracker.run_for_trial("abc", {"pe": "fire"}, params)
    assert tracker.run_for_trial("abc", {"pe": "fire"}, params) == run_id
    # A fresh tracker (a resumed study) finds the run in the store, not in its cache.
    again = StudyTracker(tracker.client.tracking_uri, tracker.study)
    assert again.run_for_trial("abc", {"pe": "fire"}, params) == run_id
    assert tracker.runs_by_trial() == {"abc": [{"run_id": run_id, "status": "RUNNING"}]}
    run = tracker.client.get_run(run_id)
    assert run.data.params["model.pe"] == "fire"
    assert run.data.params["task.train_digits"] == "[1, 5]"
    assert run.data.tags["trial_id"] == "abc"
    # Artifacts live beside the database, not under the current directory.
    db_dir = Path(store.removeprefix("sqlite:///")).parent
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
        "r": [{"run_id": left_running, "status": "FINISHED"}],
        "x": [{"run_id": failed, "status": "FINISHED"}],
    }
    assert tracker.client.get_run(left_running).data.params == {"a": "1", "b": "2"}


def test_accuracy_plot_writes_png(tmp_path: Path) -> None:
    out = accuracy_vs_length([10, 20, 5], [0.5, 0.0, 1.0], 8, "acc", tmp_path / "sub" / "a.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert out.stat().st_size > 1000


def test_callback_marks_diverged_trials_failed(tracker: StudyTracker) -> None:
    # Tune's Trial is only read for .config and .last_result, so a stand-in suffices.
    # Tune pickles RunConfig callbacks into tuner.pkl; the copy must work against the store.
    callback = pickle.loads(pickle.dumps(MlflowTuneCallback(tracker, describe)))
    trial = SimpleNamespace(config={"trial": 7, "config": CONFIG}, last_result={})
    callback.on_trial_start(0, [trial], trial)
    result = {
        "step": 3,
        "loss": float("nan"),
        "lr": np.float32(1e-3),
        "status": "diverged",
        "time_this_iter_s": 0.1,
    }
    callback.on_trial_result(0, [trial], trial, result)
    trial.last_result = result
    callback.on_trial_complete(0, [trial], trial)
    [entry] = tracker.runs_by_trial()["t7"]
    run = tracker.client.get_run(entry["run_id"])
    assert run.info.status == "FAILED"
    assert run.data.tags["status"] == "diverged"
    assert math.isnan(run.data.metrics["loss"])
    assert run.data.metrics["lr"] == pytest.approx(1e-3)
    assert "time_this_iter_s" not in run.data.metrics
    assert {a.path for a in tracker.client.list_artifacts(entry["run_id"])} == {"config.yaml"}


@pytest.fixture(scope="module")
def ray_local():
    ray = pytest.importorskip("ray")
    # Workers cannot import this test module (pytest put it on the driver's path only).
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    yield ray
    ray.shutdown()


def _trainable(config: dict[str, Any]) -> None:
    from ray import tune

    for step in range(3):
        acc = 0.3 * step + 0.1 * config["trial"]
        tune.report(
            {
                "step": step,
                "loss": 1.0 / (step + 1),
                "acc/digits_005": acc,
                "acc/digits_010": acc / 2,
                "summary/acc_id": acc,
            }
        )


def test_tune_run_with_callback(ray_local: Any, tracker: StudyTracker, tmp_path: Path) -> None:
    from ray import tune

    tuner = tune.Tuner(
        _trainable,
        param_space={"trial": tune.grid_search([0, 1]), "config": CONFIG},
        # Reusing the worker saves a cold actor start (~3 s here) for the second trial.
        tune_config=tune.TuneConfig(reuse_actors=True),
        run_config=tune.RunConfig(
            name="cb",
            storage_path=str(tmp_path / "ray"),
            callbacks=[MlflowTuneCallback(tracker, describe)],
            verbose=0,
        ),
    )
    results = tuner.fit()
    assert not results.errors
    runs = tracker.runs_by_trial()
    assert sorted(runs) == ["t0", "t1"]
    for [entry] in runs.values():
        assert entry["status"] == "FINISHED"
        run_id = entry["run_id"]
        loss = tracker.client.get_metric_history(run_id, "loss")
        assert [m.step for m in loss] == [0, 1, 2]
        run = tracker.client.get_run(run_id)
        assert run.data.tags["status"] == "done"
        assert run.data.params["model.pe"] == "fire"
        assert "summary/acc_id" in run.data.metrics
        assert not any(k.startswith(("training_iteration", "time_")) for k in run.data.metrics)
        names = {a.path for a in tracker.client.list_artifacts(run_id)}
        assert names == {"config.yaml", "accuracy_vs_length.png"}
