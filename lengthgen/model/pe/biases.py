"""Positional encodings that add a bias to the attention scores: bias(q_pos, k_pos)."""

from __future__ import annotations

import math

import torch
from torch import nn


def alibi_slopes(n_heads: int) -> torch.Tensor:
    """Press et al. 2022 (ALiBi), §3: head h of H gets slope 2^(-8h/H), h = 1..H; for H
    not a power of two, the slopes of the next lower power of two followed by every
    other slope of the next higher one (the paper's reference implementation)."""

    def power_of_two_slopes(n: int) -> list[float]:
        return [2 ** (-8 * h / n) for h in range(1, n + 1)]

    lower = 2 ** math.floor(math.log2(n_heads))
    slopes = power_of_two_slopes(lower)
    if lower < n_heads:
        slopes += power_of_two_slopes(2 * lower)[0::2][: n_heads - lower]
    return torch.tensor(slopes)


class ALiBi(nn.Module):
    """Press et al. 2022, eq. in §3: score(i, j) += -m_h * (i - j) for keys j <= i.
    Keys after the query are removed by the causal mask, not by this bias."""

    def __init__(self, n_heads: int) -> None:
        super().__init__()
        self.register_buffer("slopes", alibi_slopes(n_heads), persistent=False)

    def forward(self, q_positions: torch.Tensor, k_positions: torch.Tensor) -> torch.Tensor:
        """(B, Tq), (B, Tk) -> (B, H, Tq, Tk)."""
        distance = (q_positions[:, None, :, None] - k_positions[:, None, None, :]).float()
        return -self.slopes[None, :, None, None] * distance.abs()
