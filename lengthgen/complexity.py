"""Question complexity (003, Sabbaghi et al. 2024, §4 and App. C.4), and sampling
questions of a chosen complexity.

Addition, 003 §4 (C1) and App. C.4: the output digit at position i depends on
earlier positions only while the carry into i is unknown. A carry is *generated*
where a_j + b_j >= base and *propagates* through each following position whose
digit sum is exactly base - 1. A cascade's length is 1 (the generating position)
plus the number of consecutive propagating positions after it; a question's
complexity is the longest cascade in it, and 0 when no carry is generated at all.
Reproduces App. C.4: for 5-digit sums P(length 4) ~ 8.5e-4 ("roughly 8.3e-4"), and
for 50-digit sums lengths <= 4 hold 0.998 of the mass (tests/test_complexity.py).

Multiplication, 003 App. C.4 and Fig. 3a: the parallel algorithm first puts the
product of the whole multiplier with each multiplicand digit at that digit's
position (level 0), then, level by level and in parallel, every position keeps its
units digit and passes each higher digit of its value on to the position of that
weight. The dependency of a question is the number of levels after the products
until every position holds a single digit (0 when every product already is one).
Choice where the paper is silent: a multi-digit value v at position i sends its
digit of weight base^t to position i + t ("carries jump to at most 3 latter
positions for a 3-digit multiplier", 003 App. C.3); for a one-digit multiplier this
is the plain carry to the next position. Counting the levels after the products
reproduces App. C.4 exactly, for a multiplier uniform on 1..9: P(4) = 1.90e-3 for a
5-digit multiplicand, and levels <= 4 hold 0.998 of the mass for a 20-digit one
(counting the product level too would give P(4) = 3.4e-2).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from lengthgen.digits import DIGIT_DTYPE

# Digit-pair classes of addition (003 §4): generate, propagate, kill.
GENERATE, PROPAGATE, KILL = 0, 1, 2


def carry_cascade(a: np.ndarray, b: np.ndarray, base: int = 10) -> np.ndarray:
    """Longest carry cascade per question; a, b are (Q, n) LSD-first digit arrays."""
    digit_sums = a.astype(np.int16) + b
    running = np.zeros(len(digit_sums), dtype=np.int64)
    longest = np.zeros(len(digit_sums), dtype=np.int64)
    for column in range(digit_sums.shape[1]):
        column_sum = digit_sums[:, column]
        running = np.where(
            column_sum >= base,
            1,
            np.where((column_sum == base - 1) & (running > 0), running + 1, 0),
        )
        np.maximum(longest, running, out=longest)
    return longest


def dependency_levels(multiplicand: np.ndarray, multiplier: np.ndarray, base: int = 10) -> np.ndarray:
    """(Q,) dependency level of multiplicand (Q, N) x multiplier (Q, k), both LSD first
    (003 App. C.4, Fig. 3a; see the module docstring)."""
    questions, n = multiplicand.shape
    k = multiplier.shape[1]
    factor = multiplier.astype(np.int64) @ (base ** np.arange(k, dtype=np.int64))  # (Q,)
    values = np.zeros((questions, n + k), dtype=np.int64)
    values[:, :n] = factor[:, None] * multiplicand  # level 0: one product per position
    levels = np.zeros(questions, dtype=np.int64)
    while True:
        unsettled = (values >= base).any(axis=1)
        if not unsettled.any():
            return levels
        levels += unsettled
        spread = values % base
        rest = values // base
        shift = 1
        while rest.any():  # the digit of weight base^shift moves `shift` positions up
            spread[:, shift:] += (rest % base)[:, :-shift]
            rest //= base
            shift += 1
        values = spread


@lru_cache(maxsize=8)
def _pair_table(base: int, leading: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Digit pairs (a, b) by class: (3, P) a-digits, (3, P) b-digits, (3,) counts.
    `leading`: the most significant position of numbers without leading zeros."""
    low = 1 if leading else 0
    a, b = np.meshgrid(np.arange(low, base), np.arange(low, base), indexing="ij")
    a, b = a.ravel(), b.ravel()
    classes = np.where(a + b >= base, GENERATE, np.where(a + b == base - 1, PROPAGATE, KILL))
    width = len(a)
    a_table = np.zeros((3, width), dtype=DIGIT_DTYPE)
    b_table = np.zeros((3, width), dtype=DIGIT_DTYPE)
    counts = np.zeros(3, dtype=np.int64)
    for c in (GENERATE, PROPAGATE, KILL):
        chosen = classes == c
        counts[c] = chosen.sum()
        a_table[c, : counts[c]], b_table[c, : counts[c]] = a[chosen], b[chosen]
    return a_table, b_table, counts


def _transition(cls: int, running: np.ndarray) -> np.ndarray:
    """Running cascade length after a position of class `cls`."""
    if cls == GENERATE:
        return np.ones_like(running)
    if cls == PROPAGATE:
        return np.where(running > 0, running + 1, 0)
    return np.zeros_like(running)


