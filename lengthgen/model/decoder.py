"""Decoder-only causal transformer (pre-norm), with a pluggable positional encoding.

Read top to bottom: attention, feed-forward, block, model. Positions are explicit
inputs (B, T); the positional encoding acts at the input, on q/k, or as an
attention bias, according to its registry entry (lengthgen.model.pe).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from lengthgen.model.pe import POSITIONAL_ENCODINGS
from lengthgen.model.sizes import SIZES, Dimensions


class CausalSelfAttention(nn.Module):
    def __init__(self, dims: Dimensions, qk_transform: nn.Module | None, dropout: float) -> None:
        super().__init__()
        self.n_heads, self.head_dim = dims.n_heads, dims.head_dim
        self.qkv = nn.Linear(dims.d_model, 3 * dims.d_model)
        self.out = nn.Linear(dims.d_model, dims.d_model)
        self.qk_transform = qk_transform
        self.dropout = dropout

    def forward(self, x: torch.Tensor, positions: torch.Tensor, bias: torch.Tensor | None):
        batch, length, d_model = x.shape
        q, k, v = self.qkv(x).split(d_model, dim=-1)
        q, k, v = (t.view(batch, length, self.n_heads, self.head_dim).transpose(1, 2) for t in (q, k, v))
        # (B, nh, T, hd)
        if self.qk_transform is not None:
            q, k = self.qk_transform(q, k, positions, positions)
        dropout = self.dropout if self.training else 0.0
        if bias is None:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=dropout)
        else:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=bias, dropout_p=dropout)
        y = y.transpose(1, 2).reshape(batch, length, d_model)  # (B, T, d)
        return self.out(y)


class FeedForward(nn.Module):
    def __init__(self, dims: Dimensions, dropout: float) -> None:
        super().__init__()
        self.up = nn.Linear(dims.d_model, dims.d_ff)
        self.down = nn.Linear(dims.d_ff, dims.d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.down(F.gelu(self.up(x))))


class Block(nn.Module):
    """Pre-norm: x + attn(norm(x)), then x + ff(norm(x))."""

    def __init__(self, dims: Dimensions, qk_transform: nn.Module | None, dropout: float) -> None:
        super().__init__()
        self.attention_norm = nn.LayerNorm(dims.d_model)
        self.attention = CausalSelfAttention(dims, qk_transform, dropout)
        self.feed_forward_norm = nn.LayerNorm(dims.d_model)
        self.feed_forward = FeedForward(dims, dropout)

    def forward(self, x, positions, bias):
        x = x + self.attention(self.attention_norm(x), positions, bias)
        return x + self.feed_forward(self.feed_forward_norm(x))


def causal_mask_with(bias: torch.Tensor) -> torch.Tensor:
    """Additive (B, H, T, T) mask: the positional bias where j <= i, -inf after."""
    length = bias.shape[-1]
    future = torch.ones(length, length, dtype=torch.bool, device=bias.device).triu(1)
    return bias.masked_fill(future, float("-inf"))


class DecoderLM(nn.Module):
    def __init__(self, vocab_size: int, size: str, pe: str, max_positions: int, dropout: float = 0.0):
        super().__init__()
        dims = SIZES[size]
        parts = POSITIONAL_ENCODINGS[pe](dims, max_positions)
        self.token_embedding = nn.Embedding(vocab_size, dims.d_model)
        self.input_position = parts.input_embedding
        self.attention_bias = parts.attention_bias
        # one q/k transform shared by all layers: it holds no trained parameters
        self.blocks = nn.ModuleList(Block(dims, parts.qk_transform, dropout) for _ in range(dims.n_layers))
        self.final_norm = nn.LayerNorm(dims.d_model)
        self.lm_head = nn.Linear(dims.d_model, vocab_size, bias=False)

    def forward(self, tokens: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """tokens, positions: (B, T) -> logits (B, T, vocab)."""
        x = self.token_embedding(tokens)  # (B, T, d)
        if self.input_position is not None:
            x = x + self.input_position(positions)
        bias = None
        if self.attention_bias is not None:
            # computed once and shared by every layer, as ALiBi does
            bias = causal_mask_with(self.attention_bias(positions, positions))  # (B, H, T, T)
        for block in self.blocks:
            x = block(x, positions, bias)
        return self.lm_head(self.final_norm(x))


@torch.no_grad()
def initialize(model: nn.Module, generator: torch.Generator) -> None:
    """GPT-2 style init drawn from `generator` alone (the weight seed), in a fixed
    parameter order, so nothing else (data seed, global RNG) can change it."""
    for name, parameter in model.named_parameters():
        if name.endswith("bias"):
            parameter.zero_()
        elif "norm" in name:
            parameter.fill_(1.0)
        else:
            nn.init.normal_(parameter, mean=0.0, std=0.02, generator=generator)
