"""Training distributions that draw each operand's length: independent_lengths (Cho et
al. 2024's AdditionDataset) and length_pairs (McLeish et al. 2024's bucket method),
checked against the rules of the authors' samplers."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from lengthgen import TrialConfig, digits
from lengthgen.config import DataConfig, FormatConfig, TaskConfig
from lengthgen.distributions import DISTRIBUTIONS
from lengthgen.formats import encode_questions
from lengthgen.tasks import TASKS
from lengthgen.tokenizer import CharTokenizer

ADDITION = TASKS["addition"]()


def drawn_lengths(groups) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(Q, 2) lengths of the operands as written without padding, (Q,) the group each
    question was put in, (Q, 2) the operands' values."""
    lengths, longest, values = [], [], []
    for n, operands in groups.items():
        lengths.append(np.stack([digits.significant_digits(o) for o in operands], axis=1))
        longest.append(np.full(len(operands[0]), n))
        values.append(np.stack([[digits.to_int(r) for r in o] for o in operands], axis=1))
    return np.concatenate(lengths), np.concatenate(longest), np.concatenate(values)


def pair_counts(lengths: np.ndarray, low: int, high: int) -> np.ndarray:
    span = high - low + 1
    return np.bincount((lengths[:, 0] - low) * span + lengths[:, 1] - low, minlength=span * span)


def test_independent_lengths_draws_each_operand_length_uniformly_and_independently():
    groups = DISTRIBUTIONS["independent_lengths"]().sample(ADDITION, np.random.default_rng(0), 20_000, (1, 5))
    lengths, longest, values = drawn_lengths(groups)
    assert (longest == lengths.max(axis=1)).all()  # the question's length is the longer operand's
    counts = pair_counts(lengths, 1, 5)  # 25 pairs, each 1/25: uniform and independent
    assert stats.chisquare(counts).pvalue > 1e-3
    one_digit = values[lengths == 1]
    assert set(one_digit) == set(range(10))  # 0..9 at one digit, as torch.randint(0, 10)
    for n in (2, 5):  # the leading digit of an n-digit operand is 1..9, uniform
        leading = values[lengths == n] // 10 ** (n - 1)
        assert set(leading) == set(range(1, 10))
        assert stats.chisquare(np.bincount(leading, minlength=10)[1:]).pvalue > 1e-3


def test_length_pairs_balances_every_batch_over_the_pairs():
    distribution, rng = DISTRIBUTIONS["length_pairs"](), np.random.default_rng(1)
    totals = np.zeros(16, dtype=int)
    for _ in range(200):
        groups = distribution.sample(ADDITION, rng, 100, (1, 4))
        lengths, longest, values = drawn_lengths(groups)
        counts = pair_counts(lengths, 1, 4)
        assert counts.sum() == 100 and set(counts) <= {6, 7}  # 100 = 16 * 6 + 4
        assert (longest == lengths.max(axis=1)).all()
        assert (values[lengths == 1] > 0).all()  # 1..9 at one digit (keep_0_for_len_1 off)
        totals += counts
    assert stats.chisquare(totals).pvalue > 1e-3  # the leftover questions land at random pairs


def test_the_shorter_operand_is_zero_padded_with_pad_and_unpadded_without():
    tokenizer, rng = CharTokenizer(), np.random.default_rng(2)
    operands = (np.array([[1, 2, 3]], dtype=digits.DIGIT_DTYPE), np.array([[4, 0, 0]], dtype=digits.DIGIT_DTYPE))
    written = {}
    for pad in (True, False):
        fmt = TrialConfig(format=FormatConfig(pad=pad, reverse=False)).format
        encoded = encode_questions(ADDITION, operands, fmt, tokenizer, rng)
        written[pad] = tokenizer.decode(encoded.tokens[0].tolist())
    assert "321+004=" in written[True] and "321+4=" in written[False]


@pytest.mark.parametrize("name", ["independent_lengths", "length_pairs"])
def test_a_task_with_one_operand_of_the_question_length_is_refused(name):
    with pytest.raises(ValueError, match=f"data.distribution {name} draws the lengths of several operands"):
        TrialConfig(task=TaskConfig(name="successor", train_digits=(1, 3)), data=DataConfig(distribution=name))
    TrialConfig(task=TaskConfig(name="addition", train_digits=(1, 3)), data=DataConfig(distribution=name))
