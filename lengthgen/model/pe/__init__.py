"""Positional-encoding registry, grouped by where each encoding acts (STYLE.md 3).

- input embedding: a vector added to the token embedding (sinusoidal, learned);
- q/k transform: applied to queries and keys in every layer (rope);
- attention bias: bias(q_pos, k_pos) added to the scores, computed once per forward
  and shared by the layers (alibi, kerple_log, fire, t5);
- relative keys: a learned vector per clipped distance added to each key, one table
  per layer (shaw);
- nope: none of them (the causal mask alone carries order, Kazemnejad et al. 2023).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from torch import nn

from lengthgen.model.pe.biases import FIRE, ALiBi, KerpleLog, T5Bias
from lengthgen.model.pe.embeddings import LearnedEmbedding, SinusoidalEmbedding
from lengthgen.model.pe.relative_keys import ShawRelativeKeys
from lengthgen.model.pe.rotary import Rotary
from lengthgen.model.sizes import Dimensions

if TYPE_CHECKING:
    from lengthgen.config import ModelConfig


@dataclass
class PositionalParts:
    input_embedding: nn.Module | None = None
    qk_transform: nn.Module | None = None
    attention_bias: nn.Module | None = None
    #: builds one relative-key module per attention layer
    relative_keys: Callable[[], nn.Module] | None = None


PositionalFactory = Callable[[Dimensions, "ModelConfig"], PositionalParts]

POSITIONAL_ENCODINGS: dict[str, PositionalFactory] = {
    "nope": lambda dims, cfg: PositionalParts(),
    "sinusoidal": lambda dims, cfg: PositionalParts(input_embedding=SinusoidalEmbedding(dims.d_model)),
    "learned": lambda dims, cfg: PositionalParts(
        input_embedding=LearnedEmbedding(dims.d_model, cfg.max_positions)
    ),
    "rope": lambda dims, cfg: PositionalParts(qk_transform=Rotary(dims.head_dim)),
    "alibi": lambda dims, cfg: PositionalParts(attention_bias=ALiBi(dims.n_heads)),
    "kerple_log": lambda dims, cfg: PositionalParts(attention_bias=KerpleLog(dims.n_heads)),
    "fire": lambda dims, cfg: PositionalParts(attention_bias=FIRE(dims.n_heads)),
    "t5": lambda dims, cfg: PositionalParts(
        attention_bias=T5Bias(dims.n_heads, cfg.t5_buckets, cfg.t5_max_distance)
    ),
    "shaw": lambda dims, cfg: PositionalParts(
        relative_keys=lambda: ShawRelativeKeys(dims.head_dim, cfg.shaw_clip)
    ),
}
