"""The `search` block of a study file: an Optuna search over config fields.

Its schema (SearchSpec, SearchParam, the SAMPLERS it may name), the profile keys
that change it (`search.points: 6`, `search.params.train.lr: {...}`), and the
checks that refuse, at load time, a search that cannot run (docs/search.md).
"""

from __future__ import annotations

import itertools
import json
import typing
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

import optuna
import pydantic
from pydantic import BaseModel, ConfigDict, Field

from lengthgen.config import TrialConfig
from orchestrator.studies.config_paths import (
    TRIAL_CONFIG,
    StudySource,
    check_axis,
    check_config_path,
    reason,
    validate_trial,
    with_settings,
)
from orchestrator.studies.metric_names import metric_names
from orchestrator.studies.pruners import PrunerSpec

if TYPE_CHECKING:
    from orchestrator.studies.study import StudyFile


#: Optuna samplers a search may name, each seeded with `search.seed`. TPE's constant
#: liar scores the points still running as if they were bad, so that points proposed
#: together (search.parallel_points) spread out instead of piling up in one place.
SAMPLERS: dict[str, Callable[[int], optuna.samplers.BaseSampler]] = {
    "tpe": lambda seed: optuna.samplers.TPESampler(seed=seed, constant_liar=True),
    "random": lambda seed: optuna.samplers.RandomSampler(seed=seed),
}
Choice = bool | int | float | str


class SearchParam(BaseModel):
    """One searched config field: a range (low, high, optionally log or step) or choices."""

    model_config = ConfigDict(extra="forbid")
    #: the range's lower end (integers for an integer field)
    low: int | float | None = None
    #: the range's upper end, included
    high: int | float | None = None
    #: sample evenly on a log scale (learning rates); needs low > 0
    log: bool = False
    #: only multiples of step above low (not with log)
    step: int | float | None = Field(None, gt=0)
    #: or: the values to choose from, instead of a range
    choices: list[Choice] | None = None

    @pydantic.model_validator(mode="after")
    def _range_or_choices(self) -> SearchParam:
        ranged = self.low is not None or self.high is not None or self.log or self.step is not None
        if self.choices is not None:
            if ranged:
                raise ValueError("give either choices or a range (low, high, log, step), not both")
            if not self.choices:
                raise ValueError("choices needs at least one value")
            encoded = [json.dumps(c) for c in self.choices]
            if len(set(encoded)) < len(encoded):
                raise ValueError(f"duplicate choices: {', '.join(sorted({e for e in encoded if encoded.count(e) > 1}))}")
            return self
        if self.low is None or self.high is None:
            raise ValueError("give low and high (a range) or choices")
        if not self.low < self.high:
            raise ValueError(f"low ({self.low}) must be below high ({self.high})")
        if self.log and self.low <= 0:
            raise ValueError(f"a log range needs low > 0, got {self.low}")
        if self.log and self.step is not None:
            raise ValueError("log and step cannot be combined")
        return self

    def extremes(self) -> list[Any]:
        """The values checked at load time: every choice, or both ends of the range."""
        return list(self.choices) if self.choices is not None else [self.low, self.high]

    def __str__(self) -> str:
        if self.choices is not None:
            return "one of " + ", ".join(map(str, self.choices))
        return f"{self.low} .. {self.high}" + (" (log)" if self.log else "") + (f" step {self.step}" if self.step else "")


class SearchSpec(BaseModel):
    """The `search` block: an Optuna search over config fields (docs/search.md)."""

    model_config = ConfigDict(extra="forbid")
    #: Optuna sampler (SAMPLERS)
    sampler: Literal[tuple(SAMPLERS)] = "tpe"
    #: seeds the sampler: the same file proposes the same points
    seed: int = Field(0, ge=0)
    #: points to score in all; a resumed or extended search runs only the missing ones
    points: int = Field(ge=1, le=100_000)
    #: points proposed at once and run side by side (with TPE's constant liar)
    parallel_points: int = Field(1, ge=1)
    #: a point's score: this metric at each seed-trial's final evaluation (a name of
    #: orchestrator.studies.metric_names: acc/digits_NNN, summary/...), averaged over the
    #: seeds; maximized
    metric: str
    #: dotted config path -> range or choices
    params: dict[str, SearchParam] = Field(min_length=1)
    #: dotted config path -> values; every point runs every combination (its seeds)
    repeat: dict[str, list[Any]] = {}
    #: stops poor points early, all their seeds together: one of Optuna's pruners
    #: (orchestrator.studies.pruners.PRUNERS) with its settings; none: every point trains to the end
    pruner: PrunerSpec = PrunerSpec()

    def repeat_settings(self) -> list[dict[str, Any]]:
        """One dict of repeated-field values per seed-trial of a point."""
        return [dict(zip(self.repeat, values)) for values in itertools.product(*self.repeat.values())]


#: profile keys under `search.` change the search block: `search.points: 6`, or one
#: entry of its mappings, `search.params.train.lr: {low: ..., high: ...}`
SEARCH = "search."
#: the search block's mappings, whose entries a profile key can name one by one
SEARCH_MAPPINGS = ("params", "repeat")


