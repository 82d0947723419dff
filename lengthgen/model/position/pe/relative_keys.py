"""Positional encodings added to the keys inside attention (Shaw et al. 2018).

003 eq. (2.1): A_ij = softmax((W_Q z_i)^T (W_K z_j + p_{i,j})), with relative vectors
p_{i-j} (003 §2, RPE). Each attention layer owns its table of learned vectors, one
per clipped distance, shared by the heads (Shaw et al. §3.2). The term
q_i . p_{clip(j - i)} is a score added before the softmax, scaled like q . k.

UPE (003 §3.2, eq. 3.3): a position i that "uniformly affects every other position"
gets one vector c_i for every query, p_{j,i} = c_i. With multiplier digits at
columns i_1..i_k (the aligned layout fixes them), key column i_m gets c_m in place
of p_{clip(j - i)}, for every query j; every other key keeps the relative vectors
(003 M2: "uniform positional vectors ... to the multiplier's digits and RPE for the
rest"). Choice: a multiplier digit as its own query also gets c_m (eq. 3.3 names
j != i only). Columns are token indices of the row (the multiplier's place in the
aligned layout), not position values, so any position sampler keeps them.
"""

from __future__ import annotations

import math

import torch
from torch import nn


class ShawRelativeKeys(nn.Module):
    """Shaw et al. 2018, 003 eq. (2.1): the score of query i and key j gains
    q_i . p_{clip(j - i)} / sqrt(d_head), one learned vector per clipped distance."""

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


class UniformRelativeKeys(ShawRelativeKeys):
    """Shaw relative keys, except the keys at `uniform_columns`, which get one learned
    vector c_m each whatever the query (003 eq. 3.3). With no such columns it is Shaw."""

    def __init__(self, head_dim: int, clip: int, uniform_columns: tuple[int, ...]) -> None:
        super().__init__(head_dim, clip)
        # a tuple, not a tensor: which columns fall inside the keys is decided on the
        # host, from the keys' width (no data-dependent shape in a compiled forward)
        self.uniform_columns = tuple(uniform_columns)
        self.uniform = nn.Embedding(max(1, len(uniform_columns)), head_dim)

    def scores(self, q, q_positions, k_positions):
        scores = super().scores(q, q_positions, k_positions)  # (B, H, Tq, Tk)
        inside = [column for column in self.uniform_columns if column < k_positions.shape[1]]
        if not inside:
            return scores
        columns = torch.tensor(inside, dtype=torch.long, device=q.device)
        uniform = self.uniform.weight[: len(inside)]  # (m, hd)
        per_key = torch.einsum("bhqd,md->bhqm", q, uniform) * self.scale  # (B, H, Tq, m)
        return scores.index_copy(-1, columns, per_key)
