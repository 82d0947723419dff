"""Exact arithmetic on digit arrays in any base.

Operands are numpy arrays of shape (questions, digits) holding one digit per
cell, least significant digit first. Working column by column keeps the
arithmetic exact at any length (a 200-digit operand is far past int64) while
staying vectorized over the questions.
"""

from __future__ import annotations

import numpy as np

DIGIT_DTYPE = np.int8


def add(a: np.ndarray, b: np.ndarray, base: int = 10) -> np.ndarray:
    """Column-wise schoolbook addition: (Q, n) + (Q, n) -> (Q, n + 1), LSD first."""
    if a.shape != b.shape:
        raise ValueError(f"operand shapes differ: {a.shape} vs {b.shape}")
    questions, n = a.shape
    total = np.zeros((questions, n + 1), dtype=DIGIT_DTYPE)
    carry = np.zeros(questions, dtype=np.int16)
    for column in range(n):
        column_sum = a[:, column].astype(np.int16) + b[:, column] + carry
        total[:, column] = column_sum % base
        carry = column_sum // base
    total[:, n] = carry
    return total


def multiply(a: np.ndarray, m: np.ndarray, base: int = 10) -> np.ndarray:
    """Schoolbook product of (Q, n) and (Q, k) digit arrays -> (Q, n + k), LSD first.

    Column sums of the partial products (at most k (base-1)^2 per column) are
    accumulated in int64, then one carry pass normalises them to digits."""
    questions, n = a.shape
    k = m.shape[1]
    columns = np.zeros((questions, n + k), dtype=np.int64)
    for j in range(k):
        columns[:, j : j + n] += m[:, j : j + 1].astype(np.int64) * a
    product = np.zeros((questions, n + k), dtype=DIGIT_DTYPE)
    carry = np.zeros(questions, dtype=np.int64)
    for column in range(n + k):
        value = columns[:, column] + carry
        product[:, column] = value % base
        carry = value // base
    return product


def to_int(digits: np.ndarray, base: int = 10) -> int:
    """One LSD-first digit row -> Python int (for tests and display)."""
    value = 0
    for d in digits[::-1]:
        value = value * base + int(d)
    return value


def from_int(value: int, n_digits: int, base: int = 10) -> np.ndarray:
    """Python int -> LSD-first digit row of exactly n_digits (zero-padded)."""
    if value < 0 or value >= base**n_digits:
        raise ValueError(f"{value} does not fit in {n_digits} non-negative base-{base} digits")
    row = np.zeros(n_digits, dtype=DIGIT_DTYPE)
    for i in range(n_digits):
        value, row[i] = divmod(value, base)
    return row


def from_ints(values: np.ndarray, n_digits: int, base: int = 10) -> np.ndarray:
    """(Q,) non-negative int64 values -> (Q, n_digits) LSD-first digits (zero-padded)."""
    powers = base ** np.arange(n_digits, dtype=np.int64)
    return ((values[:, None] // powers) % base).astype(DIGIT_DTYPE)


def uniform_digits(
    rng: np.random.Generator, questions: int, n_digits: int, base: int = 10, leading_zeros: bool = True
) -> np.ndarray:
    """Operands uniform over [0, base^n), every digit independent and uniform; with
    `leading_zeros=False`, uniform over the numbers of exactly n digits,
    [base^(n-1), base^n) (the most significant digit is drawn from 1..base-1; 000 §3.3
    counts base^L - base^(L-1) "numbers of length L", so a 1-digit number is 1..base-1)."""
    drawn = rng.integers(0, base, size=(questions, n_digits), dtype=DIGIT_DTYPE)
    if not leading_zeros and n_digits:
        drawn[:, -1] = rng.integers(1, base, size=questions, dtype=DIGIT_DTYPE)
    return drawn


def significant_digits(digits: np.ndarray) -> np.ndarray:
    """(Q, n) LSD-first -> (Q,) number of digits written without leading zeros (>= 1)."""
    nonzero = digits != 0
    highest = digits.shape[1] - 1 - np.argmax(nonzero[:, ::-1], axis=1)
    return np.where(nonzero.any(axis=1), highest + 1, 1)
