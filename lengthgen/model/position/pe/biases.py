"""Positional encodings that add a bias to the attention scores: bias(q_pos, k_pos).

Each takes explicit positions (B, Tq) and (B, Tk) and returns (B, H, Tq, Tk), the
term b(i, j) of 001 eq. (D.1), A = X W_Q (X W_K)^T + B. The decoder computes it
once per forward pass and shares it across layers (as 001 App. E.2 does for FIRE).
For causal models only j <= i matters: keys after the query are removed by the
causal mask, not by these biases. In a bidirectional encoder the keys after the
query count too: ALiBi, KerpleLog and FIRE read |i - j| and are symmetric; T5 gives
each direction its own half of the buckets (the T5 release's bidirectional buckets).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn


def _distance(q_positions: torch.Tensor, k_positions: torch.Tensor) -> torch.Tensor:
    """(B, 1, Tq, Tk) float tensor of i - j."""
    return (q_positions[:, None, :, None] - k_positions[:, None, None, :]).float()


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
    """Press et al. 2022, §3 (001 eq. D.1 list): b(i, j) = -m_h |i - j|, fixed slopes m_h."""

    def __init__(self, n_heads: int) -> None:
        super().__init__()
        self.register_buffer("slopes", alibi_slopes(n_heads), persistent=False)

    def forward(self, q_positions: torch.Tensor, k_positions: torch.Tensor) -> torch.Tensor:
        return -self.slopes[None, :, None, None] * _distance(q_positions, k_positions).abs()

    def pointwise(self, distance: torch.Tensor, head: torch.Tensor) -> torch.Tensor:
        """b at float distances i - j for heads `head` (any broadcast shapes): inside a kernel."""
        return -self.slopes[head] * distance.abs()

    def kernel_function(self) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
        """`pointwise`, as FlexAttention's score_mod calls it."""
        return self.pointwise


class KerpleLog(nn.Module):
    """Chi et al. 2022, logarithmic variant; 001 App. D.1:
    b(i, j) = -r1 log(1 + r2 |i - j|), with r1, r2 > 0 learned per head.

    Choice (the papers do not fix it): r1 and r2 are kept positive by clamping at
    1e-2 in the forward pass and start uniform in (0, 2) and (0, 1), the ranges of
    the KERPLE authors' release."""

    minimum = 1e-2

    def __init__(self, n_heads: int) -> None:
        super().__init__()
        self.r1 = nn.Parameter(torch.ones(n_heads))
        self.r2 = nn.Parameter(torch.ones(n_heads))

    @torch.no_grad()
    def initialize(self, generator: torch.Generator) -> None:
        self.r1.copy_(torch.rand(self.r1.shape, generator=generator) * 2)
        self.r2.copy_(torch.rand(self.r2.shape, generator=generator))

    def forward(self, q_positions, k_positions):
        r1 = self.r1.clamp(min=self.minimum)[None, :, None, None]
        r2 = self.r2.clamp(min=self.minimum)[None, :, None, None]
        return -r1 * torch.log1p(r2 * _distance(q_positions, k_positions).abs())

    def pointwise(self, distance: torch.Tensor, head: torch.Tensor) -> torch.Tensor:
        """b at float distances i - j for heads `head` (any broadcast shapes)."""
        return self.kernel_function()(distance, head)

    def kernel_function(self) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
        """`pointwise` for inside a kernel, r1 and r2 clamped before it: clamped inside
        FlexAttention's score_mod, each parameter is indexed twice in its backward (the
        value and clamp's mask), which its compiler refuses (measured on an H100, torch 2.11)."""
        r1, r2 = self.r1.clamp(min=self.minimum), self.r2.clamp(min=self.minimum)
        return lambda distance, head: -r1[head] * torch.log1p(r2[head] * distance.abs())


