"""Exact decimal arithmetic on digit arrays.

Operands are numpy arrays of shape (questions, digits) holding one decimal digit
per cell, least significant digit first. Working column by column keeps the
arithmetic exact at any length (a 200-digit operand is far past int64) while
staying vectorized over the questions.
"""

from __future__ import annotations

import numpy as np

DIGIT_DTYPE = np.int8


def add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Column-wise schoolbook addition: (Q, n) + (Q, n) -> (Q, n + 1), LSD first."""
    if a.shape != b.shape:
        raise ValueError(f"operand shapes differ: {a.shape} vs {b.shape}")
    questions, n = a.shape
    total = np.zeros((questions, n + 1), dtype=DIGIT_DTYPE)
    carry = np.zeros(questions, dtype=np.int16)
    for column in range(n):
        column_sum = a[:, column].astype(np.int16) + b[:, column] + carry
        total[:, column] = column_sum % 10
        carry = column_sum // 10
    total[:, n] = carry
    return total


def to_int(digits: np.ndarray) -> int:
    """One LSD-first digit row -> Python int (for tests and display)."""
    return int("".join(str(int(d)) for d in digits[::-1]) or "0")


def from_int(value: int, n_digits: int) -> np.ndarray:
    """Python int -> LSD-first digit row of exactly n_digits (zero-padded)."""
    text = str(value)
    if value < 0 or len(text) > n_digits:
        raise ValueError(f"{value} does not fit in {n_digits} non-negative digits")
    return np.array([int(c) for c in text.zfill(n_digits)[::-1]], dtype=DIGIT_DTYPE)


def uniform_digits(rng: np.random.Generator, questions: int, n_digits: int) -> np.ndarray:
    """Operands uniform over [0, 10^n): every digit independent and uniform."""
    return rng.integers(0, 10, size=(questions, n_digits), dtype=DIGIT_DTYPE)
