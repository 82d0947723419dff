"""Feed-forward and normalisation variants, each a registry the config names.

001 App. E.2 (Table E.1): GeGLU feed-forward (Shazeer 2020) and RMSNorm used both
before and after each sublayer, "following the Primer architecture" (So et al. 2021).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from lengthgen.model.sizes import Dimensions


class GeluFeedForward(nn.Module):
    """W_2 gelu(W_1 x): the GPT-2 MLP."""

    def __init__(self, dims: Dimensions, dropout: float) -> None:
        super().__init__()
        self.up = nn.Linear(dims.d_model, dims.d_ff)
        self.down = nn.Linear(dims.d_ff, dims.d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.down(F.gelu(self.up(x))))


class GeGLUFeedForward(nn.Module):
    """Shazeer 2020, eq. (6): W_2 (gelu(x W) * (x V)), both W and V of width d_ff, no
    biases; with d_ff = 4 d this gives the 25M / 268M parameter counts of 001 Table E.1."""

    def __init__(self, dims: Dimensions, dropout: float) -> None:
        super().__init__()
        self.gate_and_value = nn.Linear(dims.d_model, 2 * dims.d_ff, bias=False)
        self.down = nn.Linear(dims.d_ff, dims.d_model, bias=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, value = self.gate_and_value(x).chunk(2, dim=-1)
        return self.dropout(self.down(F.gelu(gate) * value))


FEED_FORWARDS: dict[str, Callable[[Dimensions, float], nn.Module]] = {
    "gelu": GeluFeedForward,
    "geglu": GeGLUFeedForward,
}

NORMS: dict[str, Callable[[int], nn.Module]] = {
    "layernorm": nn.LayerNorm,
    "rmsnorm": nn.RMSNorm,
}


class Residual(nn.Module):
    """x + sublayer(norm(x)) for `pre`; x + norm_out(sublayer(norm(x))) for `pre_post`,
    001 E.2's "both PreNorm and PostNorm layers". Choice: the post norm acts on the
    sublayer's output before the residual addition (as in Primer and in NormFormer),
    so the residual stream itself is never normalised."""

    def __init__(self, sublayer: nn.Module, d_model: int, norm: str, placement: str) -> None:
        super().__init__()
        self.sublayer = sublayer
        self.norm_in = NORMS[norm](d_model)
        self.norm_out = NORMS[norm](d_model) if placement == "pre_post" else nn.Identity()

    def forward(self, x: torch.Tensor, *args) -> torch.Tensor:
        return x + self.norm_out(self.sublayer(self.norm_in(x), *args))


NORM_PLACEMENTS = ("pre", "pre_post")
