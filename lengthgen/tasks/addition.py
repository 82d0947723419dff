"""Addition of two n-digit operands (000 §3.1, 001 §2 and App. E.1, 003 §3.1).

Example, n = 3, reversed answer (000 §3.2, 001 App. B): "<s>085+050=5310</s>" is
085 + 050 = 0135, the answer zero-padded to n + 1 digits and written least
significant digit first. Complexity: the longest carry cascade (003 §4, App. C.4;
lengthgen.complexity), which `sample_with_complexity` builds directly.
"""

from __future__ import annotations

from lengthgen import digits
from lengthgen.complexity import carry_cascade, cascade_levels, sample_cascade_pairs
from lengthgen.tasks.base import Task


class Addition(Task):
    name = "addition"
    operator = "+"
    scales = (True, True)
    shift_equivariant = True
    constructible_complexity = True

    def answer_digits(self, n):
        return n + 1

    def solve(self, operands):
        return digits.add(operands[0], operands[1], self.base)

    def complexity(self, operands):
        return carry_cascade(operands[0], operands[1], self.base)

    def complexity_levels(self, n_digits, leading_zeros=True):
        return cascade_levels(n_digits, self.base, leading_zeros)

    def sample_with_complexity(self, rng, levels, n_digits, leading_zeros=True):
        return sample_cascade_pairs(rng, levels, n_digits, self.base, leading_zeros)
