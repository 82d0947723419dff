"""Seed batches as Ray Tune trials (orchestrator.running.seed_batches) and their study
field, resources.seeds_per_trial: 1 leaves the Tune trials as they were; K groups the
trials of each configuration group K at a time; what a seed batch cannot train is
refused at load, naming the field. (The batches trained through Ray, killed and
resumed: tests/test_seed_batch_faults.py.)"""

from __future__ import annotations

import pytest

from orchestrator.running.seed_batches import BATCH, auto_seeds, members, seed_batches
from orchestrator.studies.study import StudyError, load_study

STUDY = """\
name: batches
base:
  task: {name: successor, train_digits: [1, 2]}
  model: {arch: decoder, size: tiny, pe: nope}
  train: {steps: 2, batch_size: 4}
  eval: {digits: [2], samples: 2}
axes:
  train.lr: [1.0e-3, 3.0e-3]
  seeds.weight: [0, 1, 2]
  seeds.data: [0, 1]
resources: {seeds_per_trial: SEEDS}
"""


def study_with(tmp_path, seeds, more: str = ""):
    path = tmp_path / "batches.yaml"
    path.write_text(STUDY.replace("SEEDS", str(seeds)) + more)
    return load_study(path)


def params_of(study) -> list[dict]:
    return [{"trial_id": c.trial_id, "config": c.to_dict()} for c in study.trials]


def test_one_seed_per_trial_leaves_every_tune_trial_as_it_was(tmp_path):
    trials = params_of(study_with(tmp_path, 1))
    assert seed_batches(trials, 1) == trials
    assert all(members(params) == [params] for params in trials)


def auto_with_memory_for(seeds: int):
    """`auto`'s sizing with a memory budget of `seeds` seeds (orchestrator.running.auto_seeds)."""
    return lambda group: auto_seeds(len(group), seeds * 1e6, 1e6).seeds


@pytest.mark.parametrize(("seeds", "size", "sizes"), [
    (4, 4, [4, 4, 2, 2]), (6, 6, [6, 6]),
    ("auto", auto_with_memory_for(100), [6, 6]),  # each group's 6 pending seeds
    ("auto", auto_with_memory_for(4), [4, 4, 2, 2]),  # what memory holds
    ("auto", auto_with_memory_for(0), [1] * 12),  # not one seed fits: each alone
])
def test_trials_are_batched_within_their_configuration_group(tmp_path, seeds, size, sizes):
    study = study_with(tmp_path, seeds)
    assert study.spec.resources.seeds_per_trial == seeds
    trials = params_of(study)
    units = seed_batches(trials, size)
    assert [len(members(unit)) for unit in units] == sizes
    assert sorted(p["trial_id"] for unit in units for p in members(unit)) == sorted(p["trial_id"] for p in trials)
    for unit in units:
        lrs = {p["config"]["train"]["lr"] for p in members(unit)}
        assert len(lrs) == 1  # one configuration group: the batch differs only in seeds
        assert unit["trial_id"] == members(unit)[0]["trial_id"] and (BATCH in unit) == (len(members(unit)) > 1)


def test_a_batch_of_one_is_a_plain_trial(tmp_path):
    trials = params_of(study_with(tmp_path, 4))[:1]
    assert seed_batches(trials, 4) == trials


def test_a_study_that_a_seed_batch_cannot_train_is_refused_naming_the_fields(tmp_path):
    path = tmp_path / "batches.yaml"
    path.write_text(STUDY.replace("SEEDS", "4").replace("pe: nope}", "pe: nope, dropout: 0.1}"))
    with pytest.raises(StudyError, match=r"resources\.seeds_per_trial: .*model\.dropout cannot be trained in a seed"):
        load_study(path)
    path.write_text(STUDY.replace("SEEDS", "0"))
    with pytest.raises(StudyError, match=r"resources\.seeds_per_trial"):
        load_study(path)


def test_the_quickstart_bench_runs_the_quickstart_in_batches_of_four_at_fewer_steps(tmp_path):
    from orchestrator.benchmarks.bench_seed_batch import quickstart_text

    path = tmp_path / "quickstart.yaml"
    path.write_text(quickstart_text(4, 20))
    study = load_study(path)
    assert study.spec.resources.seeds_per_trial == 4 and {c.train.steps for c in study.trials} == {20}
    units = seed_batches(params_of(study), 4)
    # largest first (two workers then end together), each size in the study's group order
    assert [len(members(unit)) for unit in units] == [4, 4, 4, 2, 2]
    groups = [unit["config"]["model"]["pe"] for unit in units]
    assert groups == ["nope", "nope", "learned", "rope", "learned"]


def test_the_end_to_end_bench_runs_each_mode_twice_in_an_order_that_favours_neither(monkeypatch):
    from orchestrator.benchmarks import bench_seed_batch

    calls = []

    def seconds(seeds_per_trial, steps, folder):
        calls.append((seeds_per_trial, folder))
        return {1: 12.0, 4: 8.0}[seeds_per_trial] + len(calls)  # a load that grows during the run

    monkeypatch.setattr(bench_seed_batch, "quickstart_run_seconds", seconds)
    row = bench_seed_batch.quickstart_run(steps=5)
    assert [k for k, _ in calls] == [1, 4, 4, 1]
    assert len({folder for _, folder in calls}) == 4  # each run its own results: none reuses another's trials
    assert row.ratio == pytest.approx((13 + 16) / (10 + 11))
