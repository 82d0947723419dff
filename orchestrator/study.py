"""Study files: load, validate and expand into resolved trial configs.

Everything a study file can get wrong is found here, before anything runs, and
reported as a `StudyError` naming the file, the field (with its YAML line where
there is one) and what is allowed.
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
import json
import math
import re
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import optuna
import pydantic
import yaml
from pydantic import BaseModel, ConfigDict, Field

from lengthgen.config import TrialConfig
from lengthgen.evaluation import LengthResult, summarize

TRIAL_CONFIG = pydantic.TypeAdapter(TrialConfig)
DEFAULT_CONFIG = TrialConfig().to_dict()


class StudyError(ValueError):
    """A study file that cannot run. str() is the message a user sees."""

    def __init__(self, file: Path, field: str | None, reason: str, line: int | None = None):
        self.file, self.field, self.reason, self.line = file, field, reason, line
        where = f"{file}:{line}" if line else str(file)
        super().__init__(f"{where}: {field}: {reason}" if field else f"{where}: {reason}")


class Resources(BaseModel):
    model_config = ConfigDict(extra="forbid")
    #: CPU cores per trial; also the torch thread count inside the trial
    cpus_per_trial: float = Field(1.0, gt=0)
    #: GPUs per trial; fractions pack several trials on one GPU
    gpus_per_trial: float = Field(0.0, ge=0)
    #: at most this many trials at once (default: as many as the resources allow)
    max_concurrent_trials: int | None = Field(None, ge=1)
    #: times a trial is retried, from its last checkpoint, after its worker process
    #: died (or it raised); past this the trial is `failed` and the study goes on
    max_failures: int = Field(1, ge=0, le=100)


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
    low: int | float | None = None
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
    #: a point's score: this metric at each seed-trial's final evaluation, named as
    #: MLflow logs it (acc/digits_NNN, summary/...), averaged over the seeds; maximized
    metric: str
    #: dotted config path -> range or choices
    params: dict[str, SearchParam] = Field(min_length=1)
    #: dotted config path -> values; every point runs every combination (its seeds)
    repeat: dict[str, list[Any]] = {}

    def repeat_settings(self) -> list[dict[str, Any]]:
        """One dict of repeated-field values per seed-trial of a point."""
        return [dict(zip(self.repeat, values)) for values in itertools.product(*self.repeat.values())]


class StudyFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    #: names the results folder and the MLflow experiment
    name: str = Field(max_length=100)
    #: the paper figure or table the study reproduces
    source: str = ""
    description: str = ""
    #: one complete trial config (lengthgen.config.TrialConfig as nested mappings)
    base: dict[str, Any]
    #: dotted config path -> values; every combination is a trial
    axes: dict[str, list[Any]] = {}
    #: combinations of axis values that are not trials: each rule maps dotted config
    #: paths to values, and a combination whose resolved config matches every entry of
    #: a rule is left out (e.g. {task.name: addition, model.pe: upe}: UPE needs a multiplier)
    exclude: list[dict[str, Any]] = []
    #: an Optuna search instead of axes (SearchSpec); null for a grid study
    search: SearchSpec | None = None
    resources: Resources = Resources()
    #: profile name -> {dotted config path: value}, applied to base with --profile
    profiles: dict[str, dict[str, Any]] = {}

    @pydantic.field_validator("name")
    @classmethod
    def _one_folder_name(cls, name: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", name):
            raise ValueError(
                f"{name!r} cannot name the study's results folder: use letters, digits, '_', '-' "
                "and '.', starting with a letter or digit (no '/', no leading '.')"
            )
        return name


@dataclass
class Study:
    file: Path
    spec: StudyFile
    profile: str | None
    #: resolved configs, one per trial, in the order of the crossed axes
    trials: list[TrialConfig]
    #: for each trial, the value it takes on each axis
    axis_values: list[dict[str, Any]]
    #: the base config with the profile applied (a search builds its trials from it)
    base: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def trial_count(self) -> int:
        """Trials the study runs: its grid, or a search's points times its repeats."""
        search = self.spec.search
        return search.points * len(search.repeat_settings()) if search else len(self.trials)

    def config_with(self, settings: dict[str, Any]) -> TrialConfig:
        """The base config with dotted ``settings`` applied (a search point and its seeds);
        raises pydantic.ValidationError for a combination that cannot work."""
        return TRIAL_CONFIG.validate_python(_with(self.file, _LineFinder(""), self.base, settings))


