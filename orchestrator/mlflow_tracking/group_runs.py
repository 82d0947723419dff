"""A configuration group's MLflow parent run: every trial run of the group nested under
it (MLflow's tag ``mlflow.parentRunId``), its numbers over the group's seeds logged on it.

The parent is made from a trial's run alone: its name, the group's short label the
driver gives (else the group's label), its params the trial's less the seeds its
group's trials differ by, its tags ``group``, ``group_label`` and ``lg_study.kind =
group``. There is exactly one per group: found again by those tags, one creation at a
time, and a duplicate left by a call that failed after its commit is deleted (its
children are nested again under the one kept). What it holds over the seeds
(GroupNumbers) is worked out by the code that runs the study, from the analysis's SQL;
here it is only logged, with the number of finished trials as the step, so the UI's
charts show an interval narrow as seeds come in.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mlflow.entities import Metric, Param
from mlflow.utils.validation import (
    MAX_METRICS_PER_BATCH,
    MAX_PARAM_VAL_LENGTH,
    MAX_PARAMS_TAGS_PER_BATCH,
)

from results_contract.identity import seeds_apart

if TYPE_CHECKING:
    from orchestrator.mlflow_tracking.tracking import StudyTracker

#: what kind of run a run is; a trial's run has no such tag
KIND_TAG = "lg_study.kind"
GROUP_KIND = "group"
#: MLflow's own tag that nests a run under another in the runs table
PARENT_TAG = "mlflow.parentRunId"
#: the parent's tag holding the step its numbers were last logged at
STEP_TAG = "finished_trials"
#: the parent's tag holding the step its figures were drawn at
FIGURES_TAG = "figures_finished_trials"
#: the folder of a parent's artifacts that holds the group's report figures
FIGURES_FOLDER = "figures"
#: the search filter that lists a study's trial runs alone, without their parents
TRIAL_RUNS = "tags.trial_id LIKE '%'"
_SEED_PARAMS = tuple(f"seeds.{name}" for name in seeds_apart())


@dataclass
class GroupNumbers:
    """What a group's parent shows, as the analysis answered it: the group's short label,
    tags (its seed counts), and metrics (name -> value) at ``step``, its finished trials."""

    group_id: str
    name: str
    step: int
    metrics: dict[str, float] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    #: every trial planned for the group has finished: its figures may be drawn now
    complete: bool = False


@dataclass
class _Parent:
    run_id: str
    #: the step its numbers were last logged at, and those numbers
    step: int = -1
    metrics: dict[str, float] = field(default_factory=dict)
    #: whether it has its params (a failed call may have left it without them)
    has_params: bool = False
    #: the step its figures were drawn at (-1: none)
    figures_step: int = -1
    #: its numbers were those of a group whose planned trials had all finished
    complete: bool = False


def group_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """A trial run's params less its seeds apart: its group's settings."""
    return {key: value for key, value in params.items() if key not in _SEED_PARAMS}


def _chunks(items: list, size: int) -> Iterable[list]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


class GroupParents:
    """The study's parent runs, one per group, as its tracker found or made them."""

    def __init__(self, tracker: StudyTracker) -> None:
        self.tracker = tracker
        self._lock = threading.Lock()  # a tracking server's sync threads share it
        #: group id -> its parent; None until read
        self._runs: dict[str, _Parent] | None = None

    def forget(self) -> None:
        """Read the parents from the store again at their next use (runs deleted)."""
        with self._lock:
            self._runs = None

    def parent(self, group_id: str, label: str, name: str | None, params: Mapping[str, Any]) -> str:
        """The group's parent run, made from a trial's ``params`` if it has none yet."""
        with self._lock:
            runs = self._read()
            if group_id not in runs:
                tags = {"group": group_id, "group_label": label, KIND_TAG: GROUP_KIND, "study": self.tracker.study}
                run = self.tracker.client.create_run(self.tracker.experiment_id, tags=tags, run_name=name or label)
                runs[group_id] = _Parent(run.info.run_id)  # made: a failure below must not make another
                # a parent holds numbers, not a process: it is never left RUNNING for a
                # killed driver's repairs to end
                self.tracker.client.set_terminated(run.info.run_id, "FINISHED")
            parent = runs[group_id]
            if not parent.has_params:
                batch = [Param(k, str(v)[:MAX_PARAM_VAL_LENGTH]) for k, v in group_params(params).items()]
                for chunk in _chunks(batch, MAX_PARAMS_TAGS_PER_BATCH):
                    self.tracker.client.log_batch(parent.run_id, params=chunk)
                parent.has_params = True
            return parent.run_id

    def write(self, numbers: GroupNumbers) -> bool:
        """Log a group's numbers on its parent (renamed to ``numbers.name``); False when it
        has no parent yet, or already shows these numbers at this step."""
        with self._lock:
            found = self._read().get(numbers.group_id)
            if found is None:
                return False
            found.complete = numbers.complete
            if found.step == numbers.step and found.metrics == numbers.metrics:
                return False
            stamp = int(time.time() * 1000)
            metrics = [Metric(k, float(v), stamp, numbers.step) for k, v in sorted(numbers.metrics.items())]
            for chunk in _chunks(metrics, MAX_METRICS_PER_BATCH):
                self.tracker.client.log_batch(found.run_id, metrics=chunk)
            tags = {**numbers.tags, STEP_TAG: str(numbers.step), "mlflow.runName": numbers.name}
            self.tracker.set_tags(found.run_id, tags)
            found.step, found.metrics = numbers.step, dict(numbers.metrics)
            return True

    def stale_figures(self, complete: bool = False) -> list[str]:
        """The groups whose parent shows numbers its figures were not drawn from; with
        ``complete``, of those the groups whose planned trials have all finished."""
        with self._lock:
            return sorted(g for g, parent in self._read().items() if parent.step >= 0
                          and parent.figures_step != parent.step and (parent.complete or not complete))

    def log_figures(self, group_id: str, files: Mapping[str, Path]) -> None:
        """Log a group's figures (name -> its file) on its parent, in FIGURES_FOLDER,
        replacing those of fewer finished trials."""
        with self._lock:
            parent = self._read()[group_id]
            step = parent.step
        for path in files.values():
            self.tracker.client.log_artifact(parent.run_id, str(path), FIGURES_FOLDER)
        self.tracker.set_tags(parent.run_id, {FIGURES_TAG: str(step)})
        with self._lock:
            parent.figures_step = step

    def _read(self) -> dict[str, _Parent]:
        if self._runs is None:
            # kept only once every page is read: a group missed would get a second parent
            found: dict[str, _Parent] = {}
            extra = []
            for run in self.tracker.search_all(f"tags.`{KIND_TAG}` = '{GROUP_KIND}'"):
                group_id = run.data.tags.get("group", "")
                if group_id in found:
                    extra.append(run.info.run_id)  # the oldest is kept: search_all is oldest first
                    continue
                step = int(run.data.tags.get(STEP_TAG, "-1") or -1)
                drawn = int(run.data.tags.get(FIGURES_TAG, "-1") or -1)
                found[group_id] = _Parent(run.info.run_id, step, dict(run.data.metrics), bool(run.data.params),
                                          drawn)
            for run_id in extra:
                self.tracker.client.delete_run(run_id)
            self._runs = found
        return self._runs


def nest_runs(tracker: StudyTracker, names: Mapping[str, str]) -> list[str]:
    """Nest every trial run of the study under its group's parent, making the parents
    that are missing (a study run before parents existed, a duplicate deleted); return
    the trial ids whose runs were moved. ``names``: group id -> the parent's name."""
    moved = []
    for run in tracker.search_all():
        tags = run.data.tags
        group_id, trial_id = tags.get("group"), tags.get("trial_id")
        if not group_id or not trial_id or KIND_TAG in tags:
            continue
        parent = tracker.groups.parent(group_id, tags.get("group_label", group_id), names.get(group_id),
                                       run.data.params)
        if tags.get(PARENT_TAG) != parent:
            tracker.set_tags(run.info.run_id, {PARENT_TAG: parent})
            moved.append(trial_id)
    return moved