def search_key_problem(search: SearchSpec | None, key: str) -> str | None:
    """Why a profile key under `search.` names nothing it could change, or None."""
    if search is None:
        return "the study has no search block to change"
    block, _, entry = key.removeprefix(SEARCH).partition(".")
    if block not in SearchSpec.model_fields:
        return f"no such search field; search fields: {', '.join(SearchSpec.model_fields)}"
    if entry and block not in SEARCH_MAPPINGS:
        return f"search.{block} is not a mapping; set it whole (search.{block}: ...)"
    return None  # the config paths of params and repeat are checked with the search


def profiled_search(source: StudySource, spec: StudyFile, profile: str) -> SearchSpec | None:
    """The search block with the profile's `search.` keys applied. A whole mapping given
    for params or repeat replaces the entries it names and keeps the others, as a
    mapping given for a config block does (config_paths.override)."""
    changes = {k.removeprefix(SEARCH): v for k, v in spec.profiles[profile].items() if k.startswith(SEARCH)}
    if not changes:
        return spec.search
    merged = spec.search.model_dump(exclude_defaults=True)
    for key, value in changes.items():
        block, _, entry = key.partition(".")
        if entry:
            merged.setdefault(block, {})[entry] = value
        elif block in SEARCH_MAPPINGS and isinstance(value, dict):
            merged[block] = {**merged.get(block, {}), **value}
        else:
            merged[block] = value
    try:
        return SearchSpec.model_validate(merged)
    except pydantic.ValidationError as error:
        first = error.errors()[0]
        loc = tuple(str(p) for p in first["loc"])
        # the profile key the bad value came from: the longest one that covers loc
        keys = [SEARCH + ".".join(loc[:n]) for n in range(len(loc), 0, -1)]
        key = next((k for k in keys if k in spec.profiles[profile]), None)
        where = ("profiles", profile) + ((key,) if key else ())
        raise source.error(f"profiles.{profile}.{SEARCH}{'.'.join(loc)}", reason(first, SearchSpec), where) from None


def check_search(source: StudySource, spec: StudyFile, profile: str | None, base: dict) -> None:
    """Refuse a search that cannot run: axes beside it, unknown or unsearchable fields,
    ranges of the wrong kind, values no trial accepts (each choice and both ends of each
    range are tried on base), and a metric the trials do not log."""
    search = spec.search
    for block in ("axes", "exclude"):
        if getattr(spec, block):
            raise source.error(block, f"a study with a search block has no {block}: its trials are the "
                               "points the search proposes; put fields run at every point (seeds) under "
                               "search.repeat", (block,))
    base_config = validate_trial(source, base, spec, profile, {}, base)
    for key, param in search.params.items():
        where = _search_where(spec, profile, "params", key)
        check_config_path(source, key, where)
        if key.startswith("seeds."):
            raise source.error(".".join(where), "seeds are not searched: run them at every point "
                               "with search.repeat", where)
        kind = config_field_type(key)
        if param.choices is None and kind not in (int, float):
            raise source.error(".".join(where), f"{key} is not a number: give choices instead of a range", where)
        bounds = (param.low, param.high, param.step)
        if param.choices is None and kind is int and not all(isinstance(b, int) for b in bounds if b is not None):
            given = ", ".join(f"{name} {bound!r}" for name, bound in zip(("low", "high", "step"), bounds)
                              if bound is not None)
            raise source.error(".".join(where), f"{key} takes whole numbers: low, high and step must be "
                               f"integers, got {given}", where)
        for value in param.extremes():
            _check_value(source, base, key, value, where)
    for key, values in search.repeat.items():
        where = _search_where(spec, profile, "repeat", key)
        if key in search.params:
            raise source.error(".".join(where), "it is searched (search.params): a field is either "
                               "searched or repeated", where)
        check_axis(source, key, values, where)
        for value in values:
            _check_value(source, base, key, value, where)
    if search.pruner.value == "upper_bound" and len(search.repeat_settings()) < 2:
        where = _search_where(spec, profile, "pruner")
        raise source.error(".".join(where) + ".value", "upper_bound needs a spread: two or more seeds at "
                           "every point (search.repeat); with one seed use value mean", where)
    names = metric_names(base_config)
    if search.metric not in names:
        where = _search_where(spec, profile, "metric")
        raise source.error(".".join(where), f"{search.metric!r} is not a metric of these trials; "
                           f"metrics: {', '.join(names)}", where)


def config_field_type(key: str) -> Any:
    """The annotated type of the TrialConfig field at dotted ``key`` (int, float, a Literal...)."""
    *parents, leaf = key.split(".")
    owner: Any = TrialConfig
    for part in parents:
        owner = typing.get_type_hints(owner)[part]
    return typing.get_type_hints(owner)[leaf]


def _search_where(spec: StudyFile, profile: str | None, *parts: str) -> tuple:
    """Where a search setting was written: the profile key that set it, else the search block."""
    if profile:
        overrides = spec.profiles[profile]
        for n in range(len(parts), 0, -1):
            key = SEARCH + ".".join(parts[:n])
            if key in overrides:
                return ("profiles", profile, key)
    return ("search", *parts)


def _check_value(source: StudySource, base: dict, key: str, value: Any, where: tuple) -> None:
    try:
        TRIAL_CONFIG.validate_python(with_settings(source, base, {key: value}))
    except pydantic.ValidationError as error:
        why = reason(error.errors()[0], TrialConfig)
        raise source.error(".".join(where), f"value {value!r}: {why}", where) from None