def load_study(path: Path, profile: str | None = None) -> Study:
    path = Path(path)
    text = _read(path)
    lines = _LineFinder(text)
    try:
        raw = yaml.load(text, Loader=_UniqueKeyLoader)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        raise StudyError(path, None, f"not valid YAML: {getattr(error, 'problem', error)}",
                         mark.line + 1 if mark else None) from None
    if not isinstance(raw, dict):
        raise StudyError(path, None, "a study file is a mapping with keys: " + ", ".join(StudyFile.model_fields))
    try:
        spec = StudyFile.model_validate(raw)
    except pydantic.ValidationError as error:
        first = error.errors()[0]
        field = ".".join(str(p) for p in first["loc"])
        raise StudyError(path, field, _reason(first, StudyFile), lines.find(first["loc"])) from None

    for name, overrides in spec.profiles.items():  # every profile, chosen or not
        for key in overrides:
            problem = _profile_key_problem(spec, key)
            if problem:
                where = ("profiles", name, key)
                raise StudyError(path, ".".join(where), problem, lines.find(where))
    written = spec
    base = copy.deepcopy(spec.base)
    if profile is not None:
        if profile not in spec.profiles:
            choices = ", ".join(spec.profiles) or "none defined"
            raise StudyError(path, "--profile", f"unknown profile {profile!r}; profiles: {choices}")
        base, spec = _apply_profile(path, lines, spec, profile)

    trials, axis_values = [], []
    if spec.search is not None:
        _check_search(path, lines, spec, profile, base)  # its trials are made as it runs
        _check_other_profiles(path, lines, written, profile)
        return Study(path, spec, profile, trials, axis_values, base)
    for key, values in spec.axes.items():
        _check_axis(path, lines, key, values)
    seen: set[str] = set()
    _check_exclude(path, lines, spec.exclude)
    for combination in itertools.product(*spec.axes.values()):
        settings = dict(zip(spec.axes, combination))
        config = _with(path, lines, base, settings)
        if any(_matches(_merged(DEFAULT_CONFIG, config), rule) for rule in spec.exclude):
            continue
        trial = _validate_trial(path, lines, config, spec, profile, settings, base)
        if trial.trial_id not in seen:
            seen.add(trial.trial_id)
            trials.append(trial)
            axis_values.append(settings)
    _check_other_profiles(path, lines, written, profile)
    return Study(path, spec, profile, trials, axis_values, base)


RESOURCES = "resources."
#: a profile key that replaces the study's `exclude` rules (a smaller design on a CPU)
EXCLUDE = "exclude"
#: profile keys under `axes.` replace that axis's values (e.g. smaller sizes on a CPU)
AXES = "axes."
#: profile keys under `search.` change the search block: `search.points: 6`, or one
#: entry of its mappings, `search.params.train.lr: {low: ..., high: ...}`
SEARCH = "search."
#: the search block's mappings, whose entries a profile key can name one by one
SEARCH_MAPPINGS = ("params", "repeat")


def _profile_key_problem(spec: StudyFile, key: str) -> str | None:
    """Why a profile key names nothing it could change, or None."""
    if _is_resource(key):
        if key.removeprefix(RESOURCES) in Resources.model_fields:
            return None
        return f"no such config field; resources fields: {', '.join(Resources.model_fields)}"
    if key == EXCLUDE:
        return None  # checked with the study's own rules
    if key.startswith(SEARCH):
        if spec.search is None:
            return "the study has no search block to change"
        block, _, entry = key.removeprefix(SEARCH).partition(".")
        if block not in SearchSpec.model_fields:
            return f"no such search field; search fields: {', '.join(SearchSpec.model_fields)}"
        if entry and block not in SEARCH_MAPPINGS:
            return f"search.{block} is not a mapping; set it whole (search.{block}: ...)"
        return None  # the config paths of params and repeat are checked with the search
    return None if _fields_path_exists(key.removeprefix(AXES)) else "no such config field"


