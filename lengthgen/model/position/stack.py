"""The positional encoding of one attention stack, wired the same way in every architecture.

A model.pe entry (lengthgen.model.position.pe) gives up to four parts, by where they act. This
module holds them for one stack (a decoder-only or encoder-only model has one; an
encoder-decoder one per side) and does what every forward pass does with them
before its layers run:

- `embed`: add the input embedding of the positions (sinusoidal, learned) to the
  token embeddings;
- `bias`: the additive bias of the positions (alibi, kerple_log, fire, t5), computed
  once and shared by every layer; a causal stack's closes the future too;
- `rotation`: the q/k rotation of the positions (rope), built once and shared by
  every layer.

Relative keys (shaw, upe) live inside each attention layer: `relative_keys` builds a
new table for each.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import nn

from lengthgen.model.attention_kernels import PointwiseBias, causal_mask_with
from lengthgen.model.position.pe import POSITIONAL_ENCODINGS
from lengthgen.model.position.pe.rotary import Rotation

if TYPE_CHECKING:
    from lengthgen.config import ModelConfig
    from lengthgen.layout import InputLayout
    from lengthgen.model.sizes import Dimensions


class StackPositionalEncoding(nn.Module):
    """model.pe for one stack of attention layers; `causal` for a decoder's stack,
    false for a bidirectional one (an encoder's: its biases cover keys after the
    query too)."""

    def __init__(
        self, dims: Dimensions, cfg: ModelConfig, layout: InputLayout, causal: bool
    ) -> None:
        super().__init__()
        parts = POSITIONAL_ENCODINGS[cfg.pe].build(dims, cfg, layout, not causal)
        # registered in this order, the order the weight initialisation draws in
        self.input_embedding = parts.input_embedding
        self.attention_bias = parts.attention_bias
        self.qk_transform = parts.qk_transform
        self.layer_keys = parts.relative_keys
        self.causal = causal
        self.n_heads = dims.n_heads
        #: model.attention_kernel flex computes a pointwise bias inside the kernel
        self.in_kernel = cfg.attention_kernel == "flex" and hasattr(self.attention_bias, "kernel_function")
        #: whether every row of the batch has the same positions, decided before a
        #: compiled step (`Architecture.rows_decided`); None: `shared_rows` reads the data
        self.rows_shared: bool | None = None

    def relative_keys(self) -> nn.Module | None:
        """A new relative-key table for one attention layer (shaw, upe), or None."""
        return None if self.layer_keys is None else self.layer_keys()

    def embed(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """Token embeddings x (B, T, d) plus the input embedding of `positions` (B, T)."""
        return x if self.input_embedding is None else x + self.input_embedding(positions)

    def bias(self, positions: torch.Tensor, key_positions: torch.Tensor) -> torch.Tensor | PointwiseBias | None:
        """The (B|1, H, Tq, Tk) additive bias of queries at `positions` (B, Tq) over keys
        at `key_positions` (B, Tk), or None; with a KV cache the queries are the new
        tokens only. Under model.attention_kernel flex, a bias of the distance alone
        comes as a `PointwiseBias`, computed inside the attention kernel."""
        if self.attention_bias is None:
            return None
        if self.rows_shared is None:
            positions, key_positions = shared_rows(positions, key_positions)
        elif self.rows_shared:
            positions, key_positions = positions[:1], key_positions[:1]
        if self.in_kernel:
            return PointwiseBias(self.attention_bias.kernel_function(), positions, key_positions, self.n_heads, self.causal)
        bias = self.attention_bias(positions, key_positions)
        return causal_mask_with(bias) if self.causal else bias

    def rotation(self, positions: torch.Tensor) -> Rotation | None:
        """The q/k rotation (RoPE) of the new tokens' positions, or None. Built for every
        row, even when rows share positions (`shared_rows`): the tables are a fraction
        of q's size, and that check would put a data-dependent branch, a graph break,
        into a compiled forward."""
        return None if self.qk_transform is None else self.qk_transform(positions)


def rows_agree(*positions: torch.Tensor) -> bool:
    """Whether every row of each tensor equals its first row (a host synchronisation)."""
    return all(bool((p == p[:1]).all()) for p in positions)


def shared_rows(q_positions: torch.Tensor, k_positions: torch.Tensor):
    """When every row has the same positions (plain and cyclic samplers), one row is
    enough: a positional bias is computed once and broadcast over the batch. Reads the
    data: a compiled step decides it before the forward instead (`rows_shared`)."""
    if rows_agree(q_positions, k_positions):
        return q_positions[:1], k_positions[:1]
    return q_positions, k_positions
