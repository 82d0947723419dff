"""docs/reference/study-file.md: every field of a study file, from the models that
validate it: orchestrator.studies.study.StudyFile and the blocks it names, `base` being
one lengthgen.config.TrialConfig. Meanings are the fields' `#:` comments."""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from docs_reference.comments import class_docstring, field_comments
from docs_reference.types import (
    bound_words,
    choices,
    default_words,
    registry_of,
    section_of,
    type_words,
)
from lengthgen.config import TrialConfig
from lengthgen.model.position.abacus import Abacus
from orchestrator.studies.study import StudyFile

#: `base` is a mapping to the file's model and validated as a TrialConfig
#: (orchestrator.studies.config_paths.TRIAL_CONFIG)
UNTYPED_BLOCKS = {"base": TrialConfig}
#: a field that switches on a part with options of its own, as a registry's entries have
SWITCHES = {"abacus": Abacus}
#: where the registries behind the Literal types are looked up
REGISTRY_MODULES = ("lengthgen.config", "lengthgen.eval_config", "lengthgen.train_config",
                    "orchestrator.studies.search_spec", "orchestrator.studies.seed_spec")


@dataclass(frozen=True)
class FieldDoc:
    name: str
    annotation: Any
    default: Any
    metadata: tuple
    meaning: str


@dataclass(frozen=True)
class Block:
    path: str
    cls: type
    fields: tuple[FieldDoc, ...]


def field_docs(cls: type) -> list[FieldDoc]:
    """The fields of a pydantic model or a dataclass, in their order, with their comments."""
    comments = field_comments(cls)
    if issubclass(cls, BaseModel):
        return [FieldDoc(name, info.annotation, info.default, tuple(info.metadata), comments.get(name, ""))
                for name, info in cls.model_fields.items()]
    hints = typing.get_type_hints(cls)
    return [FieldDoc(f.name, hints[f.name], _dataclass_default(f), (), comments.get(f.name, ""))
            for f in dataclasses.fields(cls)]


def _dataclass_default(field: dataclasses.Field) -> Any:
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return PydanticUndefined


def blocks(cls: type, path: str) -> Iterator[Block]:
    """The block of ``cls`` at ``path``, then the blocks its fields hold, depth first."""
    fields = field_docs(cls)
    yield Block(path, cls, tuple(fields))
    for field in fields:
        child = f"{path}.{field.name}" if path else field.name
        if child in UNTYPED_BLOCKS:
            yield from blocks(UNTYPED_BLOCKS[child], child)
            continue
        if typing.get_origin(field.annotation) is dict:
            entry = section_of(typing.get_args(field.annotation)[1])
            if entry is not None:
                yield from blocks(entry, f"{child}.<config path>")
            continue
        section = section_of(field.annotation)
        if section is not None:
            yield from blocks(section, child)


def readers_of(block: Block) -> dict[str, list[str]]:
    """Option field -> the settings under which it is read (`model.pe: t5`): a registry
    entry's `options`, refused under any other entry (lengthgen.config.refuse_unread_options)."""
    section = block.path.rsplit(".", 1)[-1]
    readers: dict[str, list[str]] = {}
    for field in block.fields:
        registry = _registry(field)
        entries = registry[1].items() if registry else ()
        if field.name in SWITCHES:
            entries = [("true", SWITCHES[field.name])]
        for key, entry in entries:
            for option in getattr(entry, "options", ()):
                readers.setdefault(option, []).append(f"`{section}.{field.name}: {key}`")
    return readers


def _registry(field: FieldDoc) -> tuple[str, Mapping] | None:
    values = choices(field.annotation)
    return registry_of(values, REGISTRY_MODULES) if values else None


def field_line(field: FieldDoc, readers: list[str]) -> str:
    """One field as a list item: name, type, allowed values, default, meaning, readers."""
    facts = [type_words(field.annotation)]
    allowed = choices(field.annotation)
    if allowed:
        registry = _registry(field)
        where = f" (registry `{registry[0]}`)" if registry else ""
        facts.append("one of " + ", ".join(f"`{value}`" for value in allowed) + where)
    bounds = bound_words(field.metadata)
    if bounds:
        facts.append(bounds)
    default = default_words(field.default)
    facts.append(f"default {default}" if default else "required" if field.default is PydanticUndefined else "")
    text = f"- **`{field.name}`** ({'; '.join(f for f in facts if f)})"
    if field.meaning:
        text += f": {field.meaning}"
    if readers:
        text += f". Read only with {', '.join(readers)}"
    return text


def render() -> str:
    lines = [
        "# Study file reference",
        "",
        ("<!-- generated by tools/gen_reference.py from the models that validate a study file; "
        "do not edit: change the `#:` comment above the field and run .venv/bin/python tools/gen_reference.py -->"),
        "",
        ("Every field a study file may hold, from the classes that validate it "
        "(`orchestrator/studies/study.py`'s `StudyFile` and the blocks it names; `base` is one "
        "`lengthgen.config.TrialConfig`). A field under `base` is named in `axes`, `exclude`, "
        "`profiles` and `search` by its dotted path (`model.pe`, `train.steps`). Each entry gives the "
        "type, the allowed values (for a registry, its keys and where it lives), the default (a field "
        "without one is required), what the field means, and, for an option of one registry entry, "
        "the settings that read it: set under any other, it is refused."),
    ]
    for block in blocks(StudyFile, ""):
        lines += ["", f"## `{block.path}`" if block.path else "## Top level", ""]
        doc = class_docstring(block.cls)
        if doc:
            lines += [doc, ""]
        readers = readers_of(block)
        lines += [field_line(field, readers.get(field.name, [])) for field in block.fields]
    return "\n".join(lines) + "\n"
