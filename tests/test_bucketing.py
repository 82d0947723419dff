"""Length bucketing (train.length_buckets): a batch trained as groups of rows of
consecutive lengths, each trimmed to its longest row, by gradient accumulation, has
the gradient of the padded batch, for every architecture, positional encoding and
position sampler; the split is optimal and covers every row once; training follows
the padded run; the default changes no trial id."""

from __future__ import annotations

import itertools
from dataclasses import replace

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from model_helpers import CPU, SEQUENTIAL_PES, tokenizer

from lengthgen import TrialConfig, train
from lengthgen.config import EvalConfig, FormatConfig, ModelConfig, TaskConfig, TrainConfig
from lengthgen.distributions import DISTRIBUTIONS
from lengthgen.model import build_model
from lengthgen.model.position.samplers import POSITION_SAMPLERS, build_position_sampler
from lengthgen.tasks import build_task
from lengthgen.training import (
    accumulate_gradients,
    batch_tensors,
    length_buckets,
    row_lengths,
    split_batch,
    training_batch,
)


def sequential_config(arch: str, pe: str, positions: str, **train) -> TrialConfig:
    """1-12 digit addition, reversed with index hints: rows of many lengths."""
    return TrialConfig(
        task=TaskConfig(name="addition", train_digits=(1, 12)),
        format=FormatConfig(index_hints=True),
        model=ModelConfig(arch=arch, pe=pe, positions=positions, max_positions=96),
        train=TrainConfig(batch_size=16, **train),
        eval=EvalConfig(digits=(3,), samples=4),
    )


def aligned_config(pe: str, positions: str) -> TrialConfig:
    return TrialConfig(
        task=TaskConfig(name="multiplication", train_digits=(1, 6)),
        format=FormatConfig(fixed_length=True, reverse=False, pad=False),
        model=ModelConfig(arch="encoder", pe=pe, positions=positions, max_positions=96),
        train=TrainConfig(batch_size=16),
        eval=EvalConfig(digits=(3,), samples=4),
    )


def gradients(model) -> list[torch.Tensor]:
    return [p.grad.clone() for p in model.parameters() if p.grad is not None]


def padded_and_bucketed(config: TrialConfig, groups=None):
    """(loss, gradients) of the padded batch and of its length buckets (or `groups`)."""
    torch.set_num_threads(1)
    task = build_task(config.task)
    batch = training_batch(config, task, DISTRIBUTIONS[config.data.distribution](), tokenizer, 0)
    model = build_model(config.model, len(tokenizer), 0, config.input_layout)
    tensors = batch_tensors(batch, CPU)
    sampler = build_position_sampler(config.model)
    positions = model.sample_positions(
        tensors.tokens, tensors.prompt_lengths, sampler, torch.Generator().manual_seed(5), training=True
    )
    logits, targets = model.forward_batch(tensors, positions)
    padded = F.cross_entropy(logits, targets)
    padded.backward()
    padded_grads = gradients(model)
    model.zero_grad(set_to_none=True)
    lengths = row_lengths(batch.answer_mask)
    groups = groups or length_buckets(lengths, 3)
    parts = split_batch(model, tensors, positions, groups, lengths)
    bucketed = accumulate_gradients(model.forward_batch, parts, CPU, "fp32")
    return (padded.detach(), padded_grads), (bucketed, gradients(model)), parts


def assert_same_gradients(config: TrialConfig, groups=None) -> list:
    (padded, padded_grads), (bucketed, bucketed_grads), parts = padded_and_bucketed(config, groups)
    torch.testing.assert_close(bucketed, padded, rtol=1e-6, atol=1e-6)
    assert len(bucketed_grads) == len(padded_grads)
    for got, expected in zip(bucketed_grads, padded_grads, strict=True):
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-7)
    return parts


@pytest.mark.parametrize("positions", sorted(POSITION_SAMPLERS))
@pytest.mark.parametrize("pe", SEQUENTIAL_PES)
def test_decoder_buckets_have_the_padded_gradient(pe, positions):
    parts = assert_same_gradients(sequential_config("decoder", pe, positions))
    assert len(parts) == 3
    assert len({part.tokens.shape[1] for part, _ in parts}) == 3  # trimmed to different widths


