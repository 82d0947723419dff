"""The transformer block of every self-attention stack: a decoder-only model's layers,
an encoder's, and the encoder side of an encoder-decoder."""

from __future__ import annotations

from typing import TYPE_CHECKING

from torch import nn

from lengthgen.model.attention import SelfAttention
from lengthgen.model.init import ATTENTION_SCALES
from lengthgen.model.layers import FEED_FORWARDS, Residual
from lengthgen.model.sizes import Dimensions

if TYPE_CHECKING:
    from lengthgen.config import ModelConfig


class Block(nn.Module):
    """x + attention(norm(x)), then x + feed_forward(norm(x)); with `pre_post` the
    sublayer outputs are normalised too (lengthgen.model.layers.Residual)."""

    def __init__(
        self, dims: Dimensions, cfg: ModelConfig, relative_keys, causal: bool = True
    ) -> None:
        super().__init__()
        attention = SelfAttention(dims, relative_keys, cfg.dropout, causal, cfg.attention_kernel,
                                  cfg.attention_projection_bias)
        attention.qkv = ATTENTION_SCALES[cfg.attention_scale](attention.qkv, dims.head_dim)
        feed_forward = FEED_FORWARDS[cfg.ffn](dims, cfg.dropout)
        self.attention = Residual(attention, dims.d_model, cfg.norm, cfg.norm_placement, cfg.norm_eps)
        self.feed_forward = Residual(feed_forward, dims.d_model, cfg.norm, cfg.norm_placement, cfg.norm_eps)

    def forward(self, x, positions, key_positions, mask, cache=None, layer=0, rotation=None):
        return self.feed_forward(
            self.attention(x, positions, key_positions, mask, cache, layer, rotation)
        )
