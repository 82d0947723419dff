"""Question complexity of 003 §4 and App. C.4: carry cascades and multiplication levels."""

import itertools
from collections import Counter

import numpy as np
import pytest

from lengthgen import digits
from lengthgen.complexity import (
    carry_cascade,
    cascade_probabilities,
    dependency_levels,
    sample_cascade_pairs,
)
from lengthgen.distributions import DISTRIBUTIONS
from lengthgen.tasks import TASKS


def cascade_of(a: int, b: int, n: int) -> int:
    return int(carry_cascade(digits.from_int(a, n)[None], digits.from_int(b, n)[None])[0])


@pytest.mark.parametrize(
    "a, b, n, expected",
    [
        (1234, 4321, 4, 0),  # no digit sum reaches 10
        (5, 5, 1, 1),  # a carry that propagates nowhere
        (15, 85, 2, 2),  # 5+5 carries into 1+8 = 9: one propagating position
        (9995, 5, 4, 4),  # 5+5, then 9, 9, 9: the cascade of 003 Fig. 1 (three stages after the first)
        (9095, 905, 4, 4),  # sums from the right: 10, 9, 9, 9 (the 9s need not be 9 + 0)
        (55, 55, 2, 1),  # two carries in a row are two cascades of length 1
        (4999, 5001, 4, 4),
        (491, 509, 3, 3),
    ],
)
def test_hand_made_examples(a, b, n, expected):
    assert cascade_of(a, b, n) == expected


def test_successor_cascade_counts_trailing_nines():
    successor = TASKS["successor"]()
    operands = (np.stack([digits.from_int(v, 4) for v in (1234, 1239, 1299, 9999, 9899, 9989)]),)
    assert successor.complexity(operands).tolist() == [0, 1, 2, 4, 2, 1]


def exact_cascade_distribution(n: int) -> dict[int, float]:
    """P(max cascade = k) for n uniform digit pairs, by enumerating the three classes
    of a digit sum: generate (>= 10, p = 45/100), propagate (= 9, 10/100), kill (45/100)."""
    probability = {"G": 0.45, "P": 0.10, "K": 0.45}
    sums = {"G": 10, "P": 9, "K": 0}
    distribution: Counter = Counter()
    for classes in itertools.product("GPK", repeat=n):
        row = np.array([[sums[c] for c in classes]])
        p = np.prod([probability[c] for c in classes])
        distribution[int(carry_cascade(row, np.zeros_like(row))[0])] += p
    return dict(distribution)


def test_five_digit_distribution_matches_appendix_c4():
    # App. C.4: "the probability of length 4 cascades in random 5 digit numbers is roughly 8.3e-4"
    exact = exact_cascade_distribution(5)
    assert exact[4] == pytest.approx(8.55e-4, rel=1e-3)
    assert exact[4] == pytest.approx(8.3e-4, rel=0.05)


def test_fifty_digit_mass_up_to_four_matches_appendix_c4():
    # App. C.4: "cascading carries up to length 4 covers 0.998 of the total probability"
    rng = np.random.default_rng(0)
    operands = TASKS["addition"]().sample_operands(rng, 200_000, 50)
    cascades = TASKS["addition"]().complexity(operands)
    assert np.mean(cascades <= 4) == pytest.approx(0.998, abs=0.0005)


def test_uniform_length_sampler_reproduces_the_exact_distribution():
    task = TASKS["addition"]()
    groups = DISTRIBUTIONS["uniform_length"]().sample(task, np.random.default_rng(3), 200_000, (5, 5))
    cascades = task.complexity(groups[5])
    exact = exact_cascade_distribution(5)
    for k in range(4):
        assert np.mean(cascades == k) == pytest.approx(exact[k], abs=0.004)


def test_table_probabilities_equal_the_enumerated_distribution():
    exact = exact_cascade_distribution(5)
    assert cascade_probabilities(5) == pytest.approx([exact.get(k, 0.0) for k in range(6)], abs=1e-12)