#: longest question that `sample_cascade_pairs` builds: its tables take (n + 1)^3 * 16
#: bytes per length (4.4 MB at 64 digits) and are kept for reuse
MAX_CASCADE_DIGITS = 64


@lru_cache(maxsize=MAX_CASCADE_DIGITS)
def _cascade_tables(n: int, base: int, leading_zeros: bool) -> tuple[np.ndarray, np.ndarray]:
    """Backward table V[c, i, r, f]: probability, under uniform digit pairs at positions
    i..n-1, that a question whose prefix ends in a running cascade r (with f = whether
    a cascade of length c was already seen) ends with longest cascade exactly c.
    Returns (V, class probabilities (n, 3) per position)."""
    _, _, counts = _pair_table(base, leading=False)
    _, _, top_counts = _pair_table(base, leading=True)
    class_p = np.tile(counts / counts.sum(), (n, 1))
    if not leading_zeros:
        class_p[n - 1] = top_counts / top_counts.sum()
    size = n + 1
    level = np.arange(size)[:, None, None]  # c
    running = np.arange(size)[None, :, None]  # r
    seen = np.array([False, True])[None, None, :]  # f
    table = np.zeros((size, size, size, 2))
    table[:, n, :, 1] = 1.0
    for i in range(n - 1, -1, -1):
        total = np.zeros((size, size, 2))
        for cls in (GENERATE, PROPAGATE, KILL):
            after = np.broadcast_to(_transition(cls, running), (size, size, 2))
            valid = after <= level
            now_seen = (seen | (after == level)).astype(np.int64)
            following = table[level, i + 1, np.minimum(after, n), now_seen]
            total += class_p[i, cls] * np.where(valid, following, 0.0)
        table[:, i] = total
    return table, class_p


def cascade_levels(n: int, base: int = 10, leading_zeros: bool = True) -> np.ndarray:
    """Longest-cascade lengths that n-digit sums can have (all of 0..n)."""
    table, _ = _cascade_tables(n, base, leading_zeros)
    start_seen = (np.arange(n + 1) == 0).astype(np.int64)
    return np.flatnonzero(table[np.arange(n + 1), 0, 0, start_seen] > 0)


def cascade_probabilities(n: int, base: int = 10, leading_zeros: bool = True) -> np.ndarray:
    """(n + 1,) exact P(longest cascade = c) for uniform n-digit operand pairs."""
    table, _ = _cascade_tables(n, base, leading_zeros)
    start_seen = (np.arange(n + 1) == 0).astype(np.int64)
    return table[np.arange(n + 1), 0, 0, start_seen]


def sample_cascade_pairs(
    rng: np.random.Generator, cascades: np.ndarray, n: int, base: int = 10, leading_zeros: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """Operand pairs (Q, n), (Q, n) whose longest carry cascade is exactly `cascades[q]`.

    Built directly, position by position, from the backward table of
    `_cascade_tables`: each position's pair class (generate / propagate / kill) is
    drawn with its probability conditioned on reaching exactly the requested
    cascade, then the pair is uniform within its class. Every question with that
    cascade length is therefore equally likely, as rejection sampling from uniform
    pairs would give, without the rejections (a 40-digit cascade of 40 has
    probability 0.45 * 0.1^39)."""
    table, class_p = _cascade_tables(n, base, leading_zeros)
    questions = len(cascades)
    possible = (cascades >= 0) & (cascades <= n)
    if not (possible.all() and np.all(table[cascades, 0, 0, (cascades == 0).astype(np.int64)] > 0)):
        raise ValueError(f"cascade lengths must be in {cascade_levels(n, base, leading_zeros).tolist()}")
    rows = np.arange(questions)
    running = np.zeros(questions, dtype=np.int64)
    seen = cascades == 0
    classes = np.zeros((questions, n), dtype=np.int64)
    after = np.zeros((3, questions), dtype=np.int64)  # running length after each class
    after[GENERATE] = 1
    draws = rng.random((n, questions))
    for i in range(n):
        after[PROPAGATE] = np.where(running > 0, running + 1, 0)
        now_seen = seen | (after == cascades)
        following = table[cascades, i + 1, np.minimum(after, n), now_seen.astype(np.int64)]  # (3, Q)
        weights = class_p[i][:, None] * np.where(after <= cascades, following, 0.0)
        cumulative = np.cumsum(weights, axis=0)
        chosen = np.minimum((draws[i] * cumulative[-1] >= cumulative).sum(axis=0), 2)
        classes[:, i] = chosen
        running, seen = after[chosen, rows], now_seen[chosen, rows]
    a = np.zeros((questions, n), dtype=DIGIT_DTYPE)
    b = np.zeros((questions, n), dtype=DIGIT_DTYPE)
    pick = rng.random((questions, n))
    regular = n if leading_zeros else n - 1
    for columns, leading in ((slice(0, regular), False), (slice(regular, n), True)):
        a_table, b_table, counts = _pair_table(base, leading)
        cls = classes[:, columns]
        index = (pick[:, columns] * counts[cls]).astype(np.int64)
        a[:, columns], b[:, columns] = a_table[cls, index], b_table[cls, index]
    return a, b
