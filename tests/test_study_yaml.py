"""Study files are parsed on libyaml (orchestrator.studies.study_yaml): every study file
of the repository reads as PyYAML's pure-Python parser reads it, the same data, the
same refusals and the same line for every key, so that the faster parser changes
nothing a user sees."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from orchestrator.studies import study_yaml
from orchestrator.studies.config_paths import SAFE_LOADER, LineFinder
from orchestrator.studies.study import StudyError

REPO = Path(__file__).parents[1]
FILES = sorted([*(REPO / "studies").glob("*.yaml"), *(REPO / "tests" / "study_files").rglob("*.yaml")])


def test_pyyaml_here_has_libyaml():
    # without it every load is the pure-Python parser's, ten times slower, and the
    # comparisons below compare that parser with itself
    assert SAFE_LOADER is yaml.CSafeLoader


def _parsed(text: str, loader: type) -> object:
    try:
        return ("data", yaml.load(text, Loader=loader))
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        return ("refused", mark.line if mark else None)


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(REPO)) for p in FILES])
def test_libyaml_reads_every_study_file_as_the_pure_python_parser_does(path: Path):
    text = path.read_text(encoding="utf-8", errors="replace")
    assert _parsed(text, study_yaml._UniqueKeyLoader) == _parsed(text, study_yaml._ExplainingLoader)


def _key_paths(node: object, prefix: tuple = ()) -> list[tuple]:
    """Every key path of a parsed mapping, nested ones included."""
    paths = []
    if isinstance(node, dict):
        for key, value in node.items():
            paths += [(*prefix, key), *_key_paths(value, (*prefix, key))]
    return paths


@pytest.mark.parametrize("path", (REPO / "studies").glob("*.yaml"), ids=lambda p: p.name)
def test_every_key_is_found_on_the_line_the_pure_python_parser_finds(path: Path):
    text = path.read_text()
    fast, pure = LineFinder(text), LineFinder("")
    pure.root = yaml.compose(text, Loader=yaml.SafeLoader)
    keys = _key_paths(yaml.safe_load(text))
    assert len(keys) > 10
    assert [fast.find(key) for key in keys] == [pure.find(key) for key in keys]


def test_a_refused_file_is_explained_in_the_pure_python_parsers_words(tmp_path: Path):
    study = tmp_path / "tabbed.yaml"
    study.write_text("name: t\nbase:\n\ttask: {name: successor}\n")
    with pytest.raises(StudyError, match=r"tabbed.yaml:3: not valid YAML: found character '\\t' that cannot start"):
        study_yaml.load_study_yaml(study, study.read_text())
