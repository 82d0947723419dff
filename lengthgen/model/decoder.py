"""Decoder-only causal transformer (pre-norm), with a pluggable positional encoding.

Read top to bottom: attention, feed-forward, block, model. Positions are explicit
inputs (B, T); the positional encoding acts at the input, on q/k, as an attention
bias or on the keys, according to its registry entry (lengthgen.model.pe).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import nn

from lengthgen.model.layers import FEED_FORWARDS, NORMS, Residual
from lengthgen.model.pe import POSITIONAL_ENCODINGS
from lengthgen.model.sizes import SIZES, Dimensions

if TYPE_CHECKING:
    from lengthgen.config import ModelConfig


@dataclass
class KVCache:
    """Keys and values of the tokens seen so far, per layer, and their positions, so
    that greedy decoding runs each new token through the model once."""

    keys: list[torch.Tensor | None]
    values: list[torch.Tensor | None]
    #: (B, T_past) positions of the cached tokens
    positions: torch.Tensor | None = None

    @classmethod
    def empty(cls, n_layers: int) -> KVCache:
        return cls([None] * n_layers, [None] * n_layers)


class CausalSelfAttention(nn.Module):
    def __init__(self, dims: Dimensions, qk_transform: nn.Module | None,
                 relative_keys: nn.Module | None, dropout: float) -> None:
        super().__init__()
        self.n_heads, self.head_dim = dims.n_heads, dims.head_dim
        self.qkv = nn.Linear(dims.d_model, 3 * dims.d_model)
        self.out = nn.Linear(dims.d_model, dims.d_model)
        self.qk_transform = qk_transform
        self.relative_keys = relative_keys
        self.dropout = dropout

    def forward(self, x: torch.Tensor, positions: torch.Tensor, key_positions: torch.Tensor,
                mask: torch.Tensor | None, cache: KVCache | None = None, layer: int = 0):
        """x: the new tokens (B, Tq, d) at `positions` (B, Tq); `key_positions` (B, Tk) also
        covers the cached tokens. mask: additive (B, H, Tq, Tk) scores, -inf on future
        keys, or None for a plain causal mask."""
        batch, length, d_model = x.shape
        q, k, v = self.qkv(x).split(d_model, dim=-1)
        q, k, v = (t.view(batch, length, self.n_heads, self.head_dim).transpose(1, 2) for t in (q, k, v))
        # (B, nh, Tq, hd)
        if self.qk_transform is not None:
            q, k = self.qk_transform(q, k, positions, positions)
        if cache is not None:
            if cache.keys[layer] is not None:
                k = torch.cat([cache.keys[layer], k], dim=2)  # (B, nh, Tk, hd)
                v = torch.cat([cache.values[layer], v], dim=2)
            cache.keys[layer], cache.values[layer] = k, v
        if self.relative_keys is not None:
            scores = self.relative_keys.scores(q, positions, key_positions)  # (B, nh, Tq, Tk)
            mask = causal_mask_with(scores) if mask is None else mask + scores
        dropout = self.dropout if self.training else 0.0
        if mask is None and length == k.shape[2]:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=dropout)
        elif mask is None and length == 1:
            y = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout)  # every key is in the past
        else:
            if mask is None:
                mask = causal_mask_with(q.new_zeros(batch, 1, length, k.shape[2]))
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout)
        y = y.transpose(1, 2).reshape(batch, length, d_model)  # (B, Tq, d)
        return self.out(y)


class Block(nn.Module):
    """x + attention(norm(x)), then x + feed_forward(norm(x)); with `pre_post` the
    sublayer outputs are normalised too (lengthgen.model.layers.Residual)."""

    def __init__(self, dims: Dimensions, cfg: ModelConfig, qk_transform, relative_keys) -> None:
        super().__init__()
        attention = CausalSelfAttention(dims, qk_transform, relative_keys, cfg.dropout)
        feed_forward = FEED_FORWARDS[cfg.ffn](dims, cfg.dropout)
        self.attention = Residual(attention, dims.d_model, cfg.norm, cfg.norm_placement)
        self.feed_forward = Residual(feed_forward, dims.d_model, cfg.norm, cfg.norm_placement)

    def forward(self, x, positions, key_positions, mask, cache=None, layer=0):
        return self.feed_forward(self.attention(x, positions, key_positions, mask, cache, layer))


def causal_mask_with(scores: torch.Tensor) -> torch.Tensor:
    """Additive (B, H, Tq, Tk) mask: the given scores where key j is not after query i,
    -inf after. The Tq queries are the last Tq of the Tk tokens (decoding with a cache)."""
    queries, keys = scores.shape[-2:]
    future = torch.ones(queries, keys, dtype=torch.bool, device=scores.device).triu(1 + keys - queries)
    return scores.masked_fill(future, float("-inf"))


class DecoderLM(nn.Module):
    def __init__(self, cfg: ModelConfig, vocab_size: int) -> None:
        super().__init__()
        dims = SIZES[cfg.size]
        parts = POSITIONAL_ENCODINGS[cfg.pe](dims, cfg)
        self.token_embedding = nn.Embedding(vocab_size, dims.d_model)
        self.input_position = parts.input_embedding
        self.attention_bias = parts.attention_bias
        # one q/k transform shared by all layers: it holds no trained parameters
        self.blocks = nn.ModuleList(
            Block(dims, cfg, parts.qk_transform, parts.relative_keys() if parts.relative_keys else None)
            for _ in range(dims.n_layers)
        )
        self.final_norm = NORMS[cfg.norm](dims.d_model)
        self.lm_head = nn.Linear(dims.d_model, vocab_size, bias=False)

    def forward(self, tokens: torch.Tensor, positions: torch.Tensor, cache: KVCache | None = None) -> torch.Tensor:
        """tokens, positions: (B, T) -> logits (B, T, vocab). With a cache, `tokens` are
        the new tokens only; the cache is extended in place."""
        key_positions = positions
        if cache is not None and cache.positions is not None:
            key_positions = torch.cat([cache.positions, positions], dim=1)  # (B, Tk)
        x = self.token_embedding(tokens)  # (B, T, d)
        if self.input_position is not None:
            x = x + self.input_position(positions)
        mask = None
        if self.attention_bias is not None:
            # computed once and shared by every layer (001 App. E.2 for FIRE); with a
            # cache, only the rows of the new queries
            mask = causal_mask_with(self.attention_bias(*_shared_rows(positions, key_positions)))  # (B|1, H, Tq, Tk)
        for layer, block in enumerate(self.blocks):
            x = block(x, positions, key_positions, mask, cache, layer)
        if cache is not None:
            cache.positions = key_positions
        return self.lm_head(self.final_norm(x))

    def empty_cache(self) -> KVCache:
        return KVCache.empty(len(self.blocks))


def _shared_rows(q_positions: torch.Tensor, k_positions: torch.Tensor):
    """When every row has the same positions (plain and cyclic samplers), one row is
    enough: the bias is computed once and broadcast over the batch."""
    if bool((q_positions == q_positions[:1]).all()) and bool((k_positions == k_positions[:1]).all()):
        return q_positions[:1], k_positions[:1]
    return q_positions, k_positions


@torch.no_grad()
def initialize(model: nn.Module, generator: torch.Generator) -> None:
    """Initialise every parameter from `generator` alone (the weight seed), in a fixed
    module order, so nothing else (data seed, global RNG) can change it. Linear and
    embedding weights: N(0, 0.02), biases 0, norm gains 1 (GPT-2); a positional
    encoding with its own `initialize(generator)` draws its parameters itself."""
    self_initializing = [m for m in model.modules() if m is not model and hasattr(m, "initialize")]
    handled = {id(sub) for m in self_initializing for sub in m.modules()}
    for module in model.modules():
        if module in self_initializing:
            module.initialize(generator)
        elif id(module) in handled:
            continue
        elif isinstance(module, (nn.LayerNorm, nn.RMSNorm)):
            nn.init.ones_(module.weight)
            if getattr(module, "bias", None) is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02, generator=generator)
            if getattr(module, "bias", None) is not None:
                nn.init.zeros_(module.bias)
