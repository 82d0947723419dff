"""Parity as a sequence-to-sequence scratchpad (000 §3.2, 002 §3.2).

The input is a binary string x_n ... x_1 (written most significant bit first,
x_1 the least significant bit); the target is y_1 ... y_n with y_1 = x_1 and
y_i = y_{i-1} xor x_i, so y_n is the parity. The target is held like any answer,
y_1 in the least significant place, so the `reverse` format writes y_1 first: the
order in which 000 generates it ("we reverse the ordering of the tokens in the
output sequence"). Example, n = 4, reversed: "<s>0110=0100</s>" (x_1..x_4 = 0,1,1,0
gives y = 0,1,0,0: an even number of ones). Question length n counts bits (000 §3.3
tests binary tasks per bit length, with base 2).

Complexity (the paper defines none for parity): the number of 1 bits, i.e. how
many times the running parity the scratchpad tracks flips; 0 for all-zero input.
The scratchpad is not a number: without padding (format.pad false) the input has
no leading zeros but the target keeps all n bits.
`sample_with_complexity` builds it directly: c one-bits at uniformly random places.
"""

from __future__ import annotations

import numpy as np

from lengthgen.digits import DIGIT_DTYPE
from lengthgen.tasks.base import Task


class Parity(Task):
    name = "parity"
    base = 2
    scales = (True,)
    constructible_complexity = True
    answer_is_number = False

    def answer_digits(self, n):
        return n

    def solve(self, operands):
        return (np.cumsum(operands[0], axis=1) % 2).astype(DIGIT_DTYPE)

    def complexity(self, operands):
        return operands[0].sum(axis=1, dtype=np.int64)

    def complexity_levels(self, n_digits, leading_zeros=True):
        return np.arange(0 if leading_zeros else 1, n_digits + 1)

    def sample_with_complexity(self, rng, levels, n_digits, leading_zeros=True):
        free = n_digits if leading_zeros else n_digits - 1  # the top bit is 1 otherwise
        ones_below = levels if leading_zeros else levels - 1
        rank = rng.random((len(levels), free)).argsort(axis=1).argsort(axis=1)
        bits = (rank < ones_below[:, None]).astype(DIGIT_DTYPE)
        if not leading_zeros:
            bits = np.concatenate([bits, np.ones((len(levels), 1), dtype=DIGIT_DTYPE)], axis=1)
        return (bits,)
