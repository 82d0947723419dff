"""The task interface: operands in, exact answer and complexity out."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar

import numpy as np

from lengthgen import digits


class Task(ABC):
    """An arithmetic task over zero-padded n-digit decimal operands.

    Every method that draws takes an explicit numpy Generator and uses only it,
    so the caller's seed fully decides the questions.
    """

    name: ClassVar[str]
    n_operands: ClassVar[int]
    #: symbol written between operands in the question
    operator: ClassVar[str] = ""

    def sample_operands(self, rng: np.random.Generator, questions: int, n_digits: int) -> np.ndarray:
        """(Q, n_operands, n_digits) LSD-first digits, each digit uniform."""
        return np.stack(
            [digits.uniform_digits(rng, questions, n_digits) for _ in range(self.n_operands)],
            axis=1,
        )

    def answer_digits(self, n_digits: int) -> int:
        """Length of the zero-padded answer to an n-digit question."""
        return n_digits + 1

    @abstractmethod
    def solve(self, operands: np.ndarray) -> np.ndarray:
        """(Q, n_operands, n) -> (Q, answer_digits(n)) LSD-first exact answers."""

    @abstractmethod
    def complexity(self, operands: np.ndarray) -> np.ndarray:
        """(Q,) complexity of each question (the carry-cascade length for sums)."""
