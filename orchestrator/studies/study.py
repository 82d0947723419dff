"""Study files: load, validate and expand into resolved trial configs.

Everything a study file can get wrong is found here (the search block's checks in
orchestrator.studies.search_spec), before anything runs, and reported as a `StudyError`
(orchestrator.studies.config_paths) naming the file, the field (with its YAML line where
there is one) and what is allowed.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import itertools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import pydantic
import yaml
from pydantic import BaseModel, ConfigDict, Field

from lengthgen.config import TrialConfig
from lengthgen.seed_batch import check_seed_batch
from orchestrator.studies.config_paths import (
    AXES,
    TRIAL_CONFIG,
    StudyError,
    StudySource,
    check_axis,
    excluded,
    fields_path_exists,
    override,
    raise_trial_error,
    reason,
    validate_trial,
    with_settings,
)
from orchestrator.studies.search_spec import (
    SEARCH,
    SearchSpec,
    check_search,
    profiled_search,
    search_key_problem,
)
from orchestrator.studies.seed_spec import (
    SeedsSpec,
    is_until_key,
    profiled_seeds,
    until_key_problem,
)
from orchestrator.studies.study_yaml import load_study_yaml
from results_contract import groups
from results_contract.experiments import experiment_name
from results_contract.layout import profile_root


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
    #: trials of one configuration group (differing only in seeds) trained together as
    #: one seed batch in one Ray Tune trial (lengthgen.seed_batch), K at most, each
    #: still its own trial; `auto`: as many of the group's pending seeds as the memory
    #: where trials run holds (orchestrator.running.auto_seeds), up to
    #: orchestrator.running.seed_batches.AUTO_SEEDS. 1: one trial per Tune trial
    seeds_per_trial: Annotated[int, Field(ge=1)] | Literal["auto"] = 1


class StudyFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    #: names the results folder and the MLflow experiment
    name: str = Field(max_length=100)
    #: the paper figure or table the study reproduces
    source: str = ""
    #: what the study runs and what it found, in words
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
    #: what a trial asks of the machine or the Ray cluster, and how trials are batched
    resources: Resources = Resources()
    #: seeds added as the study runs: `until` a precision target holds (SeedsSpec)
    seeds: SeedsSpec = SeedsSpec()
    #: profile name -> overrides applied with --profile NAME (its trials kept apart): a
    #: dotted config path -> value (applied to base), `axes.PATH` -> values (replaces an
    #: axis), `resources.FIELD`, `exclude`, `search.FIELD` (or `search.params.PATH`) and
    #: `seeds.until` (or `seeds.until.FIELD`); a profile may build on another with a YAML
    #: anchor and merge key (`<<: *other`)
    profiles: dict[str, dict[str, Any]] = {}
    #: profile name (or `default`, the study without one) -> the wall time its author
    #: measured, with the machine and load, e.g. "15 trials in 44 min 15 s on a 2-core
    #: AMD EPYC (load 6-11)": quoted when the study cannot run on a cluster
    measured: dict[str, str] = {}

    @pydantic.model_validator(mode="after")
    def _measured_names_profiles(self) -> StudyFile:
        unknown = sorted(set(self.measured) - {"default", *self.profiles})
        if unknown:
            raise ValueError(f"measured: {', '.join(unknown)} is no profile of this study; "
                             f"valid: default, {', '.join(self.profiles) or '(no profiles)'}")
        return self

    @pydantic.field_validator("name")
    @classmethod
    def _one_folder_name(cls, name: str) -> str:
        return _folder_name(name, "the study's results folder")

    @pydantic.field_validator("profiles")
    @classmethod
    def _profile_folder_names(cls, profiles: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        for name in profiles:  # each names its results root (results_contract.layout.profile_root)
            _folder_name(name, "a profile's results folder")
        return profiles


def _folder_name(name: str, what: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", name):
        raise ValueError(
            f"{name!r} cannot name {what}: use letters, digits, '_', '-' "
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
    #: a trial already finished under the same results root, in another study or
    #: profile, is reused rather than trained (orchestrator.store.reuse); `run --no-reuse`
    #: and `run --restart` set it False
    reuse: bool = True
    #: trials finished under another science version train again (their old rows set
    #: aside: orchestrator.store.science_versions); False: the run refuses them. `run --retrain-stale`
    retrain_stale: bool = False

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def experiment(self) -> str:
        """Its MLflow experiment: the study's name, ``<study>/<profile>`` under a profile."""
        return experiment_name(self.name, self.profile)

    def results_root(self, results: Path) -> Path:
        """Where its trials live under the results folder ``results``: the folder itself,
        or the profile's own root (``<results>/_profiles/<profile>``)."""
        return profile_root(results, self.profile)

    @property
    def trial_count(self) -> int:
        """Trials the study runs: its grid, or a search's points times its repeats."""
        search = self.spec.search
        return search.points * len(search.repeat_settings()) if search else len(self.trials)

    def group_label(self, config: TrialConfig) -> str:
        """What sets the config's configuration group apart within the study: the
        settings in which it departs from the study's base (results_contract.groups.group_labels
        over the study's trials; a search names its
        searched and repeated fields in every label, since its trials come a batch at a
        time). A config outside the study's trials is labelled among them."""
        labels = self._group_labels
        gid = groups.group_id(config)
        if gid not in labels:
            labels = groups.group_labels([*self.trials, config], self._labelled_fields, self._base_config)
        return labels[gid]

    def short_label(self, config: TrialConfig) -> str:
        """The config's group's short label among the study's groups (results_contract.groups.
        short_labels of their labels): what the run table and MLflow run names show."""
        label = self.group_label(config)
        if label in self._short_labels:
            return self._short_labels[label]
        return groups.short_labels([*self._group_labels.values(), label])[label]

    @functools.cached_property
    def _short_labels(self) -> dict[str, str]:
        return groups.short_labels(self._group_labels.values())

    @functools.cached_property
    def _group_labels(self) -> dict[str, str]:
        return groups.group_labels(self.trials, self._labelled_fields, self._base_config)

    @functools.cached_property
    def _base_config(self) -> TrialConfig | None:
        """The base with the profile applied, as a config: what each group's label departs
        from. None when the base is no valid config by itself (its axes complete it)."""
        try:
            return self.config_with({})
        except (ValueError, StudyError):
            return None

    @property
    def _labelled_fields(self) -> tuple[str, ...]:
        search = self.spec.search
        return (*search.params, *search.repeat) if search else ()

    def config_with(self, settings: dict[str, Any]) -> TrialConfig:
        """The base config with dotted ``settings`` applied (a search point and its seeds);
        raises pydantic.ValidationError for a combination that cannot work."""
        return TRIAL_CONFIG.validate_python(with_settings(StudySource.lineless(self.file), self.base, settings))


