"""Multi-head attention for every architecture: self-attention (causal or
bidirectional) and cross-attention (decoder queries over encoder outputs).

Masks are additive (B|1, H|1, Tq, Tk) score tensors, -inf where a key is closed.
`mask=None` means the plain mask of the attention: causal for causal
self-attention, none for bidirectional. A positional encoding acts here through
its rotation of queries and keys (RoPE: the model builds the rotation once per
forward pass and hands it to every layer) or its relative keys (Shaw, UPE);
additive biases arrive already inside `mask`. For Attention Bias Calibration
(000 §5) a layer can record its content logits q.k / sqrt(d_head) (`record`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn

from lengthgen.model.attention_kernels import ATTENTION_KERNELS, causal_mask_with, dense
from lengthgen.model.position.pe.rotary import Rotation
from lengthgen.model.sizes import Dimensions


@dataclass
class KVCache:
    """Keys and values of the tokens seen so far, per layer, and their positions, so
    that greedy decoding runs each new token through the model once."""

    keys: list[torch.Tensor | None]
    values: list[torch.Tensor | None]
    #: (B, T_past) positions of the cached tokens
    positions: torch.Tensor | None = None
    #: cross-attention keys and values per decoder layer, computed once from the
    #: encoder output (encoder-decoder)
    cross: list[tuple[torch.Tensor, torch.Tensor] | None] = field(default_factory=list)
    #: what the architecture keeps about the whole sequence being decoded (its final
    #: length, the encoder output and the question lengths), for its masks
    context: dict = field(default_factory=dict)

    @classmethod
    def empty(cls, n_layers: int) -> KVCache:
        return cls([None] * n_layers, [None] * n_layers, cross=[None] * n_layers)

    @property
    def length(self) -> int:
        return 0 if self.positions is None else self.positions.shape[1]


def _split_heads(t: torch.Tensor, n_heads: int) -> torch.Tensor:
    batch, length, width = t.shape
    return t.view(batch, length, n_heads, width // n_heads).transpose(1, 2)  # (B, nh, T, hd)


class _Recorder:
    """Keeps the content logits of the last forward pass when `record` is set."""

    record: bool = False
    recorded: torch.Tensor | None = None

    def _keep(self, q: torch.Tensor, k: torch.Tensor, mask: torch.Tensor | None) -> None:
        logits = (q @ k.transpose(-2, -1)).float() * q.shape[-1] ** -0.5  # (B, nh, Tq, Tk)
        if mask is not None:
            logits = logits.masked_fill(torch.isneginf(mask).expand_as(logits), float("nan"))
        self.recorded = logits.detach()


class SelfAttention(nn.Module, _Recorder):
    """`bias` (model.attention_projection_bias): the query-key-value and output maps
    carry biases; without them, as T5's attention (Cho et al. 2024's released code) and
    McLeish et al. 2024's (`qkv_bias: False`, `bias_in_proj: False`)."""

    def __init__(self, dims: Dimensions, relative_keys: nn.Module | None, dropout: float, causal: bool = True,
                 kernel: str = "sdpa", bias: bool = True) -> None:
        super().__init__()
        self.attend = ATTENTION_KERNELS[kernel]
        self.n_heads, self.head_dim = dims.n_heads, dims.head_dim
        self.qkv = nn.Linear(dims.d_model, 3 * dims.d_model, bias=bias)
        self.out = nn.Linear(dims.d_model, dims.d_model, bias=bias)
        self.relative_keys = relative_keys
        self.dropout = dropout
        self.causal = causal

    def forward(self, x: torch.Tensor, positions: torch.Tensor, key_positions: torch.Tensor,
                mask: torch.Tensor | None, cache: KVCache | None = None, layer: int = 0,
                rotation: Rotation | None = None):
        """x: the new tokens (B, Tq, d) at `positions` (B, Tq); `key_positions` (B, Tk) also
        covers the cached tokens, whose keys are cached rotated; `rotation` is that of
        `positions`."""
        batch, length, d_model = x.shape
        q, k, v = (_split_heads(t, self.n_heads) for t in self.qkv(x).split(d_model, dim=-1))  # (B, nh, T, hd)
        if rotation is not None:
            q, k = rotation.rotate(q), rotation.rotate(k)
        if cache is not None:
            if cache.keys[layer] is not None:
                k = torch.cat([cache.keys[layer], k], dim=2)  # (B, nh, Tk, hd)
                v = torch.cat([cache.values[layer], v], dim=2)
            cache.keys[layer], cache.values[layer] = k, v
        if self.relative_keys is not None:
            scores = self.relative_keys.scores(q, positions, key_positions)  # (B, nh, Tq, Tk)
            mask = self._plain_mask(scores) if mask is None else dense(mask) + scores
        if self.record:
            mask = dense(mask)
            self._keep(q, k, mask if mask is not None else self._plain_mask(q.new_zeros(1, 1, length, k.shape[2])))
        y = self.attend(q, k, v, mask, self.dropout if self.training else 0.0, self.causal)
        return self.out(y.transpose(1, 2).reshape(batch, length, d_model))  # (B, Tq, d)

    def _plain_mask(self, scores: torch.Tensor) -> torch.Tensor:
        return causal_mask_with(scores) if self.causal else scores


class CrossAttention(nn.Module, _Recorder):
    """Decoder queries over the encoder output `memory` (B, S, d). No positional
    encoding acts here (the query and key positions index different sequences); the
    mask closes the question's padding and carries any structural bias."""

    def __init__(self, dims: Dimensions, dropout: float, kernel: str = "sdpa") -> None:
        super().__init__()
        self.attend = ATTENTION_KERNELS[kernel]
        self.n_heads = dims.n_heads
        self.query = nn.Linear(dims.d_model, dims.d_model)
        self.key_value = nn.Linear(dims.d_model, 2 * dims.d_model)
        self.out = nn.Linear(dims.d_model, dims.d_model)
        self.dropout = dropout

    def forward(self, x: torch.Tensor, memory: torch.Tensor, mask: torch.Tensor,
                cache: KVCache | None = None, layer: int = 0) -> torch.Tensor:
        batch, length, d_model = x.shape
        q = _split_heads(self.query(x), self.n_heads)  # (B, nh, Tq, hd)
        if cache is not None and cache.cross[layer] is not None:
            k, v = cache.cross[layer]
        else:
            k, v = (_split_heads(t, self.n_heads) for t in self.key_value(memory).split(d_model, dim=-1))  # (B, nh, S, hd)
            if cache is not None:
                cache.cross[layer] = (k, v)
        if self.record:
            self._keep(q, k, mask)
        y = self.attend(q, k, v, mask, self.dropout if self.training else 0.0, False)
        return self.out(y.transpose(1, 2).reshape(batch, length, d_model))


def padding_mask(lengths: torch.Tensor, n_keys: int, dtype: torch.dtype) -> torch.Tensor:
    """(B, 1, 1, n_keys) additive mask closing the keys at or past each row's length."""
    closed = torch.arange(n_keys, device=lengths.device)[None, :] >= lengths[:, None]
    zeros = torch.zeros(closed.shape, dtype=dtype, device=lengths.device)
    return zeros.masked_fill(closed, float("-inf"))[:, None, None, :]