def _apply_profile(path: Path, lines, spec: StudyFile, profile: str) -> tuple[dict, StudyFile]:
    """The base config and the study spec (resources, axes, search) with ``profile`` applied."""
    base = copy.deepcopy(spec.base)
    resources = spec.resources.model_dump()
    axes = dict(spec.axes)
    exclude = spec.exclude
    for key, value in spec.profiles[profile].items():
        if _is_resource(key):
            resources[key.removeprefix(RESOURCES)] = value
        elif key == EXCLUDE:
            if not isinstance(value, list) or not all(isinstance(rule, dict) for rule in value):
                raise StudyError(path, f"profiles.{profile}.{key}", "exclude takes a list of rules "
                                 "(mappings of config paths to values)", lines.find(("profiles", profile, key)))
            exclude = value
        elif key.startswith(AXES):
            if not isinstance(value, list):
                raise StudyError(path, f"profiles.{profile}.{key}", "an axis takes a list of values",
                                 lines.find(("profiles", profile, key)))
            axes[key.removeprefix(AXES)] = value
        elif not key.startswith(SEARCH):
            _override(path, lines, base, key, value, ("profiles", profile, key))
    search = _profiled_search(path, lines, spec, profile)
    try:
        resources = Resources.model_validate(resources)
    except pydantic.ValidationError as error:
        first = error.errors()[0]
        where = ("profiles", profile, RESOURCES + ".".join(str(p) for p in first["loc"]))
        raise StudyError(path, ".".join(where), first["msg"], lines.find(where)) from None
    return base, spec.model_copy(update={"resources": resources, "axes": axes, "search": search, "exclude": exclude})


def _profiled_search(path: Path, lines, spec: StudyFile, profile: str) -> SearchSpec | None:
    """The search block with the profile's `search.` keys applied. A whole mapping given
    for params or repeat replaces the entries it names and keeps the others, as a
    mapping given for a config block does (_override)."""
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
        raise StudyError(path, f"profiles.{profile}.{SEARCH}{'.'.join(loc)}", _reason(first, SearchSpec),
                         lines.find(where)) from None


def _check_search(path: Path, lines, spec: StudyFile, profile: str | None, base: dict) -> None:
    """Refuse a search that cannot run: axes beside it, unknown or unsearchable fields,
    ranges of the wrong kind, values no trial accepts (each choice and both ends of each
    range are tried on base), and a metric the trials do not log."""
    search = spec.search
    for block in ("axes", "exclude"):
        if getattr(spec, block):
            raise StudyError(path, block, f"a study with a search block has no {block}: its trials are the "
                             "points the search proposes; put fields run at every point (seeds) under "
                             "search.repeat", lines.find((block,)))
    base_config = _validate_trial(path, lines, base, spec, profile, {}, base)
    for key, param in search.params.items():
        where = _search_where(spec, profile, "params", key)
        _check_config_path(path, lines, key, where)
        if key.startswith("seeds."):
            raise StudyError(path, ".".join(where), "seeds are not searched: run them at every point "
                             "with search.repeat", lines.find(where))
        kind = config_field_type(key)
        if param.choices is None and kind not in (int, float):
            raise StudyError(path, ".".join(where), f"{key} is not a number: give choices instead of a range",
                             lines.find(where))
        bounds = (param.low, param.high, param.step)
        if param.choices is None and kind is int and not all(isinstance(b, int) for b in bounds if b is not None):
            raise StudyError(path, ".".join(where), f"{key} takes whole numbers: low, high and step must be "
                             "integers", lines.find(where))
        for value in param.extremes():
            _check_value(path, lines, base, key, value, where)
    for key, values in search.repeat.items():
        where = _search_where(spec, profile, "repeat", key)
        if key in search.params:
            raise StudyError(path, ".".join(where), "it is searched (search.params): a field is either "
                             "searched or repeated", lines.find(where))
        _check_axis(path, lines, key, values, where)
        for value in values:
            _check_value(path, lines, base, key, value, where)
    names = metric_names(base_config)
    if search.metric not in names:
        where = _search_where(spec, profile, "metric")
        raise StudyError(path, ".".join(where), f"{search.metric!r} is not a metric of these trials; "
                         f"metrics: {', '.join(names)}", lines.find(where))


