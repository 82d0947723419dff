"""The task interface: operands in, exact answer and complexity out.

A question of length n has operands in written order, each a (Q, digits) array of
base-`base` digits, least significant digit first. Operands marked in `scales`
have n digits (the lengths that training and evaluation vary); the others have a
fixed length (the single digit of N x 1, the k-digit multiplier of 003 §3.2).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from lengthgen import digits

if TYPE_CHECKING:
    from lengthgen.config import TaskConfig

#: operands of one question batch in written order, each (Q, digits) LSD first
Operands = tuple[np.ndarray, ...]


class Task(ABC):
    """An arithmetic task; every method that draws takes an explicit numpy Generator
    and uses only it, so the caller's seed fully decides the questions."""

    name: ClassVar[str]
    #: digit base of operands and answer (2 for parity)
    base: ClassVar[int] = 10
    #: symbol written between operands in the question
    operator: ClassVar[str] = ""
    #: per operand in written order: True when it has the question's length n
    scales: ClassVar[tuple[bool, ...]]
    #: TaskConfig fields (besides name and train_digits) the task reads; set for a task
    #: that does not read them they are refused (lengthgen.config.refuse_unread_options),
    #: so two configs of the same science share a trial id
    options: ClassVar[tuple[str, ...]] = ()
    #: answers shift with the operands when zeros are appended to the scaled operands
    #: (003 A3, M3: the premise of the shift-by-zeros augmentation)
    shift_equivariant: ClassVar[bool] = False
    #: `sample_with_complexity` can build questions of any possible complexity
    constructible_complexity: ClassVar[bool] = False
    #: the answer is a number (written without leading zeros when format.pad is false);
    #: parity's scratchpad is a sequence and always keeps all its digits
    answer_is_number: ClassVar[bool] = True

    @classmethod
    def from_config(cls, cfg: TaskConfig) -> Task:
        return cls()

    @property
    def n_operands(self) -> int:
        return len(self.scales)

    def fixed_digits(self) -> tuple[int, ...]:
        """Lengths of the operands that do not scale, in written order."""
        return ()

    def operand_digits(self, n: int) -> tuple[int, ...]:
        """Length of each operand of an n-digit question, in written order."""
        fixed = iter(self.fixed_digits())
        return tuple(n if scaled else next(fixed) for scaled in self.scales)

    @abstractmethod
    def answer_digits(self, n):
        """Length of the zero-padded answer to an n-digit question (int or int array)."""

    def sample_fixed(self, rng: np.random.Generator, questions: int) -> list[np.ndarray]:
        """The operands that do not scale, in written order (none by default)."""
        return []

    def assemble(self, scaled: list[np.ndarray], rng: np.random.Generator) -> Operands:
        """Written-order operands from the scaled ones, drawing the fixed ones."""
        questions = len(scaled[0])
        scaled_it, fixed_it = iter(scaled), iter(self.sample_fixed(rng, questions))
        return tuple(next(scaled_it) if s else next(fixed_it) for s in self.scales)

    def scaled(self, operands: Operands) -> list[np.ndarray]:
        return [operand for operand, s in zip(operands, self.scales) if s]

    def sample_operands(
        self, rng: np.random.Generator, questions: int, n_digits: int, leading_zeros: bool = True
    ) -> Operands:
        """Scaled operands uniform over [0, base^n) (with `leading_zeros=False`, over the
        numbers of exactly n digits; lengthgen.digits.uniform_digits)."""
        scaled = [
            digits.uniform_digits(rng, questions, n_digits, self.base, leading_zeros)
            for _ in range(sum(self.scales))
        ]
        return self.assemble(scaled, rng)

    @abstractmethod
    def solve(self, operands: Operands) -> np.ndarray:
        """Operands -> (Q, answer_digits(n)) LSD-first exact answers."""

    @abstractmethod
    def complexity(self, operands: Operands) -> np.ndarray:
        """(Q,) complexity of each question (the carry-cascade length for sums)."""

    def complexity_levels(self, n_digits: int, leading_zeros: bool = True) -> np.ndarray:
        """Complexities that n-digit questions can have (constructible tasks only)."""
        raise NotImplementedError(f"{self.name} cannot build questions of a chosen complexity")

    def sample_with_complexity(
        self, rng: np.random.Generator, levels: np.ndarray, n_digits: int, leading_zeros: bool = True
    ) -> Operands:
        """n-digit questions whose complexity is exactly levels[q], each equally likely
        among the questions of that complexity (constructible tasks only)."""
        raise NotImplementedError(f"{self.name} cannot build questions of a chosen complexity")
