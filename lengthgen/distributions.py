"""Training distributions: which questions a training batch holds.

Each distribution draws with the numpy Generator it is given and nothing else;
the trainer seeds that Generator from `seeds.data` and the step number only.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar

import numpy as np

from lengthgen.tasks import Task


class Distribution(ABC):
    name: ClassVar[str]

    @abstractmethod
    def sample(
        self, task: Task, rng: np.random.Generator, questions: int, digit_range: tuple[int, int]
    ) -> dict[int, np.ndarray]:
        """Operands for `questions` questions, grouped by operand length n:
        {n: (Q_n, n_operands, n) LSD-first digits}, the Q_n summing to `questions`."""


class UniformLength(Distribution):
    """001 App. E.1: the operand length is drawn uniformly from the training range,
    then both operands of that length with every digit uniform (zero-padded, so a
    leading zero is allowed: the operands are uniform over [0, 10^n))."""

    name = "uniform_length"

    def sample(self, task, rng, questions, digit_range):
        low, high = digit_range
        lengths = rng.integers(low, high + 1, size=questions)
        counts = np.bincount(lengths, minlength=high + 1)
        return {
            int(n): task.sample_operands(rng, int(counts[n]), int(n))
            for n in range(low, high + 1)
            if counts[n]
        }


DISTRIBUTIONS: dict[str, type[Distribution]] = {d.name: d for d in (UniformLength,)}
