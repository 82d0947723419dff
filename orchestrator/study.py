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
import re
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pydantic
import yaml
from pydantic import BaseModel, ConfigDict, Field

from lengthgen.config import TrialConfig

TRIAL_CONFIG = pydantic.TypeAdapter(TrialConfig)


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
    #: Optuna search blocks are not supported by this version: only null
    search: None = None
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

    @property
    def name(self) -> str:
        return self.spec.name


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
            if key.startswith(AXES):
                known = _fields_path_exists(key.removeprefix(AXES))
            else:
                known = key.removeprefix(RESOURCES) in Resources.model_fields if _is_resource(key) else _fields_path_exists(key)
            if not known:
                where = ("profiles", name, key)
                valid = f"; resources fields: {', '.join(Resources.model_fields)}" if _is_resource(key) else ""
                raise StudyError(path, ".".join(where), "no such config field" + valid, lines.find(where))
    base = copy.deepcopy(spec.base)
    if profile is not None:
        if profile not in spec.profiles:
            choices = ", ".join(spec.profiles) or "none defined"
            raise StudyError(path, "--profile", f"unknown profile {profile!r}; profiles: {choices}")
        resources = spec.resources.model_dump()
        axes = dict(spec.axes)
        for key, value in spec.profiles[profile].items():
            if _is_resource(key):
                resources[key.removeprefix(RESOURCES)] = value
            elif key.startswith(AXES):
                if not isinstance(value, list):
                    raise StudyError(path, f"profiles.{profile}.{key}", "an axis takes a list of values",
                                     lines.find(("profiles", profile, key)))
                axes[key.removeprefix(AXES)] = value
            else:
                _override(path, lines, base, key, value, ("profiles", profile, key))
        try:
            spec = spec.model_copy(update={"resources": Resources.model_validate(resources), "axes": axes})
        except pydantic.ValidationError as error:
            first = error.errors()[0]
            where = ("profiles", profile, RESOURCES + ".".join(str(p) for p in first["loc"]))
            raise StudyError(path, ".".join(where), first["msg"], lines.find(where)) from None

    for key, values in spec.axes.items():
        _check_axis(path, lines, key, values)
    trials, axis_values = [], []
    seen: set[str] = set()
    for combination in itertools.product(*spec.axes.values()):
        settings = dict(zip(spec.axes, combination))
        trial = _validate_trial(path, lines, _with(path, lines, base, settings), spec, profile, settings, base)
        if trial.trial_id not in seen:
            seen.add(trial.trial_id)
            trials.append(trial)
            axis_values.append(settings)
    _check_other_profiles(path, lines, spec, profile)
    return Study(path, spec, profile, trials, axis_values)


RESOURCES = "resources."
#: profile keys under `axes.` replace that axis's values (e.g. smaller sizes on a CPU)
AXES = "axes."


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
    """A profile not chosen this time must still work: check it with the first value of
    every axis, so that a typo in it fails now rather than when it is first used."""
    first = {key: values[0] for key, values in spec.axes.items()}
    for name, overrides in spec.profiles.items():
        if name == chosen:
            continue
        base = copy.deepcopy(spec.base)
        for key, value in overrides.items():
            if not _is_resource(key) and not key.startswith(AXES):
                _override(path, lines, base, key, value, ("profiles", name, key))
        _validate_trial(path, lines, _with(path, lines, base, first), spec, name, first, base)


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
            current = info.annotation if info else None
        else:
            return []
        if current is None:
            return []
    if dataclasses.is_dataclass(current):
        return [f.name for f in dataclasses.fields(current)]
    if isinstance(current, type) and issubclass(current, BaseModel):
        return list(current.model_fields)
    return []


def _dataclass_of(owner: type, annotation: Any) -> Any:
    if isinstance(annotation, str):  # postponed annotations: resolve in the owner's module
        import sys

        annotation = getattr(sys.modules[owner.__module__], annotation, None)
    return annotation


def _check_axis(path: Path, lines, key: str, values: list) -> None:
    if not values:
        raise StudyError(path, f"axes.{key}", "an axis needs at least one value", lines.find(("axes", key)))
    encoded = [json.dumps(v, sort_keys=True) for v in values]
    duplicates = sorted({v for v in encoded if encoded.count(v) > 1})
    if duplicates:
        raise StudyError(path, f"axes.{key}", f"duplicate values: {', '.join(duplicates)}",
                         lines.find(("axes", key)))
    if key == "seeds.eval":
        raise StudyError(path, "axes.seeds.eval", "the eval seed cannot be an axis: every trial of a "
                         "study is scored on the same questions; set seeds.eval in base or a profile",
                         lines.find(("axes", key)))
    if not _fields_path_exists(key):
        parts = key.split(".")[:-1]
        while parts and not _fields_at(TrialConfig, tuple(parts)):  # the nearest existing parent
            parts.pop()
        parent = ".".join(parts)
        valid = _fields_at(TrialConfig, tuple(parts))
        raise StudyError(path, f"axes.{key}", f"no such config field; valid fields{' of ' + parent if parent else ''}: "
                         + ", ".join(valid), lines.find(("axes", key)))


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
    node[leaf] = value


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
