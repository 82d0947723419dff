"""Dotted config paths in study files, and the errors that name them.

A study names config fields by dotted path (`model.pe`, `train.lr`): here is what
such a path may name, how a value is set at it, and how a config that fails
validation is reported as a `StudyError` naming the file, the field (with its YAML
line where there is one) and what is allowed.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
import re
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pydantic
import yaml
from pydantic import BaseModel

from lengthgen.config import TrialConfig

TRIAL_CONFIG = pydantic.TypeAdapter(TrialConfig)


class StudyError(ValueError):
    """A study file that cannot run. str() is the message a user sees."""

    def __init__(self, file: Path, field: str | None, reason: str, line: int | None = None):
        # "value 'rotary': 'rotary' is not one of ...": a caller's prefix repeats what
        # `reason` now quotes itself
        quoted = re.match(r"value (.+?): (.*)", reason)
        if quoted and quoted[2].startswith(quoted[1] + " "):
            reason = quoted[2]
        self.file, self.field, self.reason, self.line = file, field, reason, line
        where = f"{file}:{line}" if line else str(file)
        super().__init__(f"{where}: {field}: {reason}" if field else f"{where}: {reason}")


#: PyYAML's safe loader on libyaml where PyYAML was built with it: about ten times the
#: pure-Python parser's speed (parsing was a third of load_study's time before it)
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class LineFinder:
    """1-based YAML line of a key path, read from the composed node tree. The tree is
    composed at the first question, so a file without errors is parsed once (by
    load_study_yaml) rather than twice."""

    def __init__(self, text: str):
        self.text = text

    @functools.cached_property
    def root(self) -> yaml.Node | None:
        try:
            return yaml.compose(self.text, Loader=SAFE_LOADER)
        except yaml.YAMLError:
            return None

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


@dataclass(frozen=True)
class StudySource:
    """A study file as its checks read it: the path its errors name and the YAML line
    of each key path (none for settings made in code, such as a search point's)."""

    path: Path
    lines: LineFinder

    @classmethod
    def read(cls, path: Path, text: str) -> StudySource:
        return cls(Path(path), LineFinder(text))

    @classmethod
    def lineless(cls, path: Path) -> StudySource:
        return cls(Path(path), LineFinder(""))

    def error(self, field: str | None, reason: str, where: tuple = ()) -> StudyError:
        """The error of ``field``, at the YAML line of key path ``where`` where written."""
        return StudyError(self.path, field, reason, self.lines.find(where))


#: profile keys under `axes.` replace that axis's values (e.g. smaller sizes on a CPU)
AXES = "axes."


def fields_path_exists(key: str) -> bool:
    *parents, leaf = key.split(".")
    return leaf in fields_at(TrialConfig, tuple(parents))


def fields_at(root: type, loc: tuple) -> list[str]:
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


def check_config_path(source: StudySource, key: str, where: tuple) -> None:
    if not fields_path_exists(key):
        parts = key.split(".")[:-1]
        while parts and not fields_at(TrialConfig, tuple(parts)):  # the nearest existing parent
            parts.pop()
        parent = ".".join(parts)
        valid = fields_at(TrialConfig, tuple(parts))
        raise source.error(".".join(where), f"no such config field; valid fields{' of ' + parent if parent else ''}: "
                           + ", ".join(valid), where)


def check_axis(source: StudySource, key: str, values: list, where: tuple | None = None) -> None:
    """An axis (or a search's repeated field, written at ``where``): values to cross."""
    where = where or ("axes", key)
    field = ".".join(where)
    if not values:
        raise source.error(field, "an axis needs at least one value, got []", where)
    encoded = [json.dumps(v, sort_keys=True) for v in values]
    duplicates = sorted({v for v in encoded if encoded.count(v) > 1})
    if duplicates:
        raise source.error(field, f"duplicate values: {', '.join(duplicates)}", where)
    if key == "seeds.eval":
        raise source.error(field, "the eval seed cannot be an axis: every trial of a study is scored "
                           "on the same questions; set seeds.eval in base or a profile", where)
    check_config_path(source, key, where)


def override(source: StudySource, config: dict, key: str, value: Any, where: tuple) -> None:
    if not fields_path_exists(key):
        raise source.error(".".join(where), "no such config field", where)
    node = config
    *parents, leaf = key.split(".")
    for part in parents:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise source.error(".".join(where), f"{part} is not a mapping in base", where)
        node = child
    if isinstance(value, dict) and isinstance(node.get(leaf), dict):
        # a block given as a mapping (an axis of `model: [{pe: nope, ...}, ...]`) changes
        # only the fields it names; the rest of base's block stays
        node[leaf] = merged(node[leaf], value)
    else:
        node[leaf] = value


def merged(base: dict, changes: dict) -> dict:
    """``base`` with ``changes`` applied, nested mappings merged key by key; neither is
    changed (copied once, not once per level: a study of hundreds of trials merges each)."""
    result = copy.deepcopy(base)
    _merge_into(result, changes)
    return result


def _merge_into(target: dict, changes: dict) -> None:
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(target.get(key), dict):
            _merge_into(target[key], value)
        else:
            target[key] = copy.deepcopy(value)


def with_settings(source: StudySource, base: dict, settings: dict[str, Any]) -> dict:
    """``base`` with the axis ``settings`` applied."""
    config = copy.deepcopy(base)
    for key, value in settings.items():
        override(source, config, key, value, ("axes", key))
    return config


def excluded(config: dict, rules: list[dict[str, Any]]) -> bool:
    """Whether an exclude rule matches the config (its defaults filled in, once for all
    the rules)."""
    if not rules:
        return False
    complete = merged(_default_config(), config)
    return any(matches(complete, rule) for rule in rules)


@functools.cache
def _default_config() -> dict:
    return TrialConfig().to_dict()


def matches(config: dict, rule: dict[str, Any]) -> bool:
    """Whether the config (nested mappings, defaults filled in) has every value of the rule."""
    missing = object()
    for key, value in rule.items():
        node: Any = config
        for part in key.split("."):
            node = node.get(part, missing) if isinstance(node, dict) else missing
        if node is missing or node != value:
            return False
    return True


def validate_trial(source: StudySource, config, spec, profile, settings, base) -> TrialConfig:
    try:
        return TRIAL_CONFIG.validate_python(config)
    except pydantic.ValidationError as error:
        first = error.errors()[0]
        dotted = ".".join(str(p) for p in first["loc"])
        # name the block the bad value came from: an axis, the profile, or base
        for key in settings:
            if dotted == key or dotted.startswith(key + "."):
                from_profile = bool(profile) and AXES + key in spec.profiles[profile]
                origin = ("profiles", profile, AXES + key) if from_profile else ("axes", key)
                raise_trial_error(source, first, prefix=origin, relative=False)
        if profile and any(dotted == k or dotted.startswith(k + ".") for k in spec.profiles[profile]):
            key = next(k for k in spec.profiles[profile] if dotted == k or dotted.startswith(k + "."))
            raise_trial_error(source, first, prefix=("profiles", profile, key), relative=False)
        # a check across fields (loc is the component): the axis value without which it passes
        for key in settings:
            others = {k: v for k, v in settings.items() if k != key}
            if _valid(with_settings(source, base, others)):
                why = reason(first, TrialConfig, quote=False)
                raise source.error(f"axes.{key}", f"value {settings[key]!r}: {why}", ("axes", key)) from None
        raise_trial_error(source, first, prefix=("base",))


def _valid(config: dict) -> bool:
    try:
        TRIAL_CONFIG.validate_python(config)
    except pydantic.ValidationError:
        return False
    return True


def raise_trial_error(source: StudySource, error: dict, prefix: tuple, relative: bool = True):
    loc = tuple(str(p) for p in error["loc"])
    if relative:
        loc += _field_named(error, loc)
    field = ".".join(prefix + loc) if relative else ".".join(prefix[:-1]) + f".{prefix[-1]}"
    if not relative and ".".join(loc) != prefix[-1]:
        field += f" (at {'.'.join(loc)})"
    yaml_loc = prefix + loc if relative else prefix
    raise source.error(field, reason(error, TrialConfig, loc), yaml_loc)


def _field_named(error: dict, loc: tuple) -> tuple:
    """The field a check of a whole block is about, when its message starts with that
    field's dotted name and the block has it written (`train.batch_size must be >= 1`
    raised for `train`): the error then points at that field and its line."""
    value, message = error.get("input"), error["msg"].removeprefix("Value error, ")
    if error["type"] != "value_error" or not isinstance(value, dict) or not loc:
        return ()
    first = re.match(r"([a-z_]+)\.([a-z_]+)\b", message)
    return (first[2],) if first and first[1] == loc[-1] and first[2] in value else ()


#: what a value must be, by pydantic's error type, for "'ten' is not a whole number"
KINDS = {
    "int_type": "a whole number", "int_parsing": "a whole number", "int_from_float": "a whole number",
    "float_type": "a number", "float_parsing": "a number", "finite_number": "a finite number",
    "bool_type": "true or false", "bool_parsing": "true or false",
    "string_type": "text", "list_type": "a list", "tuple_type": "a list", "set_type": "a list",
    "dict_type": "a mapping", "model_type": "a mapping", "model_attributes_type": "a mapping",
    "dataclass_type": "a mapping",
}
#: bounds, by pydantic's error type: (its ctx key, the comparison the value failed)
BOUNDS = {"greater_than": ("gt", ">"), "greater_than_equal": ("ge", ">="),
          "less_than": ("lt", "<"), "less_than_equal": ("le", "<=")}
LONGEST_SHOWN = 120  # characters of a written value quoted in a message


def written(value: Any) -> str:
    """A value as the user wrote it, quoted in a message (shortened when long)."""
    text = repr(value)
    return text if len(text) <= LONGEST_SHOWN else text[: LONGEST_SHOWN - 3] + "..."


def choices(expected: str) -> list[str]:
    """The allowed values of pydantic's ``expected`` ("'a', 'b' or 'c'", or "1, 2 or 3")."""
    quoted = re.findall(r"'((?:[^'\\]|\\.)*)'", expected)
    return quoted or [part for part in re.split(r", | or ", expected) if part]


def reason(error: dict, root: type, loc: tuple | None = None, quote: bool = True) -> str:
    """pydantic's message in the study's words: an unknown key lists the valid field
    names; a refused value is quoted as written, with what is allowed
    (`'subtraction' is not one of addition, successor, ...`). ``quote=False``: the
    caller quotes the value itself, so a check's message gets no `written:` part."""
    kind, message = error["type"], error["msg"].removeprefix("Value error, ")
    value, ctx = error.get("input"), error.get("ctx") or {}
    if kind in ("extra_forbidden", "unexpected_keyword_argument"):
        parent = fields_at(root, tuple(loc if loc is not None else error["loc"])[:-1])
        if parent:
            return f"unknown field; valid fields here: {', '.join(parent)}"
        return "unknown field"
    if kind == "missing":
        return "required field is missing"
    if kind in ("literal_error", "enum"):
        return f"{written(value)} is not one of {', '.join(choices(str(ctx.get('expected', ''))))}"
    if kind in BOUNDS and BOUNDS[kind][0] in ctx:
        key, comparison = BOUNDS[kind]
        return f"{written(value)} is not {comparison} {ctx[key]}"
    if kind in KINDS:
        return f"{written(value)} is not {KINDS[kind]}"
    if kind in ("string_too_long", "too_long") and "max_length" in ctx:
        return f"{written(value)} has {len(value)} {_units(value)}, more than {ctx['max_length']}"
    if kind in ("string_too_short", "too_short") and "min_length" in ctx:
        return f"{written(value)} has {len(value)} {_units(value)}, fewer than {ctx['min_length']}"
    if kind == "value_error":
        return message + (_written_fields(message, value, tuple(error["loc"])) if quote else "")
    return f"{written(value)}: {message}"


def _units(value: Any) -> str:
    return "characters" if isinstance(value, str) else "items"


def _written_fields(message: str, value: Any, loc: tuple) -> str:
    """What was written, where a check's message does not quote it: the fields its
    message names (`train.warmup = -1`), else the value it was raised for."""
    if not isinstance(value, dict):
        return "" if written(value) in message or "got " in message else f"; written: {written(value)}"
    named = {}
    for dotted in re.findall(r"\b[a-z_]+(?:\.[a-z_]+)+\b", message):
        parts = dotted.split(".")
        if loc and parts[0] == loc[-1]:  # named from the block the value is
            parts = parts[1:]
        found = _lookup(value, parts)
        if found is not _MISSING:
            named[dotted] = found
    if named:
        shown = [f"{name} = {written(v)}" for name, v in named.items() if not _names_value(name, v, message)]
        return f"; written: {', '.join(shown)}" if shown else ""
    return "" if _quoted(value, message) else f"; written: {written(value)}"


def _names_value(name: str, value: Any, message: str) -> bool:
    """Whether a message gives the field's value: after its name (`model.max_positions
    = 64`, `task.name addition`) or after "got"."""
    after_got = message.partition("got ")[2]
    return f"{name} = {value}" in message or f"{name} {value}" in message or bool(after_got) and _quoted(
        value, after_got)


def _quoted(value: Any, message: str) -> bool:
    """Whether a message shows the value already (a list or block: each of its items)."""
    leaves = _leaves(value)
    return str(value) in message or bool(leaves) and all(str(leaf) in message for leaf in leaves)


_MISSING = object()


def _lookup(value: Any, parts: list[str]) -> Any:
    for part in parts:
        if not isinstance(value, dict) or part not in value:
            return _MISSING
        value = value[part]
    return value


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [leaf for v in value.values() for leaf in _leaves(v)]
    if isinstance(value, list | tuple):
        return [leaf for v in value for leaf in _leaves(v)]
    return [value]
