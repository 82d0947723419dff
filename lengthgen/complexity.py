"""Question complexity: the carry-cascade length of 003 (Sabbaghi et al. 2024).

003 §4 (C1) and App. C.4: the output digit at position i depends on earlier
positions only while the carry into i is unknown. A carry is *generated* where
a_j + b_j >= 10 and *propagates* through each following position whose digit sum
is exactly 9. A cascade's length is 1 (the generating position) plus the number
of consecutive propagating positions after it; a question's complexity is the
longest cascade in it, and 0 when no carry is generated at all.

Reproduces App. C.4: for 5-digit sums P(length 4) ~ 8.5e-4 ("roughly 8.3e-4"),
and for 50-digit sums lengths <= 4 hold 0.998 of the mass (tests/test_complexity.py).
"""

from __future__ import annotations

import numpy as np


def carry_cascade(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Longest carry cascade per question; a, b are (Q, n) LSD-first digit arrays."""
    digit_sums = a.astype(np.int16) + b
    running = np.zeros(len(digit_sums), dtype=np.int64)
    longest = np.zeros(len(digit_sums), dtype=np.int64)
    for column in range(digit_sums.shape[1]):
        column_sum = digit_sums[:, column]
        running = np.where(
            column_sum >= 10,
            1,
            np.where((column_sum == 9) & (running > 0), running + 1, 0),
        )
        np.maximum(longest, running, out=longest)
    return longest