def load_study(path: Path, profile: str | None = None) -> Study:
    path = Path(path)
    text = _read(path)
    source = StudySource.read(path, text)
    raw = load_study_yaml(source.path, text)
    if not isinstance(raw, dict):
        raise source.error(None, "a study file is a mapping with keys: " + ", ".join(StudyFile.model_fields))
    try:
        spec = StudyFile.model_validate(raw)
    except pydantic.ValidationError as error:
        first = error.errors()[0]
        field = ".".join(str(p) for p in first["loc"])
        raise source.error(field, reason(first, StudyFile), first["loc"]) from None

    for name, overrides in spec.profiles.items():  # every profile, chosen or not
        for key in overrides:
            problem = _profile_key_problem(spec, key)
            if problem:
                where = ("profiles", name, key)
                raise source.error(".".join(where), problem, where)
    written = spec
    base = copy.deepcopy(spec.base)
    if profile is not None:
        if profile not in spec.profiles:
            choices = ", ".join(spec.profiles) or "none defined"
            raise source.error("--profile", f"unknown profile {profile!r}; profiles: {choices}")
        base, spec = _apply_profile(source, spec, profile)

    trials, axis_values = [], []
    if spec.search is not None and spec.seeds.until is not None:
        raise source.error("seeds.until", "applies to grid studies only; a search runs each "
                           "point over the seeds of search.repeat", ("seeds", "until"))
    if spec.search is not None and spec.resources.seeds_per_trial != 1:
        raise source.error("resources.seeds_per_trial", "seed batches train the trials of a grid study; a "
                           "search's points are suggested one at a time: set it to 1", ("resources", "seeds_per_trial"))
    if spec.search is not None:
        check_search(source, spec, profile, base)  # its trials are made as it runs
        _check_other_profiles(source, written, profile)
        return Study(path, spec, profile, trials, axis_values, base)
    for key, values in spec.axes.items():
        check_axis(source, key, values)
    seen: set[str] = set()
    _check_exclude(source, spec.exclude)
    for combination in itertools.product(*spec.axes.values()):
        settings = dict(zip(spec.axes, combination))
        config = with_settings(source, base, settings)
        if excluded(config, spec.exclude):
            continue
        trial = validate_trial(source, config, spec, profile, settings, base)
        if trial.trial_id not in seen:
            seen.add(trial.trial_id)
            trials.append(trial)
            axis_values.append(settings)
    _check_seed_target(source, spec, trials)
    _check_seed_batches(source, spec, trials)
    _check_other_profiles(source, written, profile)
    return Study(path, spec, profile, trials, axis_values, base)


