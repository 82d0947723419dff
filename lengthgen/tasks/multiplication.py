"""Multiplication by a short multiplier: N x 1 (000 §3.1) and k-digit x N-digit (003 §3.2).

N x 1, 000 §3.1: y = x_1 * x_2 with x_2 in {0, ..., 9}, written as the "natural
expression" 0123*6 (000 App. A.4). Example, n = 4, reversed answer:
"<s>0123*6=83700</s>" is 0123 * 6 = 00738, the answer zero-padded to n + 1 digits.

Multiplication, 003 §3.2 and eq. 3.2: a k-digit multiplier (task.multiplier_digits)
written first, then the N-digit multiplicand whose length varies: "56 x 4297 =
240632". Example, k = 2, N = 4, reversed answer: "<s>56*4297=236042</s>"; the answer
has N + k digits. Choice where the paper is silent: the multiplier is uniform over
the k-digit numbers [10^(k-1), 10^k) ("the multiplier is not padded"; for k = 1
this is 1..9, the multiplier of App. C.4).

Complexity of both: the dependency level of 003 App. C.4 / Fig. 3a
(lengthgen.complexity.dependency_levels).
"""

from __future__ import annotations

from lengthgen import digits
from lengthgen.complexity import dependency_levels
from lengthgen.tasks.base import Task


class NBy1(Task):
    name = "n_by_1"
    operator = "*"
    scales = (True, False)
    shift_equivariant = True

    def fixed_digits(self):
        return (1,)

    def answer_digits(self, n):
        return n + 1

    def sample_fixed(self, rng, questions):
        return [digits.uniform_digits(rng, questions, 1, self.base)]

    def solve(self, operands):
        return digits.multiply(operands[0], operands[1], self.base)

    def complexity(self, operands):
        return dependency_levels(operands[0], operands[1], self.base)


class Multiplication(Task):
    name = "multiplication"
    operator = "*"
    scales = (False, True)
    options = ("multiplier_digits",)
    shift_equivariant = True

    def __init__(self, multiplier_digits: int = 1) -> None:
        self.multiplier_digits = multiplier_digits

    @classmethod
    def from_config(cls, cfg):
        return cls(cfg.multiplier_digits)

    def fixed_digits(self):
        return (self.multiplier_digits,)

    def answer_digits(self, n):
        return n + self.multiplier_digits

    def sample_fixed(self, rng, questions):
        return [digits.uniform_digits(rng, questions, self.multiplier_digits, self.base, leading_zeros=False)]

    def solve(self, operands):
        return digits.multiply(operands[1], operands[0], self.base)

    def complexity(self, operands):
        return dependency_levels(operands[1], operands[0], self.base)