def metric_names(config: TrialConfig) -> list[str]:
    """The metrics a trial of ``config`` logs at its final evaluation that have a value
    (as orchestrator.trainable.report_metrics names them): the accuracy at each test
    length, and the summary metrics (the out-of-distribution mean needs a length
    outside the training range, and the in-distribution one a length inside it)."""
    results = [LengthResult(d, 1, 1, 1.0, config.in_distribution(d)) for d in config.eval.digits]
    return [f"acc/digits_{d:03d}" for d in config.eval.digits] + [
        f"summary/{key}" for key, value in summarize(results).items() if not math.isnan(value)
    ]


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


def _check_value(path: Path, lines, base: dict, key: str, value: Any, where: tuple) -> None:
    try:
        TRIAL_CONFIG.validate_python(_with(path, lines, base, {key: value}))
    except pydantic.ValidationError as error:
        reason = _reason(error.errors()[0], TrialConfig)
        raise StudyError(path, ".".join(where), f"value {value!r}: {reason}", lines.find(where)) from None


def _is_resource(key: str) -> bool:
    """Profile keys under `resources.` set the study's resources, not the trial config."""
    return key.startswith(RESOURCES)


def _with(path: Path, lines, base: dict, settings: dict[str, Any]) -> dict:
    """``base`` with the axis ``settings`` applied."""
    config = copy.deepcopy(base)
    for key, value in settings.items():
        _override(path, lines, config, key, value, ("axes", key))
    return config


def _check_other_profiles(path: Path, lines, spec: StudyFile, chosen: str | None) -> None:
    """A profile not chosen this time must still work: check it with the first
    combination of axis values that `exclude` keeps (or check its whole search block),
    so that a typo in it fails now rather than when it is first used."""
    for name in spec.profiles:
        if name == chosen:
            continue
        base, profiled = _apply_profile(path, lines, spec, name)
        if profiled.search is not None:
            _check_search(path, lines, profiled, name, base)
            continue
        for combination in itertools.product(*spec.axes.values()):
            first = dict(zip(spec.axes, combination))
            config = _with(path, lines, base, first)
            if not any(_matches(_merged(DEFAULT_CONFIG, config), rule) for rule in spec.exclude):
                _validate_trial(path, lines, config, spec, name, first, base)
                break


def load_trial_config(path: Path) -> TrialConfig:
    """A single trial config file (the `base` block of a study, on its own)."""
    path = Path(path)
    text = _read(path)
    try:
        raw = yaml.safe_load(text) or {}
    except yaml.YAMLError as error:
        raise StudyError(path, None, f"not valid YAML: {error}") from None
    try:
        return TRIAL_CONFIG.validate_python(raw)
    except pydantic.ValidationError as error:
        first = error.errors()[0]
        return _raise_trial_error(path, _LineFinder(text), first, prefix=())


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as error:
        raise StudyError(path, None, f"cannot read the file ({error.strerror})") from None
    except UnicodeDecodeError as error:
        raise StudyError(path, None, f"not a UTF-8 text file (byte {error.start})") from None


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that refuses a key given twice in one mapping (PyYAML keeps the last
    one silently, so a repeated axis would quietly replace the first)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if isinstance(key, typing.Hashable) and key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None,
                    f"duplicate key {key!r} (first at line {seen[key] + 1})", key_node.start_mark,
                )
            if isinstance(key, typing.Hashable):
                seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep=deep)


