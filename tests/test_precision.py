"""Precision and compilation options: the logic runs on CPU (no GPU on this machine)."""

from dataclasses import replace

import pytest
import torch

from lengthgen import TrialConfig, train
from lengthgen.config import EvalConfig, TaskConfig, TrainConfig
from lengthgen.precision import PRECISIONS, autocast
from lengthgen.training import resolve_device

CONFIG = TrialConfig(
    task=TaskConfig(name="successor", train_digits=(1, 2)),
    train=TrainConfig(steps=4, batch_size=4, warmup=1, log_every=2),
    eval=EvalConfig(digits=(2,), samples=4),
)


def test_bf16_autocast_runs_the_forward_in_bfloat16():
    layer = torch.nn.Linear(4, 4)
    with autocast(torch.device("cpu"), "bf16"):
        assert layer(torch.randn(2, 4)).dtype == torch.bfloat16
    with autocast(torch.device("cpu"), "fp32"):
        assert layer(torch.randn(2, 4)).dtype == torch.float32


@pytest.mark.parametrize("precision", sorted(PRECISIONS))
def test_training_in_every_precision_gives_finite_losses(precision):
    config = replace(CONFIG, train=replace(CONFIG.train, precision=precision))
    result = train(config)
    assert result.status == "done"
    assert all(torch.isfinite(torch.tensor(t.loss)) for t in result.train)


def test_device_choice():
    assert resolve_device("cpu") == torch.device("cpu")
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert resolve_device(None).type == expected


@pytest.mark.slow
def test_compiled_training_equals_eager_training_closely():
    compiled = replace(CONFIG, train=replace(CONFIG.train, compile=True))
    eager_losses = [t.loss for t in train(CONFIG).train]
    compiled_losses = [t.loss for t in train(compiled).train]
    assert compiled_losses == pytest.approx(eager_losses, rel=1e-3)
