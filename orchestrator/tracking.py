"""Every MLflow call of the project (MLflow's API churns, so it is kept in one place).

Only the Ray driver process uses this module: a local SQLite store breaks with
several writers, and Tune callbacks run in the driver.
"""

from __future__ import annotations

import contextlib
import fcntl
import numbers
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlparse

import yaml
from mlflow.entities import Metric, Param, RunTag
from mlflow.tracking import MlflowClient
from mlflow.utils.validation import (
    MAX_METRICS_PER_BATCH,
    MAX_PARAM_VAL_LENGTH,
    MAX_PARAMS_TAGS_PER_BATCH,
    MAX_TAG_VAL_LENGTH,
)
from ray.tune import Callback

from analysis.plots import accuracy_vs_length
from orchestrator.metric_names import ACCURACY_PREFIX, LOSS, LR, SUMMARY_PREFIX, digits_of

# Result keys forwarded to MLflow; everything else is Tune bookkeeping.
METRIC_PREFIXES = (LOSS, LR, ACCURACY_PREFIX, SUMMARY_PREFIX)
RUN_NAME_TAG = "mlflow.runName"  # MLflow's own tag for a run's name
# The MLflow 3 UI opens an experiment in its "model training" views (runs, metrics)
# rather than its GenAI ones (traces) when it carries this tag.
EXPERIMENT_TAGS = {"mlflow.experimentKind": "custom_model_development"}
OUTCOME = {"FINISHED": "done", "FAILED": "failed", "KILLED": "killed"}

Describe = Callable[[dict[str, Any]], tuple[str, dict[str, str], dict[str, object]]]
T = TypeVar("T")


def default_tracking_uri(results_root: Path) -> str:
    """SQLite store beside the results; the folder is made when a study first runs."""
    return f"sqlite:///{Path(results_root).resolve()}/mlflow.db"


