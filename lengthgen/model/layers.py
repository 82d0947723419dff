"""Feed-forward and normalisation variants, each a registry the config names.

001 App. E.2 (Table E.1): GeGLU feed-forward (Shazeer 2020) and RMSNorm used both
before and after each sublayer, "following the Primer architecture" (So et al. 2021).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

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
    biases; with d_ff = 4 d this gives the 25M / 268M parameter counts of 001 Table E.1.
    The GELU is the exact one, x Phi(x) (Hendrycks & Gimpel 2016, arXiv 1606.08415, eq. 1)."""

    #: F.gelu's `approximate`: "none", the exact GELU
    approximate = "none"

    def __init__(self, dims: Dimensions, dropout: float) -> None:
        super().__init__()
        self.gate_and_value = nn.Linear(dims.d_model, 2 * dims.d_ff, bias=False)
        self.down = nn.Linear(dims.d_ff, dims.d_model, bias=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, value = self.gate_and_value(x).chunk(2, dim=-1)
        return self.dropout(self.down(F.gelu(gate, approximate=self.approximate) * value))


class TanhGeGLUFeedForward(GeGLUFeedForward):
    """GeGLU with the tanh approximation of the GELU, 0.5 x (1 + tanh(sqrt(2/pi) (x +
    0.044715 x^3))) (Hendrycks & Gimpel 2016, arXiv 1606.08415, §2): T5's `gated-gelu`,
    whose activation is transformers' `gelu_new`, as Cho et al. 2024's released code
    runs it (configs/model/CustomT5DecoderOnly.yaml `feed_forward_proj: gated-gelu`;
    transformers' T5Config maps it to `dense_act_fn = "gelu_new"`). The same weights as
    `geglu`, so a model changes only in its activation."""

    approximate = "tanh"


FEED_FORWARDS: dict[str, Callable[[Dimensions, float], nn.Module]] = {
    "gelu": GeluFeedForward,
    "geglu": GeGLUFeedForward,
    "geglu_tanh": TanhGeGLUFeedForward,
}

class RMSNorm(nn.RMSNorm):
    """nn.RMSNorm whose gain follows its input's dtype: under bf16 autocast the input
    arrives in bfloat16 and a float32 gain would send torch.rms_norm to its unfused
    path ("Mismatch dtype between input and weight"). The fused kernel accumulates in
    float32; eps stays float32's machine epsilon (nn.RMSNorm's default, eps=None, would
    take the input dtype's, 2^-7 in bfloat16). In float32 this is nn.RMSNorm bit for bit
    (tests/test_precision.py)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weight = self.weight if self.weight is None or self.weight.dtype == x.dtype else self.weight.to(x.dtype)
        eps = torch.finfo(torch.float32).eps if self.eps is None else self.eps
        return F.rms_norm(x, self.normalized_shape, weight, eps)


NORMS: dict[str, Callable[..., nn.Module]] = {
    "layernorm": nn.LayerNorm,
    "rmsnorm": RMSNorm,
}


def norm_of(norm: str, d_model: int, eps: float | None = None) -> nn.Module:
    """The norm `norm` of width `d_model`; `eps` (model.norm_eps) None keeps each norm's
    own (nn.LayerNorm's 1e-5, RMSNorm's float32 machine epsilon), so a model without
    model.norm_eps is built exactly as before the option existed."""
    return NORMS[norm](d_model) if eps is None else NORMS[norm](d_model, eps=eps)


@dataclass(frozen=True)
class NormPlacement:
    """Where the norms of one residual sublayer sit (model.norm_placement)."""

    #: a norm on the sublayer's input (pre-LN)
    before: bool
    #: a norm on the sublayer's output, before the residual addition (001 E.2's PostNorm)
    after: bool
    #: a norm on the residual sum, the layer's output (post-LN, Vaswani et al. 2017 §3.1)
    on_sum: bool


NORM_PLACEMENTS: dict[str, NormPlacement] = {
    "pre": NormPlacement(before=True, after=False, on_sum=False),
    "pre_post": NormPlacement(before=True, after=True, on_sum=False),
    # McLeish et al. 2024 (arXiv 2405.17399): the authors' norm_scheme "post",
    # cramming/architectures/components.py, NormalizedResidualConnection._postnormalization_residual
    "post": NormPlacement(before=False, after=False, on_sum=True),
    # Cho et al. 2024 (arXiv 2405.20671): the released code's `layer_norm_position:
    # pre_post`, src/model/modeling/custom_t5_decoder_only.py, CustomT5LayerSelfAttention
    # and CustomT5LayerFF forward: layer_norm_2(x + f(layer_norm(x))), the residual sum
    # normalised (not the sublayer's output, as lg-study's pre_post)
    "pre_post_sum": NormPlacement(before=True, after=False, on_sum=True),
}


class Residual(nn.Module):
    """x + sublayer(norm(x)) for `pre`; x + norm_out(sublayer(norm(x))) for `pre_post`,
    001 E.2's "both PreNorm and PostNorm layers"; norm(x + sublayer(x)) for `post`, the
    post-LN of Vaswani et al. 2017 ("Attention Is All You Need", arXiv 1706.03762, §3.1:
    LayerNorm(x + Sublayer(x))) that McLeish et al. 2024 use; norm_sum(x +
    sublayer(norm_in(x))) for `pre_post_sum`, Cho et al. 2024's code. Choice for `pre_post`: the
    post norm acts on the sublayer's output before the residual addition (as in Primer
    and in NormFormer), so the residual stream itself is never normalised; `post`
    normalises the stream. A placement without a norm holds nn.Identity there, which
    has no weights: `pre` and `pre_post` have the weights they had before `post` existed."""

    def __init__(
        self, sublayer: nn.Module, d_model: int, norm: str, placement: str, eps: float | None = None
    ) -> None:
        super().__init__()
        where = NORM_PLACEMENTS[placement]
        self.sublayer = sublayer
        self.norm_in = norm_of(norm, d_model, eps) if where.before else nn.Identity()
        self.norm_out = norm_of(norm, d_model, eps) if where.after else nn.Identity()
        self.norm_sum = norm_of(norm, d_model, eps) if where.on_sum else nn.Identity()

    def forward(self, x: torch.Tensor, *args) -> torch.Tensor:
        return self.norm_sum(x + self.norm_out(self.sublayer(self.norm_in(x), *args)))
