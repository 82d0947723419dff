"""Architecture registry and model construction."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import torch
from torch import nn

from lengthgen.model.decoder import DecoderLM, initialize

if TYPE_CHECKING:  # the config module builds its Literal types from this registry
    from lengthgen.config import ModelConfig

ModelFactory = Callable[["ModelConfig", int], nn.Module]

ARCHITECTURES: dict[str, ModelFactory] = {
    "decoder": lambda cfg, vocab: DecoderLM(cfg, vocab),
}


def build_model(cfg: ModelConfig, vocab_size: int, weight_seed: int) -> nn.Module:
    """The model of `cfg`, initialised from `weight_seed` only."""
    model = ARCHITECTURES[cfg.arch](cfg, vocab_size)
    initialize(model, torch.Generator().manual_seed(weight_seed))
    return model


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
