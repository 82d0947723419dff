"""Decimal addition of two n-digit operands (001 §2, 003 §3.1).

Example with reverse=True, n=3: "BOS 0 8 5 + 0 5 0 = 5 3 1 0 EOS" is 085 + 050 = 0135,
its answer written least significant digit first.
"""

from __future__ import annotations

import numpy as np

from lengthgen import digits
from lengthgen.complexity import carry_cascade
from lengthgen.tasks.base import Task


class Addition(Task):
    name = "addition"
    n_operands = 2
    operator = "+"

    def solve(self, operands: np.ndarray) -> np.ndarray:
        return digits.add(operands[:, 0], operands[:, 1])

    def complexity(self, operands: np.ndarray) -> np.ndarray:
        return carry_cascade(operands[:, 0], operands[:, 1])
