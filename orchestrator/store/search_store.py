"""The Optuna side of a search (docs/search.md): its storage, its points and their scores.

Each study keeps its searches in `<results>/<study>/optuna.db`, one Optuna study per
profile it was run with (`search_name`). A point's Optuna trial holds the point's
values, the ids of its seed-trials (`trial_ids`) and, once scored, the score of each
(`scores`); its value is their mean. Reading a search (`lg-study status`) needs
neither Ray nor MLflow, so this module imports neither.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import optuna
from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)
from optuna.trial import TrialState

if TYPE_CHECKING:  # `lg-study status` reads searches without loading torch (through the config types)
    from orchestrator.studies.search_spec import SearchParam
    from orchestrator.studies.study import Study

STORAGE_FILE = "optuna.db"
#: Optuna study attribute: what the scores mean (config, params, repeat, metric)
MEANING = "lg_study_meaning"
#: Optuna trial attributes: the point's trial ids, and the score of each
TRIAL_IDS, SCORES = "trial_ids", "scores"
#: points that are not run again: scored, pruned (search.pruner), or refused (values no trial accepts)
TOLD = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)


class SearchChanged(ValueError):
    """The stored search was started from a different study file; str() says what differs."""


@dataclass
class Point:
    """A scored point: its values and the score of each of its seed-trials."""

    number: int
    params: dict[str, Any]
    #: trial_id -> that seed-trial's score (orchestrator.running.search.seed_score)
    scores: dict[str, float]

    @property
    def mean(self) -> float:
        return statistics.fmean(self.scores.values())

    @property
    def sd(self) -> float:
        """Sample standard deviation over the seeds (nan with one seed)."""
        return statistics.stdev(self.scores.values()) if len(self.scores) > 1 else math.nan


@dataclass
class SearchState:
    """A stored search: its scored points, best first, and how many points are not."""

    name: str
    metric: str
    points: list[Point]
    #: asked but not scored yet: run again by the next `lg-study run`
    open: int
    #: values that no trial accepts; not run again
    refused: int
    #: stopped early by search.pruner; not run again
    pruned: int = 0


def search_name(study: Study) -> str:
    """The Optuna study's name: a profile's search is kept apart from the file's own."""
    return study.name if study.profile is None else f"{study.name}:{study.profile}"


def storage_path(results_root: Path, study_name: str) -> Path:
    return Path(results_root) / study_name / STORAGE_FILE


def distribution(key: str, param: SearchParam) -> BaseDistribution:
    """The Optuna distribution of one searched field (whole numbers for an int field)."""
    from orchestrator.studies.search_spec import config_field_type

    if param.choices is not None:
        return CategoricalDistribution(param.choices)
    if config_field_type(key) is int:
        return IntDistribution(param.low, param.high, log=param.log, step=param.step or 1)
    return FloatDistribution(param.low, param.high, log=param.log, step=param.step)


class SearchStore:
    """The search's Optuna study in its SQLite storage."""

    def __init__(self, study: Study, results_root: Path):
        from orchestrator.studies.search_spec import SAMPLERS

        path = storage_path(results_root, study.name)
        path.parent.mkdir(parents=True, exist_ok=True)
        search = study.spec.search
        self.name = search_name(study)
        self.storage = optuna.storages.RDBStorage(f"sqlite:///{path}")
        try:
            asked = self.storage.get_n_trials(self.storage.get_study_id_from_name(self.name))
        except KeyError:  # a new search
            asked = 0
        # A sampler seeded alike on every run would draw its first random points again
        # when a search is resumed: its seed is offset by the points the search already has.
        self.optuna = optuna.create_study(
            storage=self.storage, study_name=self.name, sampler=SAMPLERS[search.sampler](search.seed + asked),
            pruner=search.pruner.make(), direction="maximize", load_if_exists=True,
        )
        self.distributions = {key: distribution(key, param) for key, param in search.params.items()}
        meaning = _meaning(study)
        stored = self.optuna.user_attrs.get(MEANING)
        if stored is None:
            self.optuna.set_user_attr(MEANING, meaning)
        elif stored != meaning:
            changed = ", ".join(k for k in meaning if stored.get(k) != meaning[k])
            raise SearchChanged(
                f"{path}: search {self.name!r} was started with a different {changed}, so its scores "
                "would not compare with new ones; run with --restart to start it afresh (this deletes "
                "the study's results), or give the study another name"
            )

    def trials(self, states: tuple[TrialState, ...]) -> list[optuna.trial.FrozenTrial]:
        return self.optuna.get_trials(deepcopy=False, states=states)

    def ask(self) -> tuple[int, dict[str, Any]]:
        trial = self.optuna.ask(self.distributions)
        return trial.number, trial.params

    def set_attrs(self, number: int, attrs: dict[str, Any]) -> None:
        # through the storage: the point may have been asked by another (stopped) driver
        study_id = self.storage.get_study_id_from_name(self.name)
        trial_id = self.storage.get_trial_id_from_study_id_trial_number(study_id, number)
        for key, value in attrs.items():
            self.storage.set_trial_user_attr(trial_id, key, value)

    def state(self) -> SearchState:
        return _state(self.optuna)


def _meaning(study: Study) -> dict[str, Any]:
    """What a score of this search is the score of; JSON-normal, as Optuna stores it."""
    search = study.spec.search
    return json.loads(json.dumps({
        "config": study.config_with({}).to_dict(),
        "params": {key: param.model_dump(exclude_defaults=True) for key, param in search.params.items()},
        "repeat": search.repeat,
        "metric": search.metric,
    }))


def search_states(results_root: Path, study_name: str, only: str | None = None) -> list[SearchState]:
    """The searches stored for a study (one per profile it was run with), or only the
    one named; [] when the study has no Optuna storage."""
    path = storage_path(results_root, study_name)
    if not path.is_file():
        return []
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = optuna.storages.RDBStorage(f"sqlite:///{path}")
    names = optuna.get_all_study_names(storage)
    return [_state(optuna.load_study(study_name=name, storage=storage))
            for name in sorted(names) if only is None or name == only]


def _state(optuna_study: optuna.Study) -> SearchState:
    trials = optuna_study.get_trials(deepcopy=False)
    points = [Point(t.number, t.params, t.user_attrs.get(SCORES, {}))
              for t in trials if t.state == TrialState.COMPLETE and t.user_attrs.get(SCORES)]
    points.sort(key=lambda p: (-p.mean, p.number))
    return SearchState(
        name=optuna_study.study_name,
        metric=optuna_study.user_attrs.get(MEANING, {}).get("metric", "?"),
        points=points,
        open=sum(t.state == TrialState.RUNNING for t in trials),
        refused=sum(t.state == TrialState.FAIL for t in trials),
        pruned=sum(t.state == TrialState.PRUNED for t in trials),
    )
