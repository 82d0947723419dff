"""Structural attention biases (`model.attention_bias`): masks that say which keys
each query may attend to, from where the digits sit rather than from positions.

- `none`: no structural bias;
- `windowed`: 000 §4.1 and App. A.4 (windowed attention biasing, Fig. 10-11);
- `abc`: Attention Bias Calibration, 000 §5 and App. B, thresholds of 002.

A bias acts at the attention sites of the architecture (`Architecture.bias_sites`):

- `lm`: the self-attention of a decoder-only model over "<s> question = answer";
- `decoder_self`: the causal self-attention of an encoder-decoder's decoder;
- `cross`: the decoder's attention over the encoder's reading of the question.

Each site gets a `Geometry` (where its queries and keys are, row by row) and returns
an additive (B, 1|H, Tq, Tk) tensor of 0 and -inf (and, for abc, finite biases), or
None. It is computed once per forward pass and shared by every layer, like the
positional biases.
"""

from __future__ import annotations

from lengthgen.model.position.attention_bias.base import (
    SITE_KINDS,
    Geometry,
    NoBias,
    StructuralBias,
)
from lengthgen.model.position.attention_bias.calibrated import CalibratedBias
from lengthgen.model.position.attention_bias.windowed import WINDOW_CENTRES, WindowedBias

ATTENTION_BIASES: dict[str, type[StructuralBias]] = {
    "none": NoBias,
    "windowed": WindowedBias,
    "abc": CalibratedBias,
}

__all__ = [
    "ATTENTION_BIASES", "SITE_KINDS", "WINDOW_CENTRES", "CalibratedBias", "Geometry", "StructuralBias", "WindowedBias",
]