def _validate_trial(path, lines, config, spec, profile, settings, base) -> TrialConfig:
    try:
        return TRIAL_CONFIG.validate_python(config)
    except pydantic.ValidationError as error:
        first = error.errors()[0]
        dotted = ".".join(str(p) for p in first["loc"])
        # name the block the bad value came from: an axis, the profile, or base
        for key in settings:
            if dotted == key or dotted.startswith(key + "."):
                _raise_trial_error(path, lines, first, prefix=("axes", key), relative=False)
        if profile and any(dotted == k or dotted.startswith(k + ".") for k in spec.profiles[profile]):
            key = next(k for k in spec.profiles[profile] if dotted == k or dotted.startswith(k + "."))
            _raise_trial_error(path, lines, first, prefix=("profiles", profile, key), relative=False)
        # a check across fields (loc is the component): the axis value without which it passes
        for key in settings:
            others = {k: v for k, v in settings.items() if k != key}
            if _valid(_with(path, lines, base, others)):
                raise StudyError(path, f"axes.{key}", f"value {settings[key]!r}: {_reason(first, TrialConfig)}",
                                 lines.find(("axes", key))) from None
        _raise_trial_error(path, lines, first, prefix=("base",))


def _valid(config: dict) -> bool:
    try:
        TRIAL_CONFIG.validate_python(config)
    except pydantic.ValidationError:
        return False
    return True


def _raise_trial_error(path, lines, error: dict, prefix: tuple, relative: bool = True):
    loc = tuple(str(p) for p in error["loc"])
    field = ".".join(prefix + loc) if relative else ".".join(prefix[:-1]) + f".{prefix[-1]}"
    if not relative and ".".join(loc) != prefix[-1]:
        field += f" (at {'.'.join(loc)})"
    yaml_loc = prefix + loc if relative else prefix
    raise StudyError(path, field, _reason(error, TrialConfig, loc), lines.find(yaml_loc))


def _reason(error: dict, root: type, loc: tuple | None = None) -> str:
    """pydantic's message, made to list the valid field names for an unknown key."""
    message = error["msg"].removeprefix("Value error, ")
    if error["type"] in ("extra_forbidden", "unexpected_keyword_argument"):
        parent = _fields_at(root, tuple(loc if loc is not None else error["loc"])[:-1])
        if parent:
            return f"unknown field; valid fields here: {', '.join(parent)}"
        return "unknown field"
    if error["type"] == "missing":
        return "required field is missing"
    return message


def _fields_at(root: type, loc: tuple) -> list[str]:
    """Field names of the (data)class reached by following `loc` from `root`."""
    current: Any = root
    for part in loc:
        if dataclasses.is_dataclass(current):
            types = {f.name: f.type for f in dataclasses.fields(current)}
            current = _dataclass_of(current, types.get(str(part)))
        elif isinstance(current, type) and issubclass(current, BaseModel):
            info = current.model_fields.get(str(part))
            current = _model_in(info.annotation) if info else None
        elif typing.get_origin(current) is dict:  # `part` is a key: go on into the value type
            current = _model_in(typing.get_args(current)[1])
        else:
            return []
        if current is None:
            return []
    if dataclasses.is_dataclass(current):
        return [f.name for f in dataclasses.fields(current)]
    if isinstance(current, type) and issubclass(current, BaseModel):
        return list(current.model_fields)
    return []


