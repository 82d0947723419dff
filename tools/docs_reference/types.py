"""A config field's type, default and allowed values in words, read from its annotation
(pydantic models and the stdlib dataclasses lengthgen's configs are)."""

from __future__ import annotations

import dataclasses
import json
import re
import sys
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import annotated_types
from pydantic import BaseModel
from pydantic_core import PydanticUndefined

SCALARS = {bool: "boolean", int: "integer", float: "number", str: "string", Any: "any"}
#: the metadata pydantic keeps of Field(gt=..., ...), and how a bound reads
BOUNDS = {annotated_types.Gt: ("gt", "> {}"), annotated_types.Ge: ("ge", ">= {}"),
          annotated_types.Lt: ("lt", "< {}"), annotated_types.Le: ("le", "<= {}"),
          annotated_types.MinLen: ("min_length", "at least {} entries"),
          annotated_types.MaxLen: ("max_length", "at most {} characters")}


def is_section(annotation: Any) -> bool:
    """A nested block: a pydantic model or a dataclass."""
    return isinstance(annotation, type) and (issubclass(annotation, BaseModel) or dataclasses.is_dataclass(annotation))


def section_of(annotation: Any) -> type | None:
    """The block a field holds (``SearchSpec | None`` -> SearchSpec), or None."""
    if is_section(annotation):
        return annotation
    found = [arg for arg in typing.get_args(annotation) if is_section(arg)]
    return found[0] if len(found) == 1 else None


def type_words(annotation: Any) -> str:
    """``tuple[int, int]`` -> ``[integer, integer]``, ``X | None`` -> ``X or null``, ..."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if annotation in SCALARS:
        return SCALARS[annotation]
    if annotation is type(None):
        return "null"
    if origin is Literal:
        return "string" if all(isinstance(a, str) for a in args) else "one of " + ", ".join(map(_code, args))
    if origin is typing.Annotated:
        bounds = bound_words(args[1:])
        return type_words(args[0]) + (f" ({bounds})" if bounds else "")
    if origin in (typing.Union, types.UnionType):
        return " or ".join(type_words(a) for a in args)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return f"list of {type_words(args[0])}"
        return "[]" if not args else "[" + ", ".join(type_words(a) for a in args) + "]"
    if origin is list:
        return f"list of {type_words(args[0])}"
    if origin is dict:
        return f"mapping of {type_words(args[0])} to {type_words(args[1])}"
    if is_section(annotation):
        return "block"
    raise ValueError(f"no words for the type {annotation!r}: add them to tools/docs_reference/types.py")


def choices(annotation: Any) -> tuple[str, ...]:
    """The string values a Literal (or a union holding one) allows."""
    if typing.get_origin(annotation) is Literal:
        return tuple(a for a in typing.get_args(annotation) if isinstance(a, str))
    return tuple(c for a in typing.get_args(annotation) for c in choices(a))


def bound_words(metadata: typing.Iterable[Any]) -> str:
    words = []
    for item in metadata:
        for kind, (attribute, template) in BOUNDS.items():
            if isinstance(item, kind):
                words.append(template.format(getattr(item, attribute)))
        if hasattr(item, "metadata"):  # a pydantic FieldInfo inside Annotated[...]
            inner = bound_words(item.metadata)
            words += [inner] if inner else []
    return ", ".join(words)


def default_words(value: Any) -> str:
    """A default as a study file writes it (``null``, ``[1, 5]``, ``rope``)."""
    if value is PydanticUndefined:
        return ""
    if dataclasses.is_dataclass(value) or isinstance(value, BaseModel):
        return ""  # a block: its fields list their own defaults
    return _code(json.loads(json.dumps(value, default=list)))


def _code(value: Any) -> str:
    text = value if isinstance(value, str) and value else json.dumps(value)
    return f"`{text}`"


def registry_of(values: tuple[str, ...], modules: typing.Iterable[str]) -> tuple[str, Mapping] | None:
    """The registry whose keys are exactly ``values`` (lengthgen builds each Literal from one),
    looked up in ``modules``: its dotted name where it is defined, and the registry."""
    for module_name in modules:
        for name, candidate in vars(sys.modules[module_name]).items():
            if isinstance(candidate, Mapping) and name.isupper() and tuple(candidate) == values:
                return f"{_defining_module(name, candidate)}.{name}", candidate
    return None


def _defining_module(name: str, registry: Mapping) -> str:
    """The module whose source assigns ``name`` (registries are re-exported elsewhere)."""
    for module_name, module in sorted(sys.modules.items()):
        if getattr(module, name, None) is registry and module_name.split(".")[0] in ("lengthgen", "orchestrator"):
            source = getattr(module, "__file__", None)
            if source and re.search(rf"^{name}\b[^=\n]*=", Path(source).read_text(), re.MULTILINE):
                return module_name
    raise LookupError(f"no module assigns the registry {name}")