def test_built_questions_are_uniform_within_their_cascade_length():
    """Direct construction gives each question of a cascade length the probability
    rejection sampling would: compare the digit-sum classes of 3-digit questions."""
    classes = {"G": 10, "P": 9, "K": 0}
    probability = {"G": 0.45, "P": 0.10, "K": 0.45}
    for level in (1, 2):
        expected: Counter = Counter()
        for pattern in itertools.product("GPK", repeat=3):
            row = np.array([[classes[c] for c in pattern]])
            if carry_cascade(row, np.zeros_like(row))[0] == level:
                expected[pattern] += np.prod([probability[c] for c in pattern])
        total = sum(expected.values())
        a, b = sample_cascade_pairs(np.random.default_rng(level), np.full(20000, level), 3)
        sums = a.astype(int) + b
        got = Counter("".join("G" if s >= 10 else "P" if s == 9 else "K" for s in row) for row in sums)
        for pattern, p in expected.items():
            assert got["".join(pattern)] / 20000 == pytest.approx(p / total, abs=0.012)


def reference_levels(multiplicand: int, multiplier: int, n: int) -> int:
    """003 Fig. 3a with Python lists: products per position, then levels that keep
    each units digit and pass every higher digit to the position of its weight."""
    values = [multiplier * int(d) for d in str(multiplicand).zfill(n)[::-1]]
    values += [0] * (len(str(multiplier)) + 1)
    levels = 0
    while any(v >= 10 for v in values):
        levels += 1
        spread = [v % 10 for v in values]
        for i, v in enumerate(values):
            for shift, d in enumerate(str(v)[-2::-1], start=1):  # digits above the units
                spread[i + shift] += int(d)
        values = spread
    return levels


@pytest.mark.parametrize(
    "multiplicand, multiplier, n, expected",
    [
        (1234, 2, 4, 0),  # every product is one digit
        (12, 9, 2, 2),  # products 18, 9: 8 | 9+1 = 10 | 0, then 8 | 0 | 1
        (5, 5, 1, 1),  # 25: one level
        (111, 9, 3, 0),  # products 9, 9, 9 are digits already
        (95, 2, 2, 1),  # products 10, 18: 0 | 8+1 | 1 settles in one level
        (99, 99, 2, 2),  # 891, 891 | 1, 10, 17, 8 | 1, 0, 8, 9 = 9801
    ],
)
def test_dependency_levels_by_hand(multiplicand, multiplier, n, expected):
    k = len(str(multiplier))
    ours = dependency_levels(digits.from_int(multiplicand, n)[None], digits.from_int(multiplier, k)[None])
    assert int(ours[0]) == reference_levels(multiplicand, multiplier, n) == expected


def test_dependency_levels_equal_the_reference_for_multi_digit_multipliers():
    rng = np.random.default_rng(4)
    for k in (1, 2, 3):
        for _ in range(60):
            n = int(rng.integers(1, 12))
            a, m = int(rng.integers(0, 10**n)), int(rng.integers(10 ** (k - 1), 10**k))
            ours = dependency_levels(digits.from_int(a, n)[None], digits.from_int(m, k)[None])
            assert int(ours[0]) == reference_levels(a, m, n)


def test_five_digit_multiplicand_level_four_matches_appendix_c4():
    # App. C.4, Fig. 14b: "the probability of 4 is 1.9e-3" (multiplier uniform on 1..9)
    values = np.arange(10**5)
    multiplicands = np.tile(digits.from_ints(values, 5), (9, 1))
    multipliers = np.repeat(np.arange(1, 10), len(values))[:, None]
    levels = dependency_levels(multiplicands, multipliers)
    assert np.mean(levels == 4) == pytest.approx(1.9e-3, rel=0.01)


def test_twenty_digit_multiplicand_mass_up_to_four_matches_appendix_c4():
    # App. C.4, Fig. 14a: "up to length of 4 covers 99.8 percent of the distribution"
    task = TASKS["multiplication"]()
    operands = task.sample_operands(np.random.default_rng(0), 100_000, 20)
    assert np.mean(task.complexity(operands) <= 4) == pytest.approx(0.998, abs=0.0007)