class FIRE(nn.Module):
    """Li et al. 2024 (FIRE); 001 App. A.1, D.1 and E.2:
    b(i, j) = f_theta( psi(i - j) / psi(max(L, i)) ),  psi(x) = log(c x + 1),
    f_theta a 2-layer MLP (1 -> 32 -> heads, ReLU), c > 0 and L > 0 learned. Note the
    max, not min: short queries are normalised by L, long ones by their own position.

    Choices: c starts at 0.1 and L at 512 (L = |multiplier| * 512 with a learned
    multiplier starting at 1), as in the FIRE authors' description; |c| is used so
    that psi stays defined; the denominator gets 1e-6 so that it is never 0."""

    def __init__(self, n_heads: int, hidden: int = 32, initial_c: float = 0.1, initial_threshold: float = 512.0):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(1, hidden), nn.ReLU(), nn.Linear(hidden, n_heads))
        self.c = nn.Parameter(torch.tensor(initial_c))
        self.threshold_multiplier = nn.Parameter(torch.tensor(1.0))
        self.initial_c, self.initial_threshold = initial_c, initial_threshold

    @torch.no_grad()
    def initialize(self, generator: torch.Generator) -> None:
        for layer in (self.mlp[0], self.mlp[2]):
            nn.init.normal_(layer.weight, std=0.02 if layer is self.mlp[2] else 1.0, generator=generator)
            nn.init.zeros_(layer.bias)
        self.c.fill_(self.initial_c)
        self.threshold_multiplier.fill_(1.0)

    def psi(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log1p(self.c.abs() * x)

    def forward(self, q_positions, k_positions):
        distance = _distance(q_positions, k_positions).abs()  # (B, 1, Tq, Tk)
        threshold = (self.threshold_multiplier * self.initial_threshold).abs()
        normaliser = torch.maximum(q_positions.float(), threshold)[:, None, :, None]  # (B, 1, Tq, 1)
        normalised = self.psi(distance) / (self.psi(normaliser) + 1e-6)
        return self.mlp(normalised[..., None]).squeeze(1).permute(0, 3, 1, 2)  # (B, H, Tq, Tk)


def t5_bucket(distance: torch.Tensor, n_buckets: int, max_distance: int) -> torch.Tensor:
    """001 eq. (D.2), K + 1 = n_buckets buckets, L_1 = max_distance: exact buckets r_d for
    0 <= d < (K+1)/2, logarithmic ones up to L_1, r_K beyond. Negative distances (keys
    after the query, masked in causal models) use bucket 0. (An odd count, only met as
    one half of bidirectional buckets, gives the extra bucket to the logarithmic range.)"""
    exact = n_buckets // 2
    d = distance.clamp(min=0)
    if exact == 0:
        return torch.zeros_like(d, dtype=torch.long)
    logarithmic = exact + torch.floor(
        (n_buckets - exact) * torch.log(d.clamp(min=exact) / exact) / math.log(max_distance / exact)
    )
    bucket = torch.where(d < exact, d, logarithmic)
    bucket = torch.where(d >= max_distance, torch.full_like(d, n_buckets - 1), bucket)
    return bucket.long().clamp(max=n_buckets - 1)


def t5_bidirectional_bucket(distance: torch.Tensor, n_buckets: int, max_distance: int) -> torch.Tensor:
    """The T5 release's bidirectional buckets: the first half of the buckets for keys at
    or before the query (i - j >= 0), the second half for keys after it, each half
    bucketed by |i - j| as in eq. (D.2)."""
    half = n_buckets // 2
    after = (distance < 0).long()
    return t5_bucket(distance.abs(), half, max_distance) + after * half


class T5Bias(nn.Module):
    """Raffel et al. 2020; 001 eq. (D.2): b(i, j) = r_bucket(i - j), one learned scalar per
    bucket and head. Defaults: 32 buckets, L_1 = 128 (the T5 release). `bidirectional`
    (encoders): half of the buckets per direction, as the T5 encoder does."""

    def __init__(self, n_heads: int, n_buckets: int = 32, max_distance: int = 128, bidirectional: bool = False):
        super().__init__()
        self.n_buckets, self.max_distance = n_buckets, max_distance
        self.bucket = t5_bidirectional_bucket if bidirectional else t5_bucket
        self.values = nn.Embedding(n_buckets, n_heads)

    def forward(self, q_positions, k_positions):
        buckets = self.bucket(_distance(q_positions, k_positions)[:, 0], self.n_buckets, self.max_distance)
        return self.values(buckets).permute(0, 3, 1, 2)  # (B, H, Tq, Tk)

    def pointwise(self, distance: torch.Tensor, head: torch.Tensor) -> torch.Tensor:
        """b at float distances i - j for heads `head` (any broadcast shapes): inside a kernel."""
        return self.values.weight[self.bucket(distance, self.n_buckets, self.max_distance), head]

    def kernel_function(self) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
        """`pointwise`, as FlexAttention's score_mod calls it."""
        return self.pointwise
