"""A gradient that is not finite in one seed of a batch: the seed diverges at the step
it would alone (a NaN spreads through its clipping and AdamW step to its weights; an
inf's clipping coefficient is 0, and inf x 0 is NaN), with the last finite loss of its
solo run, and leaves the batch; the other seeds train bit for bit as in the batch
without the poison."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from test_seed_batch import losses_of, seeded

from lengthgen import seed_batch, train
from lengthgen.training_step import TrainingStep

#: the 0-based update whose gradient is poisoned; its own loss is finite
POISONED_UPDATE = 3
#: the poisoned seed (its weight seed)
POISONED = 1


def poison_solo(monkeypatch, value: float) -> None:
    """One element of the head's gradient of update POISONED_UPDATE becomes `value`."""
    real = TrainingStep.gradients

    def gradients(self, step, parts):
        loss = real(self, step, parts)
        if step == POISONED_UPDATE:
            self.model.lm_head.weight.grad[0, 0] = value
        return loss

    monkeypatch.setattr(TrainingStep, "gradients", gradients)


def poison_batch(monkeypatch, value: float) -> list[int]:
    """The same element of seed POISONED's slice in a batch; the stack's members at
    every update (to see the diverged seed leave)."""
    real, members = seed_batch.SeedBatchStep._mask_and_clip, []

    def mask_and_clip(self, trained):
        members.append(list(self.stacked.members))
        if len(members) == POISONED_UPDATE + 1:
            self.stacked.params["lm_head.weight"].grad[self.stacked.members.index(POISONED), 0, 0] = value
        real(self, trained)

    monkeypatch.setattr(seed_batch.SeedBatchStep, "_mask_and_clip", mask_and_clip)
    return members


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_a_poisoned_seed_diverges_as_alone_and_the_others_are_untouched(monkeypatch, value):
    configs = [seeded(0, 0), seeded(POISONED, 1), seeded(2, 2)]
    clean = seed_batch.train_seed_batch(configs)
    with monkeypatch.context() as patch:
        poison_solo(patch, value)
        alone = train(configs[POISONED])
    with monkeypatch.context() as patch:
        members = poison_batch(patch, value)
        batched = seed_batch.train_seed_batch(configs)
    assert alone.status == batched[POISONED].status == "diverged"
    # the poisoned update trains NaN weights; the next loss is NaN: step POISONED_UPDATE + 2
    assert alone.diverged_at == batched[POISONED].diverged_at == POISONED_UPDATE + 2
    assert batched[POISONED].last_finite_loss == pytest.approx(alone.last_finite_loss, rel=1e-4)
    assert batched[POISONED].steps == alone.steps
    # it left the stack after the update that found its loss NaN
    assert members[POISONED_UPDATE + 1] == [0, 1, 2] and members[POISONED_UPDATE + 2] == [0, 2]
    for k in (0, 2):
        assert batched[k].status == "done"
        assert losses_of(batched[k]) == losses_of(clean[k])
        assert [(s, r.correct) for s, r in batched[k].eval] == [(s, r.correct) for s, r in clean[k].eval]
        assert [(r.target, r.prediction) for r in batched[k].samples] == \
            [(r.target, r.prediction) for r in clean[k].samples]


def test_a_seed_that_left_costs_no_adamw_work_and_its_state_follows_the_others():
    """After a seed leaves, the AdamW state holds the others' slices only, each equal to
    the slice it had before."""
    configs = [seeded(0, 0), seeded(1, 1), seeded(2, 2)]
    solos = [seed_batch.phase_model(c, 0, None, {}, torch.device("cpu")) for c in configs]
    stacked = seed_batch.StackedModels([model for model, _ in solos])
    step = seed_batch.SeedBatchStep(configs[0], stacked, torch.device("cpu"))
    parts = [seed_batch._seed_parts(c, seed_batch.TrialRun.start(c, seed_batch.CharTokenizer(), torch.device("cpu"),
                                                                 1, {}), s, 0, seed_batch.CharTokenizer())
             for c, (_, s) in zip(configs, solos, strict=True)]
    step.update(0, parts, [True] * 3)
    before = {name: {key: value.clone() for key, value in step.optimizer.state[p].items()}
              for name, p in stacked.params.items()}
    step.keep([0, 2])
    assert stacked.members == [0, 2]
    for name, p in stacked.params.items():
        assert p.shape[0] == 2 and p.requires_grad
        state = step.optimizer.state[p]
        for key in ("exp_avg", "exp_avg_sq"):
            assert torch.equal(state[key], before[name][key][[0, 2]])
        assert torch.equal(state["step"], before[name]["step"])
    assert sum(p.numel() for group in step.optimizer.param_groups for p in group["params"]) == \
        2 * sum(p.numel() for p in solos[0][0].parameters())
    np.testing.assert_array_equal(stacked.to_solo(2).lm_head.weight.detach(), stacked.params["lm_head.weight"][1].detach())
