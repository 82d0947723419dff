"""Successor: n -> n + 1 (000 §3.1).

Example with reverse=True, n=3: "BOS 1 9 9 = 0 0 2 0 EOS" is 199 + 1 = 0200, answer
least significant digit first. Its complexity is the carry cascade of n + 1, i.e.
one plus the run of 9s above a trailing 9 (0 when the last digit is not 9).
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
    n_operands = 1

    def solve(self, operands: np.ndarray) -> np.ndarray:
        return digits.add(operands[:, 0], _one_like(operands[:, 0]))

    def complexity(self, operands: np.ndarray) -> np.ndarray:
        return carry_cascade(operands[:, 0], _one_like(operands[:, 0]))
