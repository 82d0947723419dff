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
from model_helpers import SEQUENTIAL_PES, assert_same_gradients, batch_of

from lengthgen import TrialConfig, train
from lengthgen.batches import length_buckets, row_lengths
from lengthgen.config import EvalConfig, FormatConfig, ModelConfig, TaskConfig, TrainConfig
from lengthgen.model.position.samplers import POSITION_SAMPLERS


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


@pytest.mark.parametrize("positions", sorted(POSITION_SAMPLERS))
@pytest.mark.parametrize("pe", SEQUENTIAL_PES)
def test_decoder_buckets_have_the_padded_gradient(pe, positions):
    parts, _ = assert_same_gradients(sequential_config("decoder", pe, positions))
    assert len(parts) == 3
    assert len({part.tokens.shape[1] for part, _ in parts}) == 3  # trimmed to different widths


@pytest.mark.parametrize("positions", ["plain", "randomized"])
@pytest.mark.parametrize("pe", ["nope", "rope", "alibi", "t5", "fire", "kerple_log", "learned", "shaw"])
def test_encoder_decoder_buckets_have_the_padded_gradient(pe, positions):
    parts, _ = assert_same_gradients(sequential_config("encoder_decoder", pe, positions))
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
    assert len(length_buckets(row_lengths(batch_of(config).answer_mask), 3)) == 1
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
