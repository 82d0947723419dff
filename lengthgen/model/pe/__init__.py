"""Positional-encoding registry, grouped by where each encoding acts (STYLE.md 3).

- input embedding: a vector added to the token embedding (sinusoidal, learned);
- q/k transform: applied to queries and keys in every layer (rope);
- attention bias: added to the attention scores, computed once per forward (alibi);
- nope: none of them (the causal mask alone carries order, Kazemnejad et al. 2023).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from torch import nn

from lengthgen.model.pe.biases import ALiBi
from lengthgen.model.pe.embeddings import LearnedEmbedding, SinusoidalEmbedding
from lengthgen.model.pe.rotary import Rotary
from lengthgen.model.sizes import Dimensions


@dataclass
class PositionalParts:
    input_embedding: nn.Module | None = None
    qk_transform: nn.Module | None = None
    attention_bias: nn.Module | None = None


PositionalFactory = Callable[[Dimensions, int], PositionalParts]

POSITIONAL_ENCODINGS: dict[str, PositionalFactory] = {
    "nope": lambda dims, max_positions: PositionalParts(),
    "sinusoidal": lambda dims, max_positions: PositionalParts(
        input_embedding=SinusoidalEmbedding(dims.d_model)
    ),
    "learned": lambda dims, max_positions: PositionalParts(
        input_embedding=LearnedEmbedding(dims.d_model, max_positions)
    ),
    "rope": lambda dims, max_positions: PositionalParts(qk_transform=Rotary(dims.head_dim)),
    "alibi": lambda dims, max_positions: PositionalParts(attention_bias=ALiBi(dims.n_heads)),
}
