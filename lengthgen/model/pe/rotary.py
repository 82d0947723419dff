"""Positional encodings that transform queries and keys before their dot product."""

from __future__ import annotations

import torch
from torch import nn


class Rotary(nn.Module):
    """RoPE, Su et al. 2021 (RoFormer), eq. (34): channel pair (2i, 2i+1) of a query or
    key at position m is rotated by the angle m * theta_i, theta_i = base^(-2i/d), so
    that <R_m q, R_n k> depends on m - n only."""

    def __init__(self, head_dim: int, base: float = 10000.0) -> None:
        super().__init__()
        if head_dim % 2:
            raise ValueError(f"RoPE needs an even head dimension, got {head_dim}")
        theta = base ** -(torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
        self.register_buffer("theta", theta, persistent=False)

    def rotate(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """x: (B, H, T, hd), positions: (B, T)."""
        angles = positions.float()[:, None, :, None] * self.theta  # (B, 1, T, hd/2)
        cos, sin = angles.cos(), angles.sin()
        even, odd = x[..., 0::2], x[..., 1::2]
        rotated = torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1)
        return rotated.flatten(-2).type_as(x)

    def forward(self, q, k, q_positions, k_positions):
        return self.rotate(q, q_positions), self.rotate(k, k_positions)
