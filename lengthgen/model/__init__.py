"""Architecture registry and model construction.

Every architecture implements lengthgen.model.base.Architecture: the trainer and
the evaluator call its methods and never compare architecture names."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import nn

from lengthgen.layout import InputLayout
from lengthgen.model.base import Architecture, initialize
from lengthgen.model.block import Block
from lengthgen.model.decoder import DecoderLM
from lengthgen.model.encoder import EncoderLM
from lengthgen.model.encoder_decoder import DecoderBlock, EncoderDecoder
from lengthgen.model.perturbation import perturb_one_weight
from lengthgen.model.sizes import SIZES

if TYPE_CHECKING:  # the config module builds its Literal types from this registry
    from lengthgen.config import ModelConfig

ARCHITECTURES: dict[str, type[Architecture]] = {
    "decoder": DecoderLM,
    "encoder_decoder": EncoderDecoder,
    "encoder": EncoderLM,
}

#: the transformer layers of every architecture, where seeds.perturb moves one weight
#: (lengthgen.model.perturbation says why there)
TRANSFORMER_LAYERS = (Block, DecoderBlock)


def build_model(
    cfg: ModelConfig, vocab_size: int, weight_seed: int, layout: InputLayout | None = None, perturb_seed: int = 0
) -> Architecture:
    """The model of `cfg`, initialised from `weight_seed` only, then, for a perturb seed
    above 0, one weight of its layers moved by one ulp (a numerical replicate). `layout`
    says where the digits sit (lengthgen.formats.input_layout); only structural biases
    and UPE read it."""
    model = ARCHITECTURES[cfg.arch](cfg, vocab_size, layout)
    depth = SIZES[cfg.size].n_layers * cfg.loops  # the compute depth, deepnorm's N
    initialize(model, torch.Generator().manual_seed(weight_seed), cfg.init, depth)
    perturb_one_weight(model, perturb_seed, TRANSFORMER_LAYERS)
    return model


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
