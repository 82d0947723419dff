"""The study whose configuration groups the MLflow parents' tests share (test_group_runs,
test_group_answers): two learning rates, each a group crossing weight seeds 0-1 with data
seeds 0-1, and its trials written as finished with accuracies that rank the groups."""

from __future__ import annotations

from pathlib import Path

from orchestrator.studies.study import load_study

STUDY = """\
name: parents
base:
  task: {name: successor, train_digits: [1, 2]}
  model: {arch: decoder, size: tiny, pe: alibi}
  train: {steps: 10, batch_size: 8, lr: 3.0e-3, warmup: 2, log_every: 5}
  eval: {digits: [2, 3], samples: 4}
axes:
  train.lr: [3.0e-3, 1.0e-3]
  seeds.weight: [0, 1]
  seeds.data: [0, 1]
resources: {cpus_per_trial: 1}
"""
#: accuracy by weight seed and data seed (the weight seed matters most), and 0.2 more at
#: the larger learning rate, so that the two groups rank
ACCURACY = {(w, d): 0.2 * (1 + w) + 0.1 * d for w in range(3) for d in range(2)}
BETTER_LR = 3.0e-3


def parents_study(folder: Path):
    """STUDY, loaded from a file in ``folder``."""
    path = folder / "parents.yaml"
    path.write_text(STUDY)
    return load_study(path)


def accuracy(config) -> float:
    """The accuracy a trial of STUDY is written with."""
    return ACCURACY[(config.seeds.weight, config.seeds.data)] + (0.2 if config.train.lr == BETTER_LR else 0.0)


def write_trials(root: Path, study, write_finished_trial, configs) -> None:
    """These trials of the study written as finished (conftest's write_finished_trial)."""
    for config in configs:
        write_finished_trial(root, study, config, accuracy(config))
