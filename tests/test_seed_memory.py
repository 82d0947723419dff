"""One seed's training memory in a seed batch (lengthgen.seed_memory), estimated from
its config alone, against what a real seed batch step holds on the CPU: the tensors
autograd keeps for backward (counted by `torch.autograd.graph.saved_tensors_hooks`,
each storage once, the stacked weights left out) and the parameter copies a batch
keeps (stacked weights, gradients, AdamW moments, each seed's own model and state).
The estimate must err high, by less than 2x."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from lengthgen.batches import training_batch
from lengthgen.config import (
    EvalConfig,
    FormatConfig,
    ModelConfig,
    SeedConfig,
    TaskConfig,
    TrainConfig,
    TrialConfig,
    derive,
)
from lengthgen.model import build_model, count_parameters
from lengthgen.model.layers import FEED_FORWARDS
from lengthgen.seed_batch import SeedBatchStep, StackedModels
from lengthgen.seed_memory import (
    FLOAT32,
    PER_FFN_WIDTHS,
    STATE_COPIES,
    activation_bytes,
    parameter_count,
    seed_memory,
    training_length,
)
from lengthgen.tokenizer import CharTokenizer
from lengthgen.training_step import TrainingStep

CPU = torch.device("cpu")
#: how far above the measurement the estimate may be (it must never be below)
WITHIN = 2.0
#: the quickstart's base (tiny decoder, 1-4 digit Successor, batch 64)
QUICKSTART = TrialConfig(
    task=TaskConfig(name="successor", train_digits=(1, 4)),
    format=FormatConfig(reverse=True, pad=True),
    model=ModelConfig(size="tiny", pe="rope", max_positions=64),
    train=TrainConfig(steps=2, batch_size=64),
    eval=EvalConfig(digits=(2, 4, 8, 16), samples=10),
)
MODELS = {
    "quickstart rope": QUICKSTART,
    "quickstart windowed": replace(QUICKSTART, model=ModelConfig(pe="nope", attention_bias="windowed", window=1)),
    "quickstart coupled": replace(QUICKSTART, model=ModelConfig(pe="learned", positions="coupled", max_positions=32)),
    "2m": replace(QUICKSTART, model=ModelConfig(size="2m", max_positions=64)),
    "mini geglu rmsnorm": replace(QUICKSTART, model=ModelConfig(size="mini", ffn="geglu", norm="rmsnorm")),
    "looped": replace(QUICKSTART, model=ModelConfig(loops=2, input_injection="loop")),
    "addition 1-10, batch 16": replace(
        QUICKSTART, task=TaskConfig(name="addition", train_digits=(1, 10)), train=TrainConfig(steps=2, batch_size=16),
        eval=EvalConfig(digits=(12,), samples=10)),
}


def seed_batch(config: TrialConfig, seeds: int):
    """A seed batch of `seeds` seeds of `config`: (stacked models, each seed's parts of batch 0)."""
    models, parts = [], []
    for k in range(seeds):
        seeded = replace(config, seeds=SeedConfig(weight=k, data=k))
        model = build_model(seeded.model, len(CharTokenizer()), k, derive(seeded).input_layout)
        batch = training_batch(seeded, derive(seeded).task, derive(seeded).distribution, CharTokenizer(), 0)
        models.append(model)
        parts.append(TrainingStep(seeded, model, CPU).parts(0, batch)[0])
    return StackedModels(models), parts


def saved_for_backward(stacked: StackedModels, parts) -> int:
    """Bytes of the storages autograd keeps for the batch's backward, each once, the
    stacked weights and buffers (counted as state) left out."""
    weights = {t.untyped_storage().data_ptr() for t in [*stacked.params.values(), *stacked.buffers.values()]}
    kept: dict[int, int] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in weights:
            kept[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        stacked.forward_losses(parts, CPU, "fp32")
    return sum(kept.values())


def measured_activation_bytes(config: TrialConfig, seeds: int = 2) -> float:
    """What backward keeps per seed in a real batch of `seeds` seeds of `config` (docs/
    performance.md quotes it beside the estimate for MODELS)."""
    stacked, parts = seed_batch(config, seeds)
    return saved_for_backward(stacked, parts) / seeds


@pytest.mark.parametrize("name", MODELS)
def test_the_activation_estimate_errs_high_by_less_than_2x_against_a_real_step(name):
    config = MODELS[name]
    measured, estimate = measured_activation_bytes(config), activation_bytes(config)
    assert measured <= estimate <= WITHIN * measured, (name, estimate, measured)


def test_the_estimate_counts_the_models_parameters_and_its_longest_training_row():
    model = build_model(QUICKSTART.model, len(CharTokenizer()), 0, derive(QUICKSTART).input_layout)
    assert parameter_count(QUICKSTART) == count_parameters(model) == 115_456
    # "<s>" 4 digits "=" 5 answer digits "</s>": the quickstart's longest training row
    assert training_length(QUICKSTART) == 12
    assert seed_memory(QUICKSTART).state == STATE_COPIES * FLOAT32 * 115_456
    assert set(PER_FFN_WIDTHS) == set(FEED_FORWARDS)


def test_the_state_estimate_is_what_a_seed_batch_holds_per_seed_after_an_evaluation():
    config, seeds = MODELS["mini geglu rmsnorm"], 3
    stacked, parts = seed_batch(config, seeds)
    batch_step = SeedBatchStep(config, stacked, CPU)
    batch_step.update(0, parts, [True] * seeds)
    solo_optimizers = [TrainingStep(config, model, CPU).optimizer for model in stacked.models]
    for k, optimizer in enumerate(solo_optimizers):  # what an evaluation's checkpoint copies out
        stacked.to_solo(k)
        batch_step.to_solo(k, optimizer)
    held = [*stacked.params.values(), *(p.grad for p in stacked.params.values()),
            *(t for model in stacked.models for t in model.parameters())]
    for optimizer in [batch_step.optimizer, *solo_optimizers]:
        held += [t for state in optimizer.state.values() for t in state.values() if t.dim() > 0]
    storages = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in held}
    assert sum(storages.values()) == seeds * seed_memory(config).state
