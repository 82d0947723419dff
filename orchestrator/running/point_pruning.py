"""A search's pruner at work (`search.pruner`, docs/search.md): Optuna's pruner decides,
Ray Tune stops.

PointPruner is the Tune stopper of a batch of points. It reads the search metric from
each seed-trial's results as the worker reports them (the seed is named by TRIAL_KEY,
since a seed batch reports all its seeds through one Tune trial), and once every seed
of a point has reported an evaluation step, reports the point's value there
(`search.pruner.value`: PrunerSpec.point_value) to the point's Optuna trial and asks
Optuna's `should_prune`. A pruned point's step is stored at once as the Optuna trial's
PRUNED_AT attribute, so a driver stopped before it settles the point settles it on the
next run without asking again; every seed of the point is stopped at its next report
(a seed batch of the point with it). After the batch, `settle` gives each seed the
`pruned` status, cuts its rows back to the step, and drops its checkpoint.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import optuna
from ray import tune

from orchestrator.running.trainable import TRIAL_KEY
from orchestrator.store.results_store import read_trial_row, read_trial_rows, write_trial_table
from orchestrator.studies.pruners import PrunerSpec
from results_contract.layout import checkpoint_path
from results_contract.trial_status import TrialStatus

#: Optuna trial attribute: the evaluation step a point was pruned at
PRUNED_AT = "pruned_at"
#: the tables a running trial has written rows of, by step
STEP_TABLES = ("train", "eval")


class PointPruner(tune.Stopper):
    """Stops every seed of a point that ``optuna_study``'s pruner prunes (module docstring).
    ``points``: Optuna trial number -> the point's seed-trial ids; ``last_steps``: -> its
    train.steps; ``spec``: the search's pruner, which says what it sees of a point."""

    def __init__(self, optuna_study: optuna.Study, points: dict[int, list[str]], metric: str,
                 last_steps: dict[int, int], spec: PrunerSpec):
        self.optuna_study, self.metric, self.last_steps, self.spec = optuna_study, metric, last_steps, spec
        self.seeds = points
        self.point_of = {trial_id: number for number, ids in points.items() for trial_id in ids}
        #: (point, step) -> seed-trial id -> the metric there
        self.values: dict[tuple[int, int], dict[str, float]] = defaultdict(dict)
        self.pruned: dict[int, int] = {}

    def __getstate__(self) -> dict:
        # Tune pickles its stopper into the experiment's state; a storage's engine is not
        # picklable, and a study is resumed from Optuna's storage, not Tune's state
        return {**self.__dict__, "optuna_study": None}

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        seed = result.get(TRIAL_KEY)
        number = self.point_of.get(seed)
        if number is None:
            return False
        step = result.get("step")
        # the last step is not judged: the point is scored there, and pruning it saves nothing
        judged = self.metric in result and step is not None and step < self.last_steps[number]
        if number not in self.pruned and judged:
            seen = self.values[(number, step)]
            seen[seed] = float(result[self.metric])
            if len(seen) == len(self.seeds[number]):
                self._judge(number, step, self.spec.point_value(list(seen.values())))
        return number in self.pruned

    def judge_stored(self) -> None:
        """Judge the steps that all seeds of a resumed point had stored, in step order, where
        its Optuna trial has no value yet (its driver stopped between the rows and the report)."""
        for (number, step), seen in sorted(self.values.items(), key=lambda item: item[0][1]):
            trial = self.optuna_study._storage.get_trial(self._trial_id(number))
            if (number not in self.pruned and len(seen) == len(self.seeds[number])
                    and step < self.last_steps[number] and step not in trial.intermediate_values):
                self._judge(number, step, self.spec.point_value(list(seen.values())))

    def _trial_id(self, number: int) -> int:
        # Optuna reopens a trial by its storage id only; the study's storage and id are
        # private attributes, read here and nowhere else
        study = self.optuna_study
        return study._storage.get_trial_id_from_study_id_trial_number(study._study_id, number)

    def _judge(self, number: int, step: int, value: float) -> None:
        """Tell the point's Optuna trial its value at ``step`` and ask its pruner."""
        storage = self.optuna_study._storage
        trial_id = self._trial_id(number)
        trial = optuna.trial.Trial(self.optuna_study, trial_id)
        if step not in storage.get_trial(trial_id).intermediate_values:  # a resumed point's keeps its value
            trial.report(value, step)
        if trial.should_prune():
            storage.set_trial_user_attr(trial_id, PRUNED_AT, step)
            self.pruned[number] = step

    def stop_all(self) -> bool:
        return False

    def settle(self, results_root: Path, study: str) -> list[str]:
        """Every seed of the pruned points marked `pruned` at its point's step; their ids."""
        settled = []
        for number, step in sorted(self.pruned.items()):
            for trial_id in self.seeds[number]:
                settle_pruned(results_root, study, trial_id, step)
                settled.append(trial_id)
        return settled


def settle_pruned(results_root: Path, study: str, trial_id: str, step: int) -> None:
    """The seed-trial's rows up to ``step`` kept, its checkpoint dropped, its `trials` row
    `pruned` at ``step``. Its seeds were stopped at different steps past it (each at its
    next report), so each keeps only what the pruner saw: the rows up to the step."""
    for table in STEP_TABLES:
        rows = read_trial_rows(results_root, study, table, trial_id)
        kept = [row for row in rows if row["step"] <= step]
        if len(kept) < len(rows):
            write_trial_table(results_root, study, table, trial_id, kept)
    checkpoint_path(results_root, study, trial_id).unlink(missing_ok=True)
    row = read_trial_row(results_root, study, trial_id)
    if row is None:  # never started: nothing to keep (a point pruned before it ran cannot be)
        return
    row.update(status=TrialStatus.PRUNED, pruned_at=step, finished_at=datetime.now(timezone.utc), error=None)
    write_trial_table(results_root, study, "trials", trial_id, [row])
