"""The structural-bias interface and `none`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import torch
from torch import nn

if TYPE_CHECKING:
    from lengthgen.config import ModelConfig, TrialConfig
    from lengthgen.layout import InputLayout
    from lengthgen.model.base import Architecture
    from lengthgen.tasks import Task

#: the kind of attention at each site: it picks ABC's dropoff factor kappa (002 §5)
SITE_KINDS = {"lm": "self", "decoder_self": "self", "cross": "cross"}
#: whether the attention at each site is causal (its other masks close the future)
SITE_CAUSAL = {"lm": True, "decoder_self": True, "cross": False}


@dataclass
class Geometry:
    """Where the queries and keys of one attention sit, row by row.

    Queries and keys are indices into their sequences (columns of the token row for
    `lm`; decoder steps for `decoder_self`; question tokens for the keys of `cross`).
    Output row t is the query that predicts the answer's token t + 1 (t = 0 reads the
    "=" of a decoder-only row, the start token of a decoder)."""

    #: (Tq,) index of each query (with a KV cache: the new tokens only)
    rows: torch.Tensor
    #: number of keys Tk; keys are 0 .. Tk - 1
    n_keys: int
    #: (B,) true length of the key sequence of each row (padding excluded): the right
    #: edge that ABC's anti-diagonals are anchored to
    key_lengths: torch.Tensor
    #: (B,) index of output row 0 among the queries (P - 1 for `lm`, else 0)
    output_start: torch.Tensor
    #: (B,) first key column of the question's digits, and one past the last (the
    #: least significant place); `lm` and `cross` only
    input_start: torch.Tensor | None = None
    input_end: torch.Tensor | None = None

    def open_keys(self, causal: bool) -> torch.Tensor:
        """(B, 1, Tq, Tk) bool: the keys other masks leave open (causal, or padding)."""
        keys = torch.arange(self.n_keys, device=self.rows.device)
        if causal:
            return (keys[None, :] <= self.rows[:, None])[None, None].expand(len(self.key_lengths), 1, -1, -1)
        return (keys[None, :] < self.key_lengths[:, None])[:, None, None, :].expand(-1, 1, len(self.rows), -1)


class StructuralBias(nn.Module):
    #: the bias is extracted from a trained model and needs a second training phase (abc)
    calibrated: ClassVar[bool] = False
    #: ModelConfig fields this bias reads; set under another bias they are refused
    #: (lengthgen.config.refuse_unread_options)
    options: ClassVar[tuple[str, ...]] = ()

    def __init__(self, cfg: ModelConfig, layout: InputLayout, n_heads: int) -> None:
        super().__init__()

    @classmethod
    def check(cls, config: TrialConfig, task: Task, architecture: type[Architecture]) -> None:
        """Refuse a trial this bias cannot serve (ValueError naming the field)."""

    @property
    def acts(self) -> bool:
        """Whether it changes any attention now (so that its geometry is worth building)."""
        return False

    def lm(self, geometry: Geometry) -> torch.Tensor | None:
        return None

    def decoder_self(self, geometry: Geometry) -> torch.Tensor | None:
        return None

    def cross(self, geometry: Geometry) -> torch.Tensor | None:
        return None


class NoBias(StructuralBias):
    """`none`: attention as the architecture and its positional encoding make it."""
