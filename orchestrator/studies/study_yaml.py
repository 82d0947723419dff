"""A study file's YAML, read as load_study reads it: on libyaml where PyYAML was built
with it (about ten times the pure-Python parser's speed), refusing a key given twice
in one mapping, and with a refused file's error in the pure-Python parser's words."""

from __future__ import annotations

import typing
from pathlib import Path
from typing import Any

import yaml

from orchestrator.studies.config_paths import SAFE_LOADER, StudyError


def load_study_yaml(path: Path, text: str) -> Any:
    """The file's text parsed; a StudyError naming `path` and the line where it is not YAML."""
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)
    except yaml.YAMLError as error:
        raise _yaml_error(path, text, error) from None


_MERGE_TAG = "tag:yaml.org,2002:merge"


def _yaml_error(path: Path, text: str, error: yaml.YAMLError) -> StudyError:
    """The file's YAML error in the words of PyYAML's pure-Python parser, which names
    what it found (libyaml's "found character that cannot start any token" does not
    say which: a tab)."""
    try:
        yaml.load(text, Loader=_ExplainingLoader)
    except yaml.YAMLError as explained:
        error = explained
    mark = getattr(error, "problem_mark", None)
    return StudyError(path, None, f"not valid YAML: {getattr(error, 'problem', error)}", mark.line + 1 if mark else None)


class _UniqueKeys:
    """A loader's mixin that refuses a key given twice in one mapping (PyYAML keeps the
    last one silently, so a repeated axis would quietly replace the first)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == _MERGE_TAG:
                # `<<: *profile` copies an anchored mapping (a profile built on
                # another); the keys written beside it override the copied ones
                continue
            key = self.construct_object(key_node, deep=True)
            if isinstance(key, typing.Hashable) and key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None,
                    f"duplicate key {key!r} (first at line {seen[key] + 1})", key_node.start_mark,
                )
            if isinstance(key, typing.Hashable):
                seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep=deep)


class _UniqueKeyLoader(_UniqueKeys, SAFE_LOADER):
    """The study files' loader: libyaml's where PyYAML has it."""


class _ExplainingLoader(_UniqueKeys, yaml.SafeLoader):
    """The pure-Python loader, read again for a file libyaml refused (_yaml_error)."""
