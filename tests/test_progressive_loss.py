"""The progressive loss of looped models (train.progressive_loss_alpha; Bansal et al. 2022
as McLeish et al. 2024's code trains with it): the loop counts against the authors'
draws, the frozen loops passing no gradient, one training step's loss and gradient
against the formula, seeds, and the refusals."""

from __future__ import annotations

import copy
from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F
from model_helpers import CPU, batch_of, gradients, tokenizer

from lengthgen import train
from lengthgen.config import EvalConfig, ModelConfig, TaskConfig, TrainConfig, TrialConfig
from lengthgen.model import build_model
from lengthgen.model.recurrence import progressive_terms
from lengthgen.training_step import TrainingStep, _step_generator


def authors_draw(loops: int, generator: torch.Generator) -> tuple[int, int]:
    """ScriptableRecurrentLMBPTT.forward_progressive's draw, as written there."""
    max_backprop = max(loops // 2, 1)
    n = torch.randint(low=0, high=loops, size=(1,), generator=generator)
    k = torch.randint(low=1, high=1 + min(loops - int(n), max_backprop), size=(1,), generator=generator)
    return int(n), int(k)


@pytest.mark.parametrize("loops", [2, 3, 16])
def test_loop_counts_are_the_authors_draws_and_cover_their_range(loops):
    backprop = max(loops // 2, 1)
    seen = set()
    for seed in range(3000):
        ((weight, drawn),) = progressive_terms(1.0, loops, torch.Generator().manual_seed(seed))
        assert weight == 1.0 and drawn == authors_draw(loops, torch.Generator().manual_seed(seed))
        seen.add(drawn)
    assert seen == {(n, k) for n in range(loops) for k in range(1, 1 + min(loops - n, backprop))}


def test_alpha_weighs_the_full_depth_term_and_the_random_one():
    (full, (alpha, drawn)) = progressive_terms(0.25, 16, torch.Generator().manual_seed(0))
    assert full == (0.75, (8, 8)) and alpha == 0.25  # R - B frozen loops, then B = R // 2 trained
    assert drawn == authors_draw(16, torch.Generator().manual_seed(0))
    assert progressive_terms(0.0, 4, torch.Generator()) == [(1.0, (2, 2))]


def looped_trial(alpha: float = 0.5, loops: int = 3) -> TrialConfig:
    return TrialConfig(task=TaskConfig(train_digits=(1, 3)),
                       model=ModelConfig(pe="nope", loops=loops, input_injection="loop", embedding_norm=True),
                       train=TrainConfig(steps=3, batch_size=8, warmup=1, log_every=1, progressive_loss_alpha=alpha),
                       eval=EvalConfig(digits=(3,), samples=4))


def test_frozen_loops_compute_the_same_state_and_pass_no_gradient():
    trial = looped_trial()
    model = build_model(trial.model, len(tokenizer), 0)
    tokens = torch.randint(3, 16, (2, 9), generator=torch.Generator().manual_seed(0))
    positions = torch.arange(9).expand(2, 9)
    full = model(tokens, positions)
    truncated = model(tokens, positions, loops=(2, 1))
    assert torch.equal(truncated, full)  # the same numbers; only the graph differs
    truncated.square().sum().backward()
    ours = gradients(model)
    model.zero_grad(set_to_none=True)
    embedded = model.embedding_norm(model.embed(tokens, positions, model.pe, None))
    x = embedded
    with torch.no_grad():
        for loop in range(2):
            x = x + embedded if loop else x
            for block in model.blocks:
                x = block(x, positions, positions, None)
    x = x + embedded  # the trained loop: gradient through its layers and its injection only
    for block in model.blocks:
        x = block(x, positions, positions, None)
    model.lm_head(model.final_norm(x)).square().sum().backward()
    by_hand = gradients(model)
    assert ours.keys() == by_hand.keys()
    for name, expected in by_hand.items():
        torch.testing.assert_close(ours[name], expected, rtol=1e-5, atol=1e-7)


def test_a_training_steps_loss_and_gradient_are_the_weighted_terms():
    torch.set_num_threads(1)
    trial = looped_trial(alpha=0.5, loops=3)
    model = build_model(trial.model, len(tokenizer), 0, trial.input_layout)
    reference = copy.deepcopy(model)
    step = TrainingStep(trial, model, CPU)
    parts = step.parts(1, batch_of(trial, 1))
    loss = step.gradients(1, parts)
    ours = gradients(model)
    terms = progressive_terms(0.5, 3, _step_generator(trial, 1, stream=2))
    assert [weight for weight, _ in terms] == [0.5, 0.5] and terms[0][1] == (2, 1)
    ((batch, positions),) = parts
    expected = sum(weight * F.cross_entropy(*reference.forward_batch(batch, positions, loops=loops))
                   for weight, loops in terms)
    expected.backward()
    torch.testing.assert_close(loss, expected.detach(), rtol=1e-6, atol=1e-7)
    for name, value in gradients(reference).items():
        torch.testing.assert_close(ours[name], value, rtol=1e-5, atol=1e-7)


def test_loop_counts_come_from_the_data_seed_and_training_repeats():
    trial = looped_trial(alpha=1.0, loops=8)
    draws = [progressive_terms(1.0, 8, _step_generator(trial, s, stream=2)) for s in range(20)]
    other = replace(trial, seeds=replace(trial.seeds, data=1))
    assert draws != [progressive_terms(1.0, 8, _step_generator(other, s, stream=2)) for s in range(20)]
    first, second = train(trial, device="cpu"), train(trial, device="cpu")
    assert [log.loss for log in first.train] == [log.loss for log in second.train]
    plain = train(replace(trial, train=replace(trial.train, progressive_loss_alpha=0.0)), device="cpu")
    assert [log.loss for log in first.train] != [log.loss for log in plain.train]


def test_off_by_default_and_the_refusals():
    assert TrainConfig().progressive_loss_alpha == 0.0
    with pytest.raises(ValueError, match=r"train.progressive_loss_alpha must be in \[0, 1\] \(0: off\), got 1.5"):
        TrainConfig(progressive_loss_alpha=1.5)
    with pytest.raises(ValueError, match="train.progressive_loss_alpha trains looped models.*model.loops is 1: set "
                                         "model.loops >= 2 or train.progressive_loss_alpha to 0"):
        TrialConfig(train=TrainConfig(progressive_loss_alpha=1.0))
