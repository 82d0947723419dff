"""Every study's trials that a seed batch accepts train in one: the first step of two
seeds batched equals each seed's solo step, for every distinct trial (seeds aside) of
every study file in studies/, on a tiny model of the trial's own architecture,
positional encoding, positions, format and task (a FIRE decoder, seed_robustness's,
once raised at its first clipped step)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import torch
from test_seed_batch import assert_first_step_matches_solo, solo_parts

from lengthgen.config import TrialConfig
from lengthgen.seed_batch import StackedModels, check_seed_batch
from orchestrator.studies.study import load_study

CPU = torch.device("cpu")
STUDIES = Path(__file__).resolve().parents[1] / "studies"


def _tiny(config: TrialConfig) -> TrialConfig | None:
    """The trial with a small batch and model (one layer where it loops); None where it
    cannot be batched or refuses the tiny size."""
    size = "tiny_1l" if config.model.loops > 1 else "tiny"
    try:
        tiny = replace(config, model=replace(config.model, size=size),
                       train=replace(config.train, batch_size=4, grad_clip=config.train.grad_clip or 1.0))
        check_seed_batch([tiny])
    except ValueError:
        return None
    return tiny


def _batchable_trials() -> list[tuple[str, TrialConfig]]:
    """(study, trial) for each batchable model of every study (its task and whether its
    outputs align with the input aside from the model section; the many formats of
    format_ablation would repeat the same forward)."""
    found: dict[tuple, tuple[str, TrialConfig]] = {}
    for path in sorted(STUDIES.glob("*.yaml")):
        for config in load_study(path).trials:
            tiny = _tiny(config)
            if tiny is not None:
                key = (path.stem, repr(tiny.to_dict()["model"]), tiny.task.name, tiny.format.fixed_length)
                found.setdefault(key, (path.stem, tiny))
    return list(found.values())


TRIALS = _batchable_trials()


def test_every_study_has_trials_a_seed_batch_accepts():
    assert {study for study, _ in TRIALS} >= {"seed_robustness", "quickstart", "pe_comparison"}


@pytest.mark.parametrize("study, config", TRIALS, ids=[f"{s}-{c.model.pe}-{c.model.positions}-{n}"
                                                        for n, (s, c) in enumerate(TRIALS)])
def test_the_first_step_of_two_batched_seeds_equals_their_solo_steps(study, config):
    seeds = [replace(config, seeds=replace(config.seeds, weight=w, data=d)) for w, d in ((0, 0), (1, 2))]
    solos = [solo_parts(c, 0) for c in seeds]
    stacked = StackedModels([model for model, _, _ in solos])
    assert_first_step_matches_solo(solos, stacked, CPU)
