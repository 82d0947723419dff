"""train.state_noise_draw: where model.state_init noise is drawn. `host` (the default)
keeps the noise every earlier trial trained with; `device` draws from the trial's
device's generator with the same seed, which on a CPU is the same generator: the same
numbers bit for bit (tests/test_gpu.py checks the CUDA draw)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import torch

from lengthgen.batches import training_batch
from lengthgen.config import derive
from lengthgen.model import build_model
from lengthgen.model.recurrence import STATE_NOISE_DRAWS
from lengthgen.tokenizer import CharTokenizer
from lengthgen.training_step import TrainingStep
from orchestrator.studies.study import StudyError, load_study

STUDIES = Path(__file__).resolve().parents[1] / "studies"
CPU = torch.device("cpu")


def noisy_trial(draw: str):
    config = load_study(STUDIES / "sota_abacus.yaml", "cpu").trials[0]
    assert config.model.state_init == "noise"
    return replace(config, train=replace(config.train, state_noise_draw=draw, batch_size=8, batch_ramp=None))


def losses(config, steps: int = 3) -> list[float]:
    tokenizer, derived = CharTokenizer(), derive(config)
    model = build_model(config.model, len(tokenizer), config.seeds.weight, derived.input_layout)
    step = TrainingStep(config, model, CPU)
    return [step(s, training_batch(config, derived.task, derived.distribution, tokenizer, s)).item()
            for s in range(steps)]


def test_on_a_cpu_the_device_draw_trains_the_host_draws_numbers():
    assert losses(noisy_trial("device")) == losses(noisy_trial("host"))


def test_the_noise_moves_the_loss_so_the_draw_is_seen():
    """The comparison above is not vacuous: another noise stream moves the losses."""
    config = noisy_trial("host")
    other = replace(config, seeds=replace(config.seeds, data=config.seeds.data + 1))
    host = losses(config)
    assert losses(other) != host


def test_each_draw_gives_a_generator_on_its_device_from_the_seed():
    for draw in STATE_NOISE_DRAWS.values():
        first, again = draw(7, CPU), draw(7, CPU)
        assert first.device == CPU
        assert torch.equal(torch.randn(4, generator=first), torch.randn(4, generator=again))


def test_a_model_without_noise_refuses_the_option():
    config = load_study(STUDIES / "quickstart.yaml").trials[0]
    with pytest.raises(ValueError, match="train.state_noise_draw device says where model.state_init noise is drawn; "
                                         "model.state_init is embed, which draws none"):
        replace(config, train=replace(config.train, state_noise_draw="device"))


def test_a_study_file_naming_another_draw_is_refused_with_the_choices(tmp_path):
    path = tmp_path / "wrong.yaml"
    text = (STUDIES / "sota_abacus.yaml").read_text()
    path.write_text(text.replace("log_every: 50, precision: bf16}", "log_every: 50, precision: bf16, state_noise_draw: gpu}"))
    with pytest.raises(StudyError, match=r"train.state_noise_draw: 'gpu' is not one of host, device"):
        load_study(path)