def _chunks(items: Sequence[T], size: int) -> Iterator[Sequence[T]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _now_ms() -> int:
    return int(time.time() * 1000)


class StudyTracker:
    """One MLflow experiment per study, exactly one run per trial (tag ``trial_id``)."""

    def __init__(self, tracking_uri: str, study: str) -> None:
        self.client = SerializedClient(tracking_uri)
        self.study = study
        self._run_ids: dict[str, str] = {}
        #: run_id -> metric -> last step logged (metrics are never logged twice at a step)
        self._last_step: dict[str, dict[str, int]] = {}
        experiment = self.client.get_experiment_by_name(study)
        if experiment is not None:
            self.experiment_id = experiment.experiment_id
            if experiment.lifecycle_stage == "deleted":
                # Deleted in the UI: its name stays taken, and it refuses new runs.
                self.client.restore_experiment(self.experiment_id)
        else:
            self.experiment_id = self.client.create_experiment(
                study,
                artifact_location=_artifact_location(tracking_uri, study),
                tags=EXPERIMENT_TAGS,
            )

    def __reduce__(self) -> tuple[type[StudyTracker], tuple[str, str]]:
        # Tune pickles RunConfig callbacks into tuner.pkl; rebuild the client on load
        # rather than pickling a live database connection.
        return StudyTracker, (self.client.tracking_uri, self.study)

    def run_for_trial(
        self,
        trial_id: str,
        tags: dict[str, str],
        params: dict[str, object],
        run_name: str | None = None,
    ) -> str:
        """The trial's run, created or re-attached and left RUNNING (the trial is starting).

        The run is named ``run_name``, else the tag ``mlflow.runName``, else the trial id.
        """
        if trial_id in self._run_ids:
            return self._run_ids[trial_id]
        run_name = run_name or tags.get(RUN_NAME_TAG) or trial_id
        tags = {**tags, RUN_NAME_TAG: run_name}
        found = self.client.search_runs(
            [self.experiment_id],
            filter_string=f"tags.trial_id = '{trial_id}'",
            order_by=["attributes.start_time ASC"],
        )
        if found:
            run = found[0]
            run_id = run.info.run_id
            if run.info.status != "RUNNING":
                self.client.update_run(run_id, status="RUNNING")
            # MLflow refuses to change a logged param; the trial id pins the config anyway.
            existing = run.data.params
        else:
            run = self.client.create_run(
                self.experiment_id, tags={**tags, "trial_id": trial_id}, run_name=run_name
            )
            run_id = run.info.run_id
            existing = {}
        missing = [
            Param(key, str(value)[:MAX_PARAM_VAL_LENGTH])
            for key, value in params.items()
            if key not in existing
        ]
        for chunk in _chunks(missing, MAX_PARAMS_TAGS_PER_BATCH):
            self.client.log_batch(run_id, params=chunk)
        if found:
            self._set_tags(run_id, {**tags, "trial_id": trial_id})
        self._last_step[run_id] = self._logged_steps(run) if found else {}
        self._run_ids[trial_id] = run_id
        return run_id

    def log_metrics(self, run_id: str, metrics: Mapping[str, float | None], step: int) -> None:
        """NaN is logged on purpose (divergence must show); MLflow clamps inf to +-max float.

        A metric is not logged at a step at or before the last one it has in the run:
        a trial resumed from its checkpoint repeats the steps after the checkpoint,
        which the run may have logged before the interruption.
        """
        last = self._last_step.setdefault(run_id, {})
        fresh = {k: v for k, v in metrics.items() if v is not None and step > last.get(k, -1)}
        ts = _now_ms()
        batch = [Metric(k, float(v), ts, step) for k, v in fresh.items()]
        for chunk in _chunks(batch, MAX_METRICS_PER_BATCH):
            self.client.log_batch(run_id, metrics=chunk)
        last.update(dict.fromkeys(fresh, step))

    def finish(
        self,
        run_id: str,
        status: str,
        summary: dict[str, float],
        artifacts: dict[str, Path],
        outcome: str | None = None,
        step: int = 0,
    ) -> None:
        """Log the summary and artifacts, tag ``status`` (done/diverged/failed), then end the run.

        ``artifacts`` maps a file name in the run to a local file; ``outcome`` overrides
        the ``status`` tag (e.g. ``diverged`` for a FAILED run).
        """
        if status not in OUTCOME:
            raise ValueError(f"status must be one of {sorted(OUTCOME)}, got {status!r}")
        self.log_metrics(run_id, summary, step)
        for name, local in artifacts.items():
            local = Path(local)
            if local.name == name:
                self.client.log_artifact(run_id, str(local))
            else:
                # log_artifact keeps the local file name, so copy under the wanted one.
                with tempfile.TemporaryDirectory() as tmp:
                    renamed = Path(tmp) / name
                    renamed.write_bytes(local.read_bytes())
                    self.client.log_artifact(run_id, str(renamed))
        self._set_tags(run_id, {"status": outcome or OUTCOME[status]})
        self.client.set_terminated(run_id, status)

    def runs_by_trial(self) -> dict[str, list[dict[str, str]]]:
        runs: dict[str, list[dict[str, str]]] = {}
        page_token = None
        while True:
            page = self.client.search_runs(
                [self.experiment_id], max_results=1000, page_token=page_token
            )
            for run in page:
                trial_id = run.data.tags.get("trial_id", "")
                runs.setdefault(trial_id, []).append(
                    {"run_id": run.info.run_id, "status": run.info.status}
                )
            page_token = page.token
            if not page_token:
                return runs

    def tag_trial_runs(self, tags_by_trial: Mapping[str, Mapping[str, str]]) -> None:
        """Add tags to the runs of trials (e.g. the search point a trial was run for);
        a trial without a run yet is left alone."""
        runs = self.runs_by_trial()
        for trial_id, tags in tags_by_trial.items():
            for run in runs.get(trial_id, []):
                self._set_tags(run["run_id"], dict(tags))

    def end_running_runs(self, status: str = "KILLED") -> list[str]:
        """End every run of the study that is still RUNNING; return their trial ids.

        Only the driver holding the study lock writes the study's runs, so a RUNNING
        run it did not finish belongs to an interrupted trial (this driver's, or one
        left by a driver that was killed). The trial's next attempt re-attaches it.
        """
        ended = []
        for trial_id, runs in self.runs_by_trial().items():
            for run in runs:
                if run["status"] == "RUNNING":
                    self._set_tags(run["run_id"], {"status": OUTCOME[status]})
                    self.client.set_terminated(run["run_id"], status)
                    self._run_ids.pop(trial_id, None)  # re-attaching must set it RUNNING again
                    ended.append(trial_id)
        return ended

    def delete_runs(self) -> int:
        """Delete every run of the study (``run --restart``); return how many."""
        run_ids = [run["run_id"] for runs in self.runs_by_trial().values() for run in runs]
        for run_id in run_ids:
            self.client.delete_run(run_id)
        self._run_ids.clear()
        self._last_step.clear()
        return len(run_ids)

    def _logged_steps(self, run: Any) -> dict[str, int]:
        return {
            key: max((m.step for m in self.client.get_metric_history(run.info.run_id, key)), default=-1)
            for key in run.data.metrics
        }

    def _set_tags(self, run_id: str, tags: dict[str, str]) -> None:
        batch = [RunTag(k, str(v)[:MAX_TAG_VAL_LENGTH]) for k, v in tags.items()]
        for chunk in _chunks(batch, MAX_PARAMS_TAGS_PER_BATCH):
            self.client.log_batch(run_id, tags=chunk)


class SerializedClient:
    """An MlflowClient whose calls on a local SQLite store take turns between processes.

    Two drivers (two studies) sharing ``results/mlflow.db`` otherwise race: both run
    the schema migrations of a new store and crash ("table _alembic_tmp_... already
    exists"), and later writes fail with "database is locked". Each call here holds an
    exclusive lock on ``mlflow.db.lock`` beside the database, and a call that still
    meets "database is locked" (a reader such as the MLflow UI) is retried for up to
    LOCKED_RETRY_S. Calls on a tracking server go straight through.
    """

    LOCKED_RETRY_S = 120.0

    def __init__(self, tracking_uri: str) -> None:
        parsed = urlparse(tracking_uri)
        self._lock_path = Path(parsed.path + ".lock") if parsed.scheme == "sqlite" else None
        self._fd: int | None = None
        with self._turn():
            database = _sqlite_database(tracking_uri)
            if database is not None and not database.exists():
                _create_sqlite_store(database)
            self._client = MlflowClient(tracking_uri)

    @property
    def tracking_uri(self) -> str:
        return self._client.tracking_uri

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._client, name)
        if not callable(attr) or self._lock_path is None:
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            delay, deadline = 0.2, time.monotonic() + self.LOCKED_RETRY_S
            while True:
                with self._turn():
                    try:
                        return attr(*args, **kwargs)
                    except Exception as error:  # re-raised unless SQLite was busy
                        if "database is locked" not in str(error) or time.monotonic() > deadline:
                            raise
                time.sleep(delay)
                delay = min(2 * delay, 5.0)

        return call

    @contextlib.contextmanager
    def _turn(self) -> Iterator[None]:
        if self._lock_path is None:
            yield
            return
        if self._fd is None:
            self._lock_path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)