def _check_seed_batches(source: StudySource, spec: StudyFile, trials: list[TrialConfig]) -> None:
    """resources.seeds_per_trial other than 1: every trial must be one a seed batch trains."""
    if spec.resources.seeds_per_trial == 1:
        return
    for trial in trials:
        try:
            check_seed_batch([trial])
        except ValueError as error:
            raise source.error("resources.seeds_per_trial", f"trial {trial.trial_id}: {error}",
                               ("resources", "seeds_per_trial")) from None


def _check_seed_target(source: StudySource, spec: StudyFile, trials: list[TrialConfig]) -> None:
    """`seeds.until` reads its interval at a length every trial tests."""
    until = spec.seeds.until
    if until is None:
        return
    for trial in trials:
        if until.digits not in trial.eval.digits:
            tested = ", ".join(map(str, trial.eval.digits))
            raise source.error("seeds.until.digits", f"{until.digits} is not a tested length "
                               f"(eval.digits: {tested})", ("seeds", "until", "digits"))


RESOURCES = "resources."
#: a profile key that replaces the study's `exclude` rules (a smaller design on a CPU)
EXCLUDE = "exclude"


def _profile_key_problem(spec: StudyFile, key: str) -> str | None:
    """Why a profile key names nothing it could change, or None."""
    if _is_resource(key):
        if key.removeprefix(RESOURCES) in Resources.model_fields:
            return None
        return f"no such config field; resources fields: {', '.join(Resources.model_fields)}"
    if key == EXCLUDE:
        return None  # checked with the study's own rules
    if is_until_key(key):
        return until_key_problem(key)
    if key.startswith(SEARCH):
        return search_key_problem(spec.search, key)
    return None if fields_path_exists(key.removeprefix(AXES)) else "no such config field"


def _apply_profile(source: StudySource, spec: StudyFile, profile: str) -> tuple[dict, StudyFile]:
    """The base config and the study spec (resources, axes, search) with ``profile`` applied."""
    base = copy.deepcopy(spec.base)
    resources = spec.resources.model_dump()
    axes = dict(spec.axes)
    exclude = spec.exclude
    until = {k: v for k, v in spec.profiles[profile].items() if is_until_key(k)}
    for key, value in spec.profiles[profile].items():
        if is_until_key(key):
            continue  # below, all together
        if _is_resource(key):
            resources[key.removeprefix(RESOURCES)] = value
        elif key == EXCLUDE:
            if not isinstance(value, list) or not all(isinstance(rule, dict) for rule in value):
                raise source.error(f"profiles.{profile}.{key}", "exclude takes a list of rules "
                                   "(mappings of config paths to values)", ("profiles", profile, key))
            exclude = value
        elif key.startswith(AXES):
            if not isinstance(value, list):
                raise source.error(f"profiles.{profile}.{key}", "an axis takes a list of values", ("profiles", profile, key))
            axes[key.removeprefix(AXES)] = value
        elif not key.startswith(SEARCH):
            override(source, base, key, value, ("profiles", profile, key))
    search = profiled_search(source, spec, profile)
    try:
        resources = Resources.model_validate(resources)
    except pydantic.ValidationError as error:
        first = error.errors()[0]
        where = ("profiles", profile, RESOURCES + ".".join(str(p) for p in first["loc"]))
        raise source.error(".".join(where), reason(first, Resources), where) from None
    seeds = spec.seeds
    if until:
        try:
            seeds = profiled_seeds(spec.seeds, until)
        except pydantic.ValidationError as error:
            first = error.errors()[0]
            where = ("profiles", profile, next(reversed(until)))
            raise source.error(".".join(where), reason(first, SeedsSpec), where) from None
    return base, spec.model_copy(update={"resources": resources, "axes": axes, "search": search,
                                         "exclude": exclude, "seeds": seeds})


