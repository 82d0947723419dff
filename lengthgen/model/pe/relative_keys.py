"""Positional encodings added to the keys inside attention (Shaw et al. 2018).

003 eq. (2.1): A_ij = softmax((W_Q z_i)^T (W_K z_j + p_{i,j})), with relative vectors
p_{i-j} (003 §2, RPE). Each attention layer owns its table of learned vectors, one
per clipped distance, shared by the heads (Shaw et al. §3.2). The term
q_i . p_{clip(j - i)} is a score added before the softmax, scaled like q . k.
"""

from __future__ import annotations

import math

import torch
from torch import nn


class ShawRelativeKeys(nn.Module):
    def __init__(self, head_dim: int, clip: int) -> None:
        super().__init__()
        self.clip = clip
        self.vectors = nn.Embedding(2 * clip + 1, head_dim)
        self.scale = 1.0 / math.sqrt(head_dim)

    def scores(self, q: torch.Tensor, q_positions: torch.Tensor, k_positions: torch.Tensor) -> torch.Tensor:
        """q: (B, H, Tq, hd); positions (B, Tq), (B, Tk) -> (B, H, Tq, Tk)."""
        offset = (k_positions[:, None, :] - q_positions[:, :, None]).clamp(-self.clip, self.clip)
        relative = self.vectors(offset + self.clip)  # (B, Tq, Tk, hd)
        return torch.einsum("bhqd,bqkd->bhqk", q, relative) * self.scale