def _sqlite_database(tracking_uri: str) -> Path | None:
    """The file of a SQLite store, None for anything else. SQLAlchemy's form: the path
    follows ``sqlite:///`` (so ``sqlite:////abs/mlflow.db`` is absolute)."""
    if not tracking_uri.startswith("sqlite:///"):
        return None
    database = tracking_uri.removeprefix("sqlite:///").partition("?")[0]
    return None if database in ("", ":memory:") else Path(database)


def _create_sqlite_store(database: Path) -> None:
    """Set a new SQLite store up in memory (/dev/shm) and move the file into place.

    MLflow sets a store up by running its schema migrations one by one, each committed
    with an fsync: 3-5 s on this machine's disk for 1.2-1.8 s of CPU, which the first
    study in every results folder waited for. The finished file is copied beside
    `database` and hard-linked to its name, so that a store another process made
    meanwhile (`mlflow ui` takes no lock of ours) is kept, never overwritten.
    """
    memory = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
    with tempfile.TemporaryDirectory(dir=memory) as folder:
        built = Path(folder) / database.name
        MlflowClient(f"sqlite:///{built}").search_experiments(max_results=1)  # runs the migrations
        database.parent.mkdir(parents=True, exist_ok=True)
        staged = database.with_name(f".{database.name}.{os.getpid()}.tmp")
        try:
            shutil.copyfile(built, staged)
            with open(staged, "rb") as file:
                os.fsync(file.fileno())
            os.link(staged, database)
        except OSError:
            pass  # made meanwhile (kept), or no hard links here: MLflow sets it up in place
        finally:
            staged.unlink(missing_ok=True)


def _artifact_location(tracking_uri: str, study: str) -> str | None:
    """Keep a local store's artifacts beside its database.

    MLflow's default for a SQLite store is ``./mlruns`` under the current directory,
    which scatters artifacts wherever the command happened to run.
    """
    parsed = urlparse(tracking_uri)
    if parsed.scheme != "sqlite":
        return None  # a server decides its own artifact root
    db = Path(parsed.path)
    return (db.parent / "mlartifacts" / study).resolve().as_uri()