def _is_resource(key: str) -> bool:
    """Profile keys under `resources.` set the study's resources, not the trial config."""
    return key.startswith(RESOURCES)


def _check_other_profiles(source: StudySource, spec: StudyFile, chosen: str | None) -> None:
    """A profile not chosen this time must still work: check it with the first
    combination of axis values that `exclude` keeps (or check its whole search block),
    so that a typo in it fails now rather than when it is first used."""
    for name in spec.profiles:
        if name == chosen:
            continue
        base, profiled = _apply_profile(source, spec, name)
        if profiled.search is not None:
            check_search(source, profiled, name, base)
            continue
        for combination in itertools.product(*profiled.axes.values()):
            first = dict(zip(profiled.axes, combination))
            config = with_settings(source, base, first)
            if not excluded(config, profiled.exclude):
                validate_trial(source, config, profiled, name, first, base)
                break


def _check_exclude(source: StudySource, rules: list[dict[str, Any]]) -> None:
    for i, rule in enumerate(rules):
        if not rule:
            raise source.error(f"exclude.{i}", "an empty rule ({}) would exclude every trial", ("exclude", i))
        for key in rule:
            if not fields_path_exists(key):
                raise source.error(f"exclude.{i}.{key}", "no such config field", ("exclude", i, key))


def load_trial(path: Path, trial: str | None = None, profile: str | None = None) -> TrialConfig:
    """The config `lg-study trial` trains: one trial of a study file, chosen by its trial
    id or by its index in the study's order (0-based, as `lg-study validate --trials`
    lists them; a study of one trial needs neither), or a bare trial config file."""
    path = Path(path)
    if not _is_study_file(path):
        if trial is not None or profile is not None:
            option = "--trial" if trial is not None else "--profile"
            raise StudyError(path, option, "applies to a study file; this file is one trial config")
        return load_trial_config(path)
    study = load_study(path, profile)
    if study.spec.search is not None:
        raise StudyError(path, "--trial", "a search makes its trials as it runs; give one trial "
                         "config (its `base` with the searched values) instead")
    ids = [t.trial_id for t in study.trials]
    if trial is None and len(ids) == 1:
        return study.trials[0]
    if trial in ids:
        return study.trials[ids.index(trial)]
    if trial is not None and trial.isdigit() and int(trial) < len(ids):
        return study.trials[int(trial)]
    given = "no trial given" if trial is None else f"no trial {trial!r}"
    raise StudyError(path, "--trial", f"{given}; the study has {len(ids)} trials: give a trial id or an "
                     f"index 0-{len(ids) - 1} (`lg-study validate {path} --trials` lists them)")


def _is_study_file(path: Path) -> bool:
    """A study file is a mapping with a `base` block (a trial config has no such field)."""
    try:
        raw = yaml.safe_load(_read(path))
    except yaml.YAMLError:
        return False  # load_trial_config says what is wrong
    return isinstance(raw, dict) and "base" in raw


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
        return raise_trial_error(StudySource.read(path, text), first, prefix=())


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as error:
        raise StudyError(path, None, f"cannot read the file ({error.strerror})") from None
    except UnicodeDecodeError as error:
        raise StudyError(path, None, f"not a UTF-8 text file (byte {error.start})") from None
