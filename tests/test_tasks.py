"""Labels come from exact integer arithmetic, at any length."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from lengthgen import digits
from lengthgen.tasks import TASKS


@st.composite
def operand_pairs(draw):
    n = draw(st.integers(1, 200))
    a = draw(st.integers(0, 10**n - 1))
    b = draw(st.integers(0, 10**n - 1))
    return n, a, b


@given(operand_pairs())
@settings(max_examples=200, deadline=None)
def test_addition_equals_integer_sum(case):
    n, a, b = case
    operands = np.stack([digits.from_int(a, n), digits.from_int(b, n)])[None]  # (1, 2, n)
    answer = TASKS["addition"]().solve(operands)
    assert answer.shape == (1, n + 1)
    assert digits.to_int(answer[0]) == a + b


@given(operand_pairs())
@settings(max_examples=200, deadline=None)
def test_successor_equals_integer_plus_one(case):
    n, a, _ = case
    answer = TASKS["successor"]().solve(digits.from_int(a, n)[None, None])
    assert digits.to_int(answer[0]) == a + 1


@given(st.integers(1, 200), st.data())
@settings(max_examples=50, deadline=None)
def test_digit_round_trip(n, data):
    value = data.draw(st.integers(0, 10**n - 1))
    assert digits.to_int(digits.from_int(value, n)) == value


def test_batch_of_200_digit_sums_matches_python_ints():
    rng = np.random.default_rng(0)
    operands = TASKS["addition"]().sample_operands(rng, 64, 200)
    answers = TASKS["addition"]().solve(operands)
    for row, answer in zip(operands, answers):
        assert digits.to_int(answer) == digits.to_int(row[0]) + digits.to_int(row[1])


def test_sampled_operands_use_every_digit_uniformly():
    rng = np.random.default_rng(1)
    operands = TASKS["addition"]().sample_operands(rng, 20000, 3)
    counts = np.bincount(operands.ravel(), minlength=10) / operands.size
    assert np.allclose(counts, 0.1, atol=0.01)
