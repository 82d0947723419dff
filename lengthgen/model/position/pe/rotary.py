"""Positional encodings that transform queries and keys before their dot product."""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import nn


class Rotation(NamedTuple):
    """The RoPE rotation of a set of positions. It depends on the positions only, so a
    model builds it once per forward pass and every layer rotates its queries and keys
    with it."""

    #: cos(m theta_i) for position m and channel pair i, (B, 1, T, hd/2)
    cos: torch.Tensor
    #: sin(m theta_i), (B, 1, T, hd/2)
    sin: torch.Tensor

    def rotate(self, x: torch.Tensor) -> torch.Tensor:
        """x: (B, H, T, hd) -> x with channel pair (2i, 2i+1) rotated by its angle:
        (x_2i cos - x_2i+1 sin, x_2i sin + x_2i+1 cos), eq. (34)."""
        if torch.compiler.is_compiling():
            # inductor fuses the real form into one kernel; it generates no complex code
            even, odd = x[..., 0::2], x[..., 1::2]
            rotated = torch.stack((even * self.cos - odd * self.sin, even * self.sin + odd * self.cos), dim=-1)
            return rotated.flatten(-2).type_as(x)
        # Eager: the pair as the complex number x_2i + i x_2i+1 times e^(i m theta_i)
        # (RoFormer's complex form, §3.2): the same products and sums as the real form,
        # so the same floats, in one kernel over x where the real form takes seven (and
        # more again for the gradient).
        pairs = torch.view_as_complex(x.float().unflatten(-1, (-1, 2)))  # (B, H, T, hd/2)
        return torch.view_as_real(pairs * torch.complex(self.cos, self.sin)).flatten(-2).type_as(x)


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

    def forward(self, positions: torch.Tensor) -> Rotation:
        """positions: (B, T) -> the rotation at each of them."""
        angles = positions.float()[:, None, :, None] * self.theta  # (B, 1, T, hd/2)
        return Rotation(angles.cos(), angles.sin())

    def rotate(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """x: (B, H, T, hd) at positions (B, T), rotated."""
        return self(positions).rotate(x)
