"""Positional encodings that act on the input: a vector added to each token embedding."""

from __future__ import annotations

import torch
from torch import nn

from lengthgen.model.position.checks import checks_inside


class SinusoidalEmbedding(nn.Module):
    """Vaswani et al. 2017, §3.5:
    PE(pos, 2i) = sin(pos / 10000^(2i/d)),  PE(pos, 2i+1) = cos(pos / 10000^(2i/d)).
    Parameter-free, defined at every position."""

    def __init__(self, d_model: int, base: float = 10000.0) -> None:
        super().__init__()
        if d_model % 2:
            raise ValueError(f"sinusoidal encoding needs an even d_model, got {d_model}")
        exponents = torch.arange(0, d_model, 2, dtype=torch.float32) / d_model
        self.register_buffer("inverse_wavelength", base ** -exponents, persistent=False)

    def forward(self, positions: torch.Tensor) -> torch.Tensor:
        angles = positions.float()[..., None] * self.inverse_wavelength  # (B, T, d/2)
        # interleave so that channel 2i is sin and channel 2i+1 is cos
        return torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(-2)  # (B, T, d)


class LearnedEmbedding(nn.Module):
    """A trained vector per absolute position, added to the token's: e_j = w_j + p_j
    (Gehring et al. 2017, §3.1; GPT-2). Positions
    past the longest training sequence keep their initial random vectors, which
    is why learned APE fails to extrapolate."""

    def __init__(self, d_model: int, max_positions: int) -> None:
        super().__init__()
        self.table = nn.Embedding(max_positions, d_model)
        self.max_positions = max_positions

    def forward(self, positions: torch.Tensor) -> torch.Tensor:
        if checks_inside():  # a compiled step or a seed batch checks before (Architecture.check_positions)
            self.check_indices(positions)
        return self.table(positions)

    def check_indices(self, positions: torch.Tensor) -> None:
        if int(positions.max()) >= self.max_positions:
            raise ValueError(
                f"position {int(positions.max())} is past model.max_positions = {self.max_positions}"
            )

