"""Axes over whole blocks, and combinations left out by `exclude`."""

from pathlib import Path

import pytest

from orchestrator.studies.study import StudyError, load_study

STUDY = """
name: axes
base:
  task: {name: addition, train_digits: [1, 3]}
  format: {fixed_length: true, reverse: false, pad: true}
  model: {arch: encoder, size: tiny, pe: shaw, max_positions: 48}
  eval: {digits: [3, 5]}
axes:
  task:
    - {name: addition}
    - {name: multiplication, multiplier_digits: 2}
  model.pe: [learned, shaw, upe]
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "study.yaml"
    path.write_text(text)
    return path


def test_a_block_axis_changes_only_the_fields_it_names(tmp_path):
    study = load_study(write(tmp_path, STUDY + "exclude:\n  - {task.name: addition, model.pe: upe}\n"))
    assert {(t.task.name, t.task.multiplier_digits) for t in study.trials} == {("addition", 1), ("multiplication", 2)}
    # the rest of base's task and model blocks stays
    assert {t.task.train_digits for t in study.trials} == {(1, 3)}
    assert {(t.model.arch, t.model.max_positions) for t in study.trials} == {("encoder", 48)}


def test_exclude_leaves_out_exactly_the_matching_combinations(tmp_path):
    study = load_study(write(tmp_path, STUDY + "exclude:\n  - {task.name: addition, model.pe: upe}\n"))
    assert sorted((t.task.name, t.model.pe) for t in study.trials) == [
        ("addition", "learned"), ("addition", "shaw"),
        ("multiplication", "learned"), ("multiplication", "shaw"), ("multiplication", "upe"),
    ]


def test_exclude_matches_defaults_too(tmp_path):
    """multiplier_digits is not written for addition: its default (1) still matches."""
    rule = "exclude:\n  - {task.name: addition, model.pe: upe}\n  - {task.multiplier_digits: 1, model.pe: learned}\n"
    study = load_study(write(tmp_path, STUDY + rule))
    assert ("addition", "learned") not in {(t.task.name, t.model.pe) for t in study.trials}
    assert len(study.trials) == 4


def test_without_exclude_the_impossible_combination_is_refused(tmp_path):
    with pytest.raises(StudyError, match="model.pe upe"):
        load_study(write(tmp_path, STUDY))


EXCLUDE_UPE_ON_ADDITION = "exclude:\n  - {task.name: addition, model.pe: upe}\n"


def test_a_profile_not_chosen_is_checked_with_its_own_axes(tmp_path):
    """The profile's axis value is wrong; loading without that profile must say so."""
    profile = "profiles:\n  cpu:\n    axes.model.pe: [not_a_pe]\n"
    with pytest.raises(StudyError, match=r"profiles\.cpu\.axes\.model\.pe.*nope"):
        load_study(write(tmp_path, STUDY + EXCLUDE_UPE_ON_ADDITION + profile))


def test_a_profile_not_chosen_is_checked_with_its_own_exclude(tmp_path):
    """The file's exclude would skip the impossible first combination; the profile's
    own (empty) exclude does not, so the profile is refused when it is not chosen."""
    profile = "profiles:\n  cpu:\n    axes.model.pe: [upe]\n    exclude: []\n"
    with pytest.raises(StudyError, match="model.pe upe"):
        load_study(write(tmp_path, STUDY + EXCLUDE_UPE_ON_ADDITION + profile))
    # and with the rule kept, it loads
    kept = "profiles:\n  cpu:\n    axes.model.pe: [upe]\n"
    assert len(load_study(write(tmp_path, STUDY + EXCLUDE_UPE_ON_ADDITION + kept)).trials) == 5
