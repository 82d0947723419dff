"""A CPU training step in fewer calls, with the same numbers: AdamW's foreach form and
the foreach clipping of the gradient's norm give the per-tensor loops' weights bit for
bit (so the CPU's pinned numbers stand), on the quickstart's models and on a stacked
seed batch."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import torch

from lengthgen import training_step as training_step_module
from lengthgen.batches import training_batch
from lengthgen.config import derive
from lengthgen.tokenizer import CharTokenizer
from lengthgen.training import phase_model
from orchestrator.studies.study import load_study

QUICKSTART = Path(__file__).resolve().parents[1] / "studies" / "quickstart.yaml"
CPU = torch.device("cpu")


def _per_tensor(monkeypatch) -> None:
    """The loops the CPU trained with before: AdamW and clipping one tensor at a time."""
    monkeypatch.setitem(training_step_module.ADAMW_OPTIONS, "cpu", {"foreach": False})
    monkeypatch.setattr(training_step_module, "clip_gradients", lambda model, max_norm: torch.nn.utils.clip_grad_norm_(
        model.parameters(), max_norm, foreach=False))


def _weights_after(config, steps: int) -> tuple[list[float], list[torch.Tensor]]:
    derived, tokenizer = derive(config), CharTokenizer()
    model, step = phase_model(config, 0, None, {}, CPU)
    model.train()
    losses = [step(n, training_batch(config, derived.task, derived.distribution, tokenizer, n)).item()
              for n in range(steps)]
    return losses, [p.detach().clone() for p in model.parameters()]


@pytest.mark.parametrize("model", [0, 1, 2, 3], ids=["rope", "windowed", "coupling", "windowed_coupling"])
def test_foreach_adamw_and_clipping_train_the_per_tensor_loops_weights_bit_for_bit(model, monkeypatch):
    study = load_study(QUICKSTART)
    config = [t for t in study.trials if t.seeds.weight == 0 and t.seeds.data == 0][model]
    # a low clip so that clipping acts at every step, and a short warm-up so the rate is high
    config = replace(config, train=replace(config.train, steps=12, warmup=2, grad_clip=0.05))
    fast = _weights_after(config, 12)
    assert training_step_module.adamw_options(CPU) == {"foreach": True}
    _per_tensor(monkeypatch)
    loops = _weights_after(config, 12)
    assert fast[0] == loops[0]
    assert all(torch.equal(a, b) for a, b in zip(fast[1], loops[1], strict=True))
