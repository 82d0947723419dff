"""How much memory one seed of a seed batch (lengthgen.seed_batch) needs to train, from
its trial config alone: what `resources.seeds_per_trial: auto` divides a worker's
memory by to choose how many seeds train together.

Two parts, in bytes:

- state, 7 fp32 copies of the parameters (counted on a model built on the `meta`
  device: no memory, every table and bias included): the stacked weights, their
  gradients and AdamW's two moments (4), plus the seed's own model and AdamW state
  that a seed batch keeps beside the stacked tensors for its evaluations and
  checkpoints (3: `StackedModels.to_solo`, `SeedBatchStep.to_solo`). Weights stay in
  float32 under every train.precision (bf16 is autocast).
- activations, what autograd keeps for backward at the longest training row (the
  task's train_digits in the trial's format: `training_length`), counted per layer
  after Korthikanti et al., "Reducing Activation Recomputation in Large Transformer
  Models" (arXiv 2205.05198), §4. Their count per layer and token is 34 h bytes at 16
  bits with dropout masks: 5 h-wide tensors for attention, 2 for the layer norms and
  1 plus 2 ffn-wide for the MLP, plus the attention scores (5 a s bytes per token).
  This implementation keeps more than their count, measured with
  `torch.autograd.graph.saved_tensors_hooks` (tests/test_seed_memory.py): under vmap
  each linear layer's input is saved again as a 2-D view, RoPE keeps its rotated
  queries and keys beside the projections, and the feed-forward's hidden activation
  is kept before and after its nonlinearity. Hence `PER_LAYER_WIDTHS` d-wide tensors
  per token and layer (a margin over the 12 to 13 measured) and `PER_FFN_WIDTHS[ffn]`
  ffn-wide ones; the scores count twice (probabilities and a dense mask, what the
  reference `math` kernel keeps; CPU and flash kernels keep only a log-sum-exp, so
  this errs high there), and the logits twice (output and its gradient, alive
  together as backward starts). Every activation is counted at 4 bytes, which errs
  high under bf16 autocast (its matmul outputs are 2).

The estimate is meant to err high by less than 2x; the test holds it to that against
the saved tensors of a real step for several models. It does not count the worker's
own runtime (torch, the evaluation sets): the budget it is divided into keeps a
safety margin for those (orchestrator.running.auto_seeds)."""

from __future__ import annotations

from typing import NamedTuple

import torch

from lengthgen.config import TrialConfig, derive
from lengthgen.formats import sequence_length
from lengthgen.model import ARCHITECTURES, count_parameters
from lengthgen.model.sizes import SIZES
from lengthgen.tokenizer import CharTokenizer

#: fp32 copies of the parameters a batched seed holds: weights, gradients, AdamW's two
#: moments, and its own model and AdamW state kept for evaluation and checkpoints
STATE_COPIES = 7
#: d_model-wide tensors autograd keeps per token and layer (norms, attention, residuals)
PER_LAYER_WIDTHS = 14
#: feed-forward-wide tensors kept per token and layer, by model.ffn: gelu keeps its
#: hidden layer before and after the nonlinearity (2, and 1 of margin); geglu its gate
#: and value, the activated gate and their product (5, and 1 of margin)
PER_FFN_WIDTHS = {"gelu": 3, "geglu": 6, "geglu_tanh": 6}
#: attention score tensors per head kept per token pair: probabilities and a dense mask
SCORE_COPIES = 2
#: tensors of vocabulary width per token: the logits and their gradient
LOGIT_COPIES = 2
#: d_model-wide tensors outside the layers per token: the embedded input, the final norm
OUTSIDE_WIDTHS = 2
FLOAT32 = 4


class SeedMemory(NamedTuple):
    """One seed's training memory in a seed batch, in bytes."""

    #: parameters x STATE_COPIES x 4 bytes
    state: int
    #: what backward keeps for one training batch at the longest training row
    activations: int

    @property
    def total(self) -> int:
        return self.state + self.activations


def parameter_count(config: TrialConfig) -> int:
    """The trial's parameter count, from a model built on the meta device (no memory)."""
    with torch.device("meta"):
        model = ARCHITECTURES[config.model.arch](config.model, len(CharTokenizer()), derive(config).input_layout)
    return count_parameters(model)


def training_length(config: TrialConfig) -> int:
    """The longest training row in tokens (start and end tokens included)."""
    derived = derive(config)
    longest = derived.distribution.longest_digits(derived.task, config.task.train_digits)
    return sequence_length(derived.task, longest, config.format, training=True, width=derived.longest_digits)


def activation_bytes(config: TrialConfig) -> int:
    """What autograd keeps for backward over one training batch of the trial (module
    docstring: the count per layer and token)."""
    dims = SIZES[config.model.size]
    layers = dims.n_layers * config.model.loops
    if config.model.arch == "encoder_decoder":
        layers += dims.encoder_layers
    rows, length = config.train.batch_size, training_length(config)
    per_token_layer = PER_LAYER_WIDTHS * dims.d_model + PER_FFN_WIDTHS[config.model.ffn] * dims.d_ff
    per_token_layer += SCORE_COPIES * dims.n_heads * length
    per_token = layers * per_token_layer + OUTSIDE_WIDTHS * dims.d_model + LOGIT_COPIES * len(CharTokenizer())
    return FLOAT32 * rows * length * per_token


def seed_memory(config: TrialConfig) -> SeedMemory:
    """One seed's training memory in a seed batch, from `config` alone."""
    return SeedMemory(STATE_COPIES * FLOAT32 * parameter_count(config), activation_bytes(config))
