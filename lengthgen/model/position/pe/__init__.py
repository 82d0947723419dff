"""Positional-encoding registry, grouped by where each encoding acts.

- input embedding: a vector added to the token embedding (sinusoidal, learned);
- q/k transform: applied to queries and keys in every layer, its tables built once
  per forward and shared by the layers (rope);
- attention bias: bias(q_pos, k_pos) added to the scores, computed once per forward
  and shared by the layers (alibi, kerple_log, fire, t5);
- relative keys: a learned vector per clipped distance added to each key, one table
  per layer (shaw; upe adds one uniform vector per multiplier digit, 003 eq. 3.3);
- nope: none of them (the causal mask alone carries order, Kazemnejad et al. 2023).

A factory gets the model dimensions, the model config, the input layout and whether
the attention it serves is bidirectional (an encoder: biases then need i < j too).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

from torch import nn

from lengthgen.model.position.pe.biases import FIRE, ALiBi, KerpleLog, T5Bias
from lengthgen.model.position.pe.embeddings import LearnedEmbedding, SinusoidalEmbedding
from lengthgen.model.position.pe.relative_keys import ShawRelativeKeys, UniformRelativeKeys
from lengthgen.model.position.pe.rotary import Rotary
from lengthgen.model.sizes import Dimensions

if TYPE_CHECKING:
    from lengthgen.config import ModelConfig
    from lengthgen.layout import InputLayout


@dataclass
class PositionalParts:
    input_embedding: nn.Module | None = None
    qk_transform: nn.Module | None = None
    attention_bias: nn.Module | None = None
    #: builds one relative-key module per attention layer
    relative_keys: Callable[[], nn.Module] | None = None


PositionalFactory = Callable[[Dimensions, "ModelConfig", "InputLayout", bool], PositionalParts]


class Encoding(NamedTuple):
    build: PositionalFactory
    #: acts on the fixed operand's digit columns (InputLayout.uniform_columns), which
    #: only the aligned layout fixes
    needs_uniform_columns: bool = False
    #: ModelConfig fields this encoding reads; set under another encoding they are
    #: refused (lengthgen.config.refuse_unread_options)
    options: tuple[str, ...] = ()


POSITIONAL_ENCODINGS: dict[str, Encoding] = {
    "nope": Encoding(lambda dims, cfg, layout, bidirectional: PositionalParts()),
    "sinusoidal": Encoding(
        lambda dims, cfg, layout, bidirectional: PositionalParts(input_embedding=SinusoidalEmbedding(dims.d_model))
    ),
    "learned": Encoding(
        lambda dims, cfg, layout, bidirectional: PositionalParts(
            input_embedding=LearnedEmbedding(dims.d_model, cfg.max_positions)
        )
    ),
    "rope": Encoding(lambda dims, cfg, layout, bidirectional: PositionalParts(qk_transform=Rotary(dims.head_dim))),
    "alibi": Encoding(lambda dims, cfg, layout, bidirectional: PositionalParts(attention_bias=ALiBi(dims.n_heads))),
    "kerple_log": Encoding(
        lambda dims, cfg, layout, bidirectional: PositionalParts(attention_bias=KerpleLog(dims.n_heads))
    ),
    "fire": Encoding(lambda dims, cfg, layout, bidirectional: PositionalParts(attention_bias=FIRE(dims.n_heads))),
    "t5": Encoding(
        lambda dims, cfg, layout, bidirectional: PositionalParts(
            attention_bias=T5Bias(dims.n_heads, cfg.t5_buckets, cfg.t5_max_distance, bidirectional)
        ),
        options=("t5_buckets", "t5_max_distance"),
    ),
    "shaw": Encoding(
        lambda dims, cfg, layout, bidirectional: PositionalParts(
            relative_keys=lambda: ShawRelativeKeys(dims.head_dim, cfg.shaw_clip)
        ),
        options=("shaw_clip",),
    ),
    "upe": Encoding(
        lambda dims, cfg, layout, bidirectional: PositionalParts(
            relative_keys=lambda: UniformRelativeKeys(dims.head_dim, cfg.shaw_clip, layout.uniform_columns)
        ),
        needs_uniform_columns=True,
        options=("shaw_clip",),
    ),
}