@pytest.mark.parametrize("positions", ["plain", "randomized"])
@pytest.mark.parametrize("pe", ["nope", "rope", "alibi", "t5", "fire", "kerple_log", "learned", "shaw"])
def test_encoder_decoder_buckets_have_the_padded_gradient(pe, positions):
    parts = assert_same_gradients(sequential_config("encoder_decoder", pe, positions))
    assert len(parts) == 3


def test_windowed_attention_bias_buckets_have_the_padded_gradient():
    config = sequential_config("decoder", "nope", "plain")
    config = replace(config, format=FormatConfig(interleave=True),
                     model=replace(config.model, attention_bias="windowed"))
    assert_same_gradients(config)


@pytest.mark.parametrize("pe", ["rope", "fire", "upe"])
def test_encoder_rows_have_one_width_and_any_row_groups_keep_the_gradient(pe):
    """The aligned layout has rows of one width: bucketing finds one group (a no-op);
    rows split by hand still accumulate to the padded gradient."""
    config = aligned_config(pe, "randomized")
    batch = training_batch(config, build_task(config.task), DISTRIBUTIONS["uniform_length"](), tokenizer, 0)
    assert len(length_buckets(row_lengths(batch.answer_mask), 3)) == 1
    assert_same_gradients(config, groups=[np.arange(0, 5), np.arange(5, 11), np.arange(11, 16)])


def padded_area(lengths: np.ndarray, groups: list[np.ndarray]) -> int:
    return sum(len(rows) * int(lengths[rows].max()) for rows in groups)


@pytest.mark.parametrize("buckets", [1, 2, 3, 4, 7, 50])
@pytest.mark.parametrize("seed", range(5))
def test_split_covers_every_row_once_in_contiguous_length_ranges(seed, buckets):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(3, 3 + rng.integers(1, 40), size=rng.integers(1, 64))
    groups = length_buckets(lengths, buckets)
    assert 1 <= len(groups) <= min(buckets, len(np.unique(lengths)))
    assert np.array_equal(np.sort(np.concatenate(groups)), np.arange(len(lengths)))
    ranges = [(lengths[rows].min(), lengths[rows].max()) for rows in groups]
    assert all(high < low for (_, high), (low, _) in itertools.pairwise(ranges))  # ordered, disjoint
    for rows, (low, high) in zip(groups, ranges, strict=True):  # every row of the range is in the group
        assert np.array_equal(rows, np.flatnonzero((lengths >= low) & (lengths <= high)))
    assert padded_area(lengths, groups) <= len(lengths) * lengths.max()


@pytest.mark.parametrize("seed", range(4))
def test_split_is_the_best_contiguous_partition(seed):
    """Against every split of the distinct lengths into at most 3 ranges."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 12, size=30)
    values = np.unique(lengths)
    best = min(
        padded_area(lengths, [np.flatnonzero((lengths >= values[a]) & (lengths <= values[b - 1]))
                              for a, b in itertools.pairwise((0, *cuts, len(values)))])
        for k in range(3) for cuts in itertools.combinations(range(1, len(values)), k)
    )
    assert padded_area(lengths, length_buckets(lengths, 3)) == best


def test_training_with_buckets_follows_the_padded_run():
    torch.set_num_threads(1)
    config = sequential_config("decoder", "fire", "randomized", steps=20, warmup=2, log_every=1, lr=3e-3)
    padded = train(config)
    bucketed = train(replace(config, train=replace(config.train, length_buckets=3)))
    assert [t.tokens for t in bucketed.train] == [t.tokens for t in padded.train]
    np.testing.assert_allclose([t.loss for t in bucketed.train], [t.loss for t in padded.train], rtol=1e-4)


def test_length_buckets_is_validated_and_keeps_default_ids():
    with pytest.raises(ValueError, match="train.length_buckets must be >= 1"):
        TrainConfig(length_buckets=0)
    assert TrialConfig().trial_id == "44136fa355b3"  # tests/test_config_identity.py
    assert TrialConfig(train=TrainConfig(length_buckets=1)).trial_id == TrialConfig().trial_id
    assert TrialConfig(train=TrainConfig(length_buckets=4)).trial_id != TrialConfig().trial_id