def _model_in(annotation: Any) -> Any:
    """The model class of an optional field (``SearchSpec | None`` -> SearchSpec)."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        models = [a for a in typing.get_args(annotation) if isinstance(a, type) and issubclass(a, BaseModel)]
        return models[0] if models else annotation
    return annotation


def _dataclass_of(owner: type, annotation: Any) -> Any:
    if isinstance(annotation, str):  # postponed annotations: resolve in the owner's module
        import sys

        annotation = getattr(sys.modules[owner.__module__], annotation, None)
    return annotation


def _check_axis(path: Path, lines, key: str, values: list, where: tuple | None = None) -> None:
    """An axis (or a search's repeated field, written at ``where``): values to cross."""
    where = where or ("axes", key)
    field, line = ".".join(where), lines.find(where)
    if not values:
        raise StudyError(path, field, "an axis needs at least one value", line)
    encoded = [json.dumps(v, sort_keys=True) for v in values]
    duplicates = sorted({v for v in encoded if encoded.count(v) > 1})
    if duplicates:
        raise StudyError(path, field, f"duplicate values: {', '.join(duplicates)}", line)
    if key == "seeds.eval":
        raise StudyError(path, field, "the eval seed cannot be an axis: every trial of a "
                         "study is scored on the same questions; set seeds.eval in base or a profile", line)
    _check_config_path(path, lines, key, where)


def _check_config_path(path: Path, lines, key: str, where: tuple) -> None:
    if not _fields_path_exists(key):
        parts = key.split(".")[:-1]
        while parts and not _fields_at(TrialConfig, tuple(parts)):  # the nearest existing parent
            parts.pop()
        parent = ".".join(parts)
        valid = _fields_at(TrialConfig, tuple(parts))
        raise StudyError(path, ".".join(where), f"no such config field; valid fields{' of ' + parent if parent else ''}: "
                         + ", ".join(valid), lines.find(where))


def _check_exclude(path: Path, lines, rules: list[dict[str, Any]]) -> None:
    for i, rule in enumerate(rules):
        if not rule:
            raise StudyError(path, f"exclude.{i}", "an empty rule would exclude every trial",
                             lines.find(("exclude", i)))
        for key in rule:
            if not _fields_path_exists(key):
                raise StudyError(path, f"exclude.{i}.{key}", "no such config field", lines.find(("exclude", i, key)))


def _matches(config: dict, rule: dict[str, Any]) -> bool:
    """Whether the config (nested mappings, defaults filled in) has every value of the rule."""
    missing = object()
    for key, value in rule.items():
        node: Any = config
        for part in key.split("."):
            node = node.get(part, missing) if isinstance(node, dict) else missing
        if node is missing or node != value:
            return False
    return True


def _fields_path_exists(key: str) -> bool:
    *parents, leaf = key.split(".")
    return leaf in _fields_at(TrialConfig, tuple(parents))


def _override(path: Path, lines, config: dict, key: str, value: Any, where: tuple) -> None:
    if not _fields_path_exists(key):
        raise StudyError(path, ".".join(where), "no such config field", lines.find(where))
    node = config
    *parents, leaf = key.split(".")
    for part in parents:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise StudyError(path, ".".join(where), f"{part} is not a mapping in base", lines.find(where))
        node = child
    if isinstance(value, dict) and isinstance(node.get(leaf), dict):
        # a block given as a mapping (an axis of `model: [{pe: nope, ...}, ...]`) changes
        # only the fields it names; the rest of base's block stays
        node[leaf] = _merged(node[leaf], value)
    else:
        node[leaf] = value


def _merged(base: dict, changes: dict) -> dict:
    merged = copy.deepcopy(base)
    for key, value in changes.items():
        both_mappings = isinstance(value, dict) and isinstance(merged.get(key), dict)
        merged[key] = _merged(merged[key], value) if both_mappings else copy.deepcopy(value)
    return merged


class _LineFinder:
    """1-based YAML line of a key path, read from the composed node tree."""

    def __init__(self, text: str):
        try:
            self.root = yaml.compose(text)
        except yaml.YAMLError:
            self.root = None

    def find(self, loc: tuple) -> int | None:
        node, line = self.root, None
        for part in loc:
            if not isinstance(node, yaml.MappingNode):
                break
            for key_node, value_node in node.value:
                if key_node.value == str(part):
                    node, line = value_node, key_node.start_mark.line + 1
                    break
            else:
                break
        return line