class MlflowTuneCallback(Callback):
    """Mirrors Tune trials into MLflow runs; runs in the Ray driver.

    ``trial.config`` is given to ``describe`` for (trial_id, tags, params); its
    ``config`` key, when present, is the resolved config (saved as YAML and read
    for ``task.train_digits``). Results carry ``step``, metrics named ``loss*``,
    ``lr*``, ``acc/digits_NNN`` (0..1), ``summary/*``, and optionally
    ``status="diverged"``.
    """

    def __init__(
        self,
        tracker: StudyTracker,
        describe: Describe,
        resolved_config: Callable[[dict[str, Any]], Any] | None = None,
        extra_artifacts: Callable[[dict[str, Any]], list[Path]] | None = None,
    ) -> None:
        self.tracker = tracker
        self.describe = describe
        self.resolved_config = resolved_config or _config_entry
        #: trial.config -> files the trial left to attach to its run (e.g. ABC biases)
        self.extra_artifacts = extra_artifacts
        self._diverged: set[str] = set()

    def _run_id(self, trial: Any) -> tuple[str, str]:
        trial_id, tags, params = self.describe(trial.config)
        return trial_id, self.tracker.run_for_trial(trial_id, tags, params)

    def on_trial_start(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._run_id(trial)

    def on_trial_result(
        self, iteration: int, trials: list, trial: Any, result: dict, **info: Any
    ) -> None:
        # Tune may deliver results of a restored trial without a fresh start event.
        trial_id, run_id = self._run_id(trial)
        if result.get("status") == "diverged":
            self._diverged.add(trial_id)
        self.tracker.log_metrics(run_id, _metrics(result), _step(result))

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        trial_id, _ = self._run_id(trial)
        last = trial.last_result or {}
        if trial_id in self._diverged or last.get("status") == "diverged":
            self._finish(trial, "FAILED", "diverged")
        else:
            self._finish(trial, "FINISHED", "done")

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._finish(trial, "FAILED", "failed")

    def on_trial_recover(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        # the worker died and Tune retries the trial from its checkpoint, in the same run
        _, run_id = self._run_id(trial)
        self.tracker._set_tags(run_id, {"worker_failures": str(getattr(trial, "num_failures", ""))})

    def _finish(self, trial: Any, status: str, outcome: str) -> None:
        trial_id, run_id = self._run_id(trial)
        last = trial.last_result or {}
        summary = {k: v for k, v in _metrics(last).items() if k.startswith(SUMMARY_PREFIX)}
        config = self.resolved_config(trial.config)
        with tempfile.TemporaryDirectory() as tmp:
            artifacts: dict[str, Path] = {}
            if isinstance(config, dict):
                path = Path(tmp) / "config.yaml"
                path.write_text(yaml.safe_dump(config, sort_keys=False))
                artifacts[path.name] = path
            plot = _accuracy_plot(trial_id, config, last, Path(tmp))
            if plot is not None:
                artifacts[plot.name] = plot
            for path in self.extra_artifacts(trial.config) if self.extra_artifacts else []:
                artifacts[path.name] = path
            self.tracker.finish(run_id, status, summary, artifacts, outcome, _step(last))
        self._diverged.discard(trial_id)


def _config_entry(trial_config: dict[str, Any]) -> Any:
    return trial_config.get("config")


def _step(result: dict) -> int:
    return int(result.get("step", result.get("training_iteration", 0)))


def _metrics(result: dict) -> dict[str, float]:
    return {
        k: float(v)
        for k, v in result.items()
        # numbers.Real also admits numpy scalars, which training code often reports.
        if k.startswith(METRIC_PREFIXES) and isinstance(v, numbers.Real) and not isinstance(v, bool)
    }


def _accuracy_plot(trial_id: str, config: Any, last: dict, out_dir: Path) -> Path | None:
    points = {
        digits_of(k): float(v) for k, v in last.items() if digits_of(k) is not None and v is not None
    }
    if not points:
        return None
    try:
        train_max = int(config["task"]["train_digits"][1])
    except (TypeError, KeyError, IndexError, ValueError):
        train_max = 0  # unknown training range: plot without the band
    digits = sorted(points)
    return accuracy_vs_length(
        digits,
        [points[d] for d in digits],
        train_max,
        title=f"trial {trial_id}",
        path=out_dir / "accuracy_vs_length.png",
    )
