"""The carry-cascade length of 003 §4 and App. C.4."""

import itertools
from collections import Counter

import numpy as np
import pytest

from lengthgen import digits
from lengthgen.complexity import carry_cascade
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
    operands = np.stack([digits.from_int(v, 4) for v in (1234, 1239, 1299, 9999, 9899, 9989)])[:, None]
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
