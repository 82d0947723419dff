"""How an attention layer computes softmax(q k^T / sqrt(d) + bias) v: `model.attention_kernel`.

- `sdpa` (the default, the reference): torch's scaled_dot_product_attention with the
  additive mask as a (B|1, H|1, Tq, Tk) tensor. On a CPU it is the faster path uncompiled.
- `math`: softmax(q k^T / sqrt(d) + mask) v written out in torch operations, for a
  compiled step on a CPU (train.compile): Inductor then fuses the scale, the mask
  (built from the positions inside the same loop) and the softmax into one generated
  loop over each row's keys. sdpa's CPU kernels, an extern call under Inductor, take a
  scalar path over rows shorter than 16 keys (a quickstart row has 11:
  docs/performance.md). The same values as sdpa up to rounding; dropout drops attention
  weights as sdpa's math path does, with other draws.
- `flex`: FlexAttention (torch.nn.attention.flex_attention; compiled on a GPU), which
  adds the bias inside the kernel through a `score_mod`, so no (B, H, Tq, Tk) score
  matrix is stored. A positional bias that is a function of the distance i - j per head
  (ALiBi, KerpleLog, T5 buckets) arrives as a `PointwiseBias` and is computed inside the
  kernel from the two position rows: not even the bias matrix is stored. Other masks
  (FIRE, whose MLP reads two positions; structural biases; relative keys, which read
  q; the padding of an encoder-decoder) are read from their tensor by the score_mod.
  FlexAttention has no attention dropout (refused with model.dropout > 0), and torch
  2.13 has no FlexAttention backward on a CPU (refused for a trial training on one).

tests/test_attention_kernels.py checks `flex` and `math` against `sdpa` on the CPU: the
forward of every architecture and positional encoding, and the gradient of every
in-kernel bias.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

import torch
import torch.nn.functional as F


def causal_mask_with(scores: torch.Tensor) -> torch.Tensor:
    """Additive (B, H, Tq, Tk) mask: the given scores where key j is not after query i,
    -inf after. The Tq queries are the last Tq of the Tk tokens (decoding with a cache)."""
    queries, keys = scores.shape[-2:]
    future = torch.ones(queries, keys, dtype=torch.bool, device=scores.device).triu(1 + keys - queries)
    return scores.masked_fill(future, float("-inf"))


@dataclass(frozen=True)
class PointwiseBias:
    """An additive bias b_h(i - j) of query positions (B|1, Tq) over key positions
    (B|1, Tk), given by `function(distance, head)` on float distances and head indices
    of any (broadcast) shape; `causal` closes the keys after each query (the Tq queries
    are the last Tq of the Tk tokens)."""

    function: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    q_positions: torch.Tensor
    k_positions: torch.Tensor
    n_heads: int
    causal: bool

    def score_mod(self) -> Callable:
        """FlexAttention's score_mod: the score plus the bias of (b, h, q, k)."""
        q_positions, k_positions = self.q_positions, self.k_positions
        shared = q_positions.shape[0] == 1  # rows that share positions: row 0 for every b
        offset = k_positions.shape[1] - q_positions.shape[1]

        def score_mod(score, b, h, q, k):
            row = 0 if shared else b
            biased = score + self.function((q_positions[row, q] - k_positions[row, k]).float(), h)
            return torch.where(q + offset >= k, biased, -float("inf")) if self.causal else biased

        return score_mod

    def dense(self) -> torch.Tensor:
        """The (B|1, H, Tq, Tk) additive mask this bias stands for (the `sdpa` path's)."""
        distance = (self.q_positions[:, None, :, None] - self.k_positions[:, None, None, :]).float()
        heads = torch.arange(self.n_heads, device=distance.device)[None, :, None, None]
        bias = self.function(distance, heads)
        return causal_mask_with(bias) if self.causal else bias


def dense(mask: torch.Tensor | PointwiseBias | None) -> torch.Tensor | None:
    """`mask` as a tensor (what adding to it, or recording it, needs)."""
    return mask.dense() if isinstance(mask, PointwiseBias) else mask


def sdpa_attend(q, k, v, mask: torch.Tensor | PointwiseBias | None, dropout: float, causal: bool) -> torch.Tensor:
    """The reference: scaled_dot_product_attention with the mask as a tensor; `mask` None
    is the plain mask (causal, or none)."""
    mask = dense(mask)
    length, keys = q.shape[2], k.shape[2]
    if mask is not None:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout)
    if not causal or length == 1:  # bidirectional, or one new token: every key is open
        return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout)
    if length == keys:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=dropout)
    plain = causal_mask_with(q.new_zeros(q.shape[0], 1, length, keys))
    return F.scaled_dot_product_attention(q, k, v, attn_mask=plain, dropout_p=dropout)


def math_attend(q, k, v, mask: torch.Tensor | PointwiseBias | None, dropout: float, causal: bool) -> torch.Tensor:
    """Attention written out (Vaswani et al. 2017, eq. 1, with the additive mask inside
    the softmax); `mask` None is the plain mask, as `sdpa_attend`'s. A row must keep an
    open key (every mask here does: a causal row sees itself), or its softmax is NaN."""
    mask = dense(mask)
    length, keys = q.shape[2], k.shape[2]
    if mask is None and causal and length > 1:
        mask = causal_mask_with(q.new_zeros(1, 1, length, keys))
    scores = (q @ k.transpose(-2, -1)) * q.shape[-1] ** -0.5  # (B, H, Tq, Tk)
    weights = torch.softmax(scores if mask is None else scores + mask, dim=-1)
    if dropout:
        weights = F.dropout(weights, dropout)
    return weights @ v


def tensor_score_mod(mask: torch.Tensor) -> Callable:
    """A score_mod adding a (B|1, H|1, Tq|1, Tk) mask tensor, read where it broadcasts
    (an encoder-decoder's padding mask is one row for every query)."""
    rows, heads, queries = (size > 1 for size in mask.shape[:3])

    def score_mod(score, b, h, q, k):
        return score + mask[b if rows else 0, h if heads else 0, q if queries else 0, k]

    return score_mod


def causal_score_mod(length: int, keys: int) -> Callable:
    offset = keys - length

    def score_mod(score, b, h, q, k):
        return torch.where(q + offset >= k, score, -float("inf"))

    return score_mod


@cache
def _compiled_flex() -> Callable:
    from torch.nn.attention.flex_attention import flex_attention

    return torch.compile(flex_attention)


def flex_function(device: torch.device) -> Callable:
    """FlexAttention compiled into a fused kernel on a GPU; its unfused form on a CPU
    (forward only in torch 2.13), which evaluates the same score_mod."""
    from torch.nn.attention.flex_attention import flex_attention

    return _compiled_flex() if device.type == "cuda" else flex_attention


def flex_attend(q, k, v, mask: torch.Tensor | PointwiseBias | None, dropout: float, causal: bool) -> torch.Tensor:
    """FlexAttention with the mask as a score_mod (the module docstring)."""
    if dropout:
        raise ValueError("model.attention_kernel flex has no attention dropout: set model.dropout: 0")
    length, keys = q.shape[2], k.shape[2]
    if isinstance(mask, PointwiseBias):
        score_mod = mask.score_mod()
    elif mask is not None:
        score_mod = tensor_score_mod(mask)
    elif causal and length > 1:
        score_mod = causal_score_mod(length, keys)
    else:
        score_mod = None
    return flex_function(q.device)(q, k, v, score_mod=score_mod)


ATTENTION_KERNELS: dict[str, Callable] = {"sdpa": sdpa_attend, "flex": flex_attend, "math": math_attend}
