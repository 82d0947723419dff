"""The groups' answers the MLflow thread is handed (orchestrator.running.group_answers):
a group's rows are read once for its numbers and its figures, and read again only when
a file of its trials changes; what they give is what reading the study afresh gives."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from group_studies import accuracy, parents_study, write_trials

from analysis import group_figures
from orchestrator.running import group_answers
from results_contract import groups


@pytest.fixture
def study(tmp_path: Path):
    return parents_study(tmp_path)


@pytest.fixture
def reads(monkeypatch) -> list[tuple[str, ...]]:
    """The groups each read of the results asked for, in order."""
    asked, read = [], group_answers.group_rows

    def counted(root, study, group_ids, *args, **kwargs):
        asked.append(tuple(sorted(group_ids or ())))
        return read(root, study, group_ids, *args, **kwargs)

    monkeypatch.setattr(group_answers, "group_rows", counted)
    return asked


def test_numbers_asked_again_with_no_file_changed_read_nothing(tmp_path, study, write_finished_trial, reads):
    root = tmp_path / "results"
    first, second = study.trials[0], study.trials[-1]
    for config in (first, second):
        write_finished_trial(root, study, config, accuracy(config))
    answers = group_answers.GroupAnswers(study, root)
    numbers = answers.numbers([first.trial_id])
    assert reads == [(groups.group_id(first),)]
    # the same trial, or the group's figures: nothing changed, nothing is read
    assert answers.numbers([first.trial_id]) == numbers
    answers.figures([groups.group_id(first)], tmp_path / "figures")
    assert reads == [(groups.group_id(first),)]
    # a trial of the group finished since: that group alone is read again
    added = next(c for c in study.trials if groups.group_id(c) == groups.group_id(first) and c != first)
    write_finished_trial(root, study, added, accuracy(added))
    both = answers.numbers([added.trial_id, second.trial_id])
    assert reads == [(groups.group_id(first),), (groups.group_id(first), groups.group_id(second))]
    assert answers.numbers([first.trial_id, second.trial_id]) == both and len(reads) == 2
    # a file replaced, however it changed (here: rewritten with the same rows)
    write_finished_trial(root, study, second, accuracy(second))
    answers.numbers([second.trial_id])
    assert reads[-1] == (groups.group_id(second),)


def test_kept_answers_are_those_of_a_fresh_read(tmp_path, study, write_finished_trial):
    """Numbers and figures from kept rows, after a group's trials finished in two steps
    and the other group's at once, equal those of group_numbers over the study and of
    figures drawn afresh."""
    root = tmp_path / "results"
    answers = group_answers.GroupAnswers(study, root)
    first = [c for c in study.trials if c.train.lr == study.trials[0].train.lr]
    write_trials(root, study, write_finished_trial, first[:2])
    answers.numbers([c.trial_id for c in first[:2]])
    write_trials(root, study, write_finished_trial, [c for c in study.trials if c not in first[:2]])
    every = [c.trial_id for c in study.trials]
    kept = answers.numbers(every)
    # group_numbers leaves `complete` to GroupAnswers, which knows the planned trials
    whole = [dataclasses.replace(n, complete=False) for n in kept]
    assert whole == group_answers.group_numbers(root, study.name, answers.names) != []
    ids = sorted({groups.group_id(c) for c in study.trials})
    drawn = answers.figures(ids, tmp_path / "kept")
    fresh = group_figures.draw_group_figures(root, study.name, ids, tmp_path / "fresh")
    assert {g: sorted(f) for g, f in drawn.items()} == {g: sorted(f) for g, f in fresh.items()} != {}
    for group_id, files in drawn.items():
        for name, path in files.items():
            assert path.read_bytes() == fresh[group_id][name].read_bytes(), name


def test_a_study_with_no_results_yet_has_no_numbers_and_no_figures(tmp_path, study):
    answers = group_answers.GroupAnswers(study, tmp_path / "results")
    assert answers.numbers([study.trials[0].trial_id]) == []
    assert answers.figures([groups.group_id(study.trials[0])], tmp_path / "figures") == {}
