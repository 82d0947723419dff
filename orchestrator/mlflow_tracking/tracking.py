"""A study's MLflow experiment and its runs, one per trial (tag ``trial_id``).

What a run holds is written by orchestrator.mlflow_tracking.mlflow_sync from the trial's rows; this
module only knows MLflow's runs, metrics, tags and artifacts. The client and its store
are orchestrator.mlflow_tracking.mlflow_store's.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from mlflow.entities import Metric, Param, RunTag
from mlflow.utils.validation import (
    MAX_METRICS_PER_BATCH,
    MAX_PARAM_VAL_LENGTH,
    MAX_PARAMS_TAGS_PER_BATCH,
    MAX_TAG_VAL_LENGTH,
)

from orchestrator.mlflow_tracking.group_runs import KIND_TAG, GroupParents
from orchestrator.mlflow_tracking.mlflow_store import SerializedClient, artifact_location

RUN_NAME_TAG = "mlflow.runName"  # MLflow's own tag for a run's name
# The MLflow 3 UI opens an experiment in its "model training" views (runs, metrics)
# rather than its GenAI ones (traces) when it carries this tag.
EXPERIMENT_TAGS = {"mlflow.experimentKind": "custom_model_development"}
#: how a run can end, and the run's `status` tag each gives unless told otherwise
OUTCOME = {"FINISHED": "done", "FAILED": "failed", "KILLED": "killed"}

T = TypeVar("T")


def _chunks(items: Sequence[T], size: int) -> Iterator[Sequence[T]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


class StudyTracker:
    """One MLflow experiment per study, exactly one run per trial (tag ``trial_id``)."""

    def __init__(self, tracking_uri: str, study: str) -> None:
        self.client = SerializedClient(tracking_uri)
        self.study = study
        self._run_ids: dict[str, str] = {}
        #: run_id -> its status as this tracker last set or found it
        self._status: dict[str, str] = {}
        #: run_id -> metric -> last step logged (metrics are never logged twice at a step)
        self._last_step: dict[str, dict[str, int]] = {}
        #: the configuration groups' parent runs (group_runs)
        self.groups = GroupParents(self)
        experiment = self.client.get_experiment_by_name(study)
        if experiment is not None:
            self.experiment_id = experiment.experiment_id
            if experiment.lifecycle_stage == "deleted":
                # Deleted in the UI: its name stays taken, and it refuses new runs.
                self.client.restore_experiment(self.experiment_id)
            for key, value in EXPERIMENT_TAGS.items():
                if key not in experiment.tags:  # made before lg-study tagged its kind
                    self.client.set_experiment_tag(self.experiment_id, key, value)
        else:
            self.experiment_id = self.client.create_experiment(
                study,
                artifact_location=artifact_location(tracking_uri, study),
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
        """The trial's run, created or re-attached and left RUNNING.

        A new run is named ``run_name``, else the tag ``mlflow.runName``, else the trial
        id; an existing run is renamed only to a ``run_name`` given.
        """
        if trial_id in self._run_ids:
            run_id = self._run_ids[trial_id]
            if self._status.get(run_id) != "RUNNING":
                self.client.update_run(run_id, status="RUNNING")
                self._status[run_id] = "RUNNING"
            return run_id
        renamed = run_name is not None
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
            kept = {k: v for k, v in tags.items() if renamed or k != RUN_NAME_TAG}
            self.set_tags(run_id, {**kept, "trial_id": trial_id})
        self._last_step[run_id] = self._logged_steps(run) if found else {}
        self._run_ids[trial_id] = run_id
        self._status[run_id] = "RUNNING"
        return run_id

    def log_metrics(self, run_id: str, metrics: Mapping[str, float | None], step: int) -> None:
        """Log ``metrics`` at ``step`` (log_steps)."""
        self.log_steps(run_id, [(step, metrics)])

    def log_steps(self, run_id: str, steps: Iterable[tuple[int, Mapping[str, float | None]]]) -> None:
        """Log each (step, metrics) in as few calls as MLflow allows. NaN is logged on
        purpose; MLflow clamps inf to +-max float; None is left out.

        A metric is not logged at a step at or before the last one it has in the run:
        a trial resumed from its checkpoint repeats the steps after the checkpoint,
        which the run may have logged before the interruption.
        """
        last = dict(self._last_step.get(run_id, {}))
        ts = int(time.time() * 1000)
        batch = []
        for step, metrics in sorted(steps, key=lambda item: item[0]):
            for key, value in metrics.items():
                if value is not None and step > last.get(key, -1):
                    batch.append(Metric(key, float(value), ts, step))
                    last[key] = step
        try:
            for chunk in _chunks(batch, MAX_METRICS_PER_BATCH):
                self.client.log_batch(run_id, metrics=chunk)
        except Exception:
            # a call that failed may have been stored all the same (a server killed after
            # its commit): the next call reads what the run has rather than logging again
            self._forget(run_id)
            raise
        self._last_step[run_id] = last

    def _forget(self, run_id: str) -> None:
        """Drop what this tracker believes of a run: run_for_trial finds it again and
        reads its logged steps from the store."""
        self._last_step.pop(run_id, None)
        self._status.pop(run_id, None)
        self._run_ids = {trial: run for trial, run in self._run_ids.items() if run != run_id}

    def finish(
        self,
        run_id: str,
        status: str,
        summary: dict[str, float],
        artifacts: dict[str, Path],
        outcome: str | None = None,
        step: int = 0,
    ) -> None:
        """Log the summary and artifacts, tag ``status`` (done/diverged/failed/killed),
        then end the run as ``status`` (FINISHED/FAILED/KILLED).

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
        self.set_tags(run_id, {"status": outcome or OUTCOME[status]})
        self.client.set_terminated(run_id, status)
        self._status[run_id] = status

    def search_all(self, filter_string: str = "") -> Iterator[Any]:
        """Every run of the study matching ``filter_string``, oldest first, page by page."""
        page_token = None
        while True:
            page = self.client.search_runs(
                [self.experiment_id], filter_string=filter_string, max_results=1000,
                order_by=["attributes.start_time ASC"], page_token=page_token,
            )
            yield from page
            page_token = page.token
            if not page_token:
                return

    def runs_by_trial(self) -> dict[str, list[dict[str, str]]]:
        """trial_id -> its runs: run_id, status (RUNNING, FINISHED, ...) and outcome
        (the `status` tag: done, diverged, failed, killed; "" while it has none). A
        group's parent run (group_runs) is no trial's."""
        runs: dict[str, list[dict[str, str]]] = {}
        for run in self.search_all():
            if KIND_TAG in run.data.tags:
                continue
            trial_id = run.data.tags.get("trial_id", "")
            runs.setdefault(trial_id, []).append({
                "run_id": run.info.run_id,
                "status": run.info.status,
                "outcome": run.data.tags.get("status", ""),
            })
        return runs

    def tag_trial_runs(self, tags_by_trial: Mapping[str, Mapping[str, str]]) -> None:
        """Add tags to the runs of trials (e.g. the search point a trial was run for);
        a trial without a run yet is left alone."""
        runs = self.runs_by_trial()
        for trial_id, tags in tags_by_trial.items():
            for run in runs.get(trial_id, []):
                self.set_tags(run["run_id"], dict(tags))

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
                    self.set_tags(run["run_id"], {"status": OUTCOME[status]})
                    self.client.set_terminated(run["run_id"], status)
                    self._status[run["run_id"]] = status
                    ended.append(trial_id)
        return ended

    def delete_runs(self) -> int:
        """Delete every run of the study, its groups' parents too (``run --restart``);
        return how many trial runs."""
        runs = list(self.search_all())
        for run in runs:
            self.client.delete_run(run.info.run_id)
        self.groups.forget()
        self._run_ids.clear()
        self._status.clear()
        self._last_step.clear()
        return sum(KIND_TAG not in run.data.tags for run in runs)

    def set_tags(self, run_id: str, tags: Mapping[str, str]) -> None:
        batch = [RunTag(k, str(v)[:MAX_TAG_VAL_LENGTH]) for k, v in tags.items()]
        for chunk in _chunks(batch, MAX_PARAMS_TAGS_PER_BATCH):
            self.client.log_batch(run_id, tags=chunk)

    def _logged_steps(self, run: Any) -> dict[str, int]:
        return {
            key: max((m.step for m in self.client.get_metric_history(run.info.run_id, key)), default=-1)
            for key in run.data.metrics
        }
