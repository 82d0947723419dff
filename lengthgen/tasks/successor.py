"""Successor: x -> x + 1 (000 §3.1).

Example, n = 3, reversed answer: "<s>199=0020</s>" is 199 + 1 = 0200, the answer
zero-padded to n + 1 digits and written least significant digit first. Complexity:
the carry cascade of x + 1 (003 §4), i.e. the number of trailing 9s (the last
digit generates, every 9 above it propagates); `sample_with_complexity` builds it
directly: c trailing 9s, then a digit other than 9, the rest uniform.
"""

from __future__ import annotations

import numpy as np

from lengthgen import digits
from lengthgen.complexity import carry_cascade
from lengthgen.tasks.base import Task


def _one_like(operand: np.ndarray) -> np.ndarray:
    one = np.zeros_like(operand)
    one[:, 0] = 1
    return one


class Successor(Task):
    name = "successor"
    scales = (True,)
    constructible_complexity = True

    def answer_digits(self, n):
        return n + 1

    def solve(self, operands):
        return digits.add(operands[0], _one_like(operands[0]), self.base)

    def complexity(self, operands):
        return carry_cascade(operands[0], _one_like(operands[0]), self.base)

    def complexity_levels(self, n_digits, leading_zeros=True):
        return np.arange(n_digits + 1)

    def sample_with_complexity(self, rng, levels, n_digits, leading_zeros=True):
        top = self.base - 1
        x = digits.uniform_digits(rng, len(levels), n_digits, self.base, leading_zeros)
        column = np.arange(n_digits)[None, :]
        # the digit that stops the run: any digit but the largest (and not 0 on top
        # when numbers have no leading zeros)
        stop_low = np.where((levels == n_digits - 1) & (not leading_zeros), 1, 0)
        stop = rng.integers(stop_low, top, dtype=np.int64)
        x = np.where(column < levels[:, None], top, x)
        x = np.where(column == levels[:, None], stop[:, None], x)
        return (x.astype(digits.DIGIT_DTYPE),)
