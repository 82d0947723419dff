"""Initialisation schemes (model.init) and the scale of attention scores
(model.attention_scale).

`gpt2` (the default): every linear and embedding weight N(0, 0.02^2), biases 0, norm
gains 1, scores q.k / sqrt(d_head) (Radford et al. 2019, GPT-2).

`t5`: the Mesh-TensorFlow scheme T5 uses (Raffel et al. 2020, arXiv 1910.10683), as
Cho et al. 2024's released code draws it (position-coupling,
src/model/modeling/custom_t5_decoder_only.py, CustomDecoderOnlyT5._init_weights and
CustomT5Stack.__init__): embeddings, the learned position table included, N(0, 1); a
linear map of fan-in n N(0, 1/n), i.e. keys and values N(0, 1/d), the attention output
N(0, 1/(H d_kv)), the feed-forward's input maps N(0, 1/d) and its output N(0, 1/d_ff);
queries N(0, 1/(d d_kv)). The query's extra 1/sqrt(d_kv) is T5's way of folding the
score scale into the weights: its scores are unscaled (`attention_scale: none`). The
release ties the output head to the token embedding and multiplies the last hidden
state by d^-1/2; here the head is its own N(0, 1/d) map, the same distribution of
logits at initialisation (listed in docs/methods.md).

`deepnorm_straight`: McLeish et al. 2024's `init.type: deepnorm-straight`
(mcleish7/arithmetic, cramming/config/arch/crammed-depthrecurrent.yaml line 56;
cramming/architectures/components.py `_init_module`, lines 292-371), the DeepNet
initialisation (Wang, Ma, Dong, Huang, Zhang, Wei 2022, "DeepNet: Scaling Transformers
to 1,000 Layers", arXiv 2203.00555, Fig. 2) with gain beta = (8 N)^(-1/4), N the
compute depth (their `layers_in_recurrent_block * maximal_recurrence`, here n_layers
x model.loops). Every linear map Xavier-normal with that gain, std beta sqrt(2 /
(fan_in + fan_out)) (Glorot & Bengio 2010); inside the attention (their
nn.MultiheadAttention branch) queries and keys Xavier-normal of a d x d map with gain 1,
values and the output map with gain beta; embeddings (tokens, Abacus, learned
positions) N(0, 1/d); biases 0, norm gains 1. At d 1024 and N 16: queries and keys
0.03125, values and the output map 0.0093, the GeGLU's input 0.0076 and output 0.0093,
embeddings 0.031. The output layer's fan-out is its outputs, lg-study's 120 symbols
(std 0.0124 at d 1024), or `model.head_init_fan_out`: the release's decoder has the 19
symbols of its tokenizer (crammed_depthrecurrent.py line 451; arithmetic_tokenizers.py,
four specials and "0123456789+-x= "), std 0.0130.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from lengthgen.model.attention import SelfAttention


def _gpt2_std(module: nn.Linear | nn.Embedding, depth: int) -> float:
    return 0.02


def _t5_std(module: nn.Linear | nn.Embedding, depth: int) -> float:
    return 1.0 if isinstance(module, nn.Embedding) else module.in_features**-0.5


def deepnorm_gain(depth: int) -> float:
    """beta = (8 N)^(-1/4) of `deepnorm-straight` (`_init_module`, line 300)."""
    return (8 * depth) ** -0.25


class OutputLayer(nn.Linear):
    """The language-model head, d -> vocabulary, without bias. `init_fan_out` is the
    number of outputs a fan-out-reading initialisation (Xavier's) counts: its own by
    default, another with model.head_init_fan_out, so that a head over lg-study's
    vocabulary of every task starts as wide as one over the release's vocabulary."""

    def __init__(self, d_model: int, vocab_size: int, init_fan_out: int | None = None) -> None:
        super().__init__(d_model, vocab_size, bias=False)
        self.init_fan_out = init_fan_out or vocab_size


def fan_out(module: nn.Linear) -> int:
    """The fan-out Xavier's std counts: the map's outputs, the head's `init_fan_out`."""
    return module.init_fan_out if isinstance(module, OutputLayer) else module.out_features


def _deepnorm_std(module: nn.Linear | nn.Embedding, depth: int) -> float:
    if isinstance(module, nn.Embedding):
        return module.embedding_dim**-0.5
    # Glorot & Bengio 2010's Xavier-normal: gain sqrt(2 / (fan_in + fan_out))
    return deepnorm_gain(depth) * math.sqrt(2.0 / (module.in_features + fan_out(module)))


@torch.no_grad()
def narrow_queries(model: nn.Module, depth: int) -> None:
    """Divide the query rows of every fused query-key-value map (drawn N(0, 1/d) with
    the keys and values) by sqrt(d_kv): N(0, 1/(d d_kv)), T5's queries."""
    for module in model.modules():
        if isinstance(module, SelfAttention):
            module.qkv.weight[: module.qkv.out_features // 3] /= math.sqrt(module.head_dim)


@torch.no_grad()
def deepnorm_attention(model: nn.Module, depth: int) -> None:
    """The fused query-key-value map was drawn as one Xavier-normal map of d x 3d with
    gain beta; rescale its blocks to the release's three d x d draws: queries and keys
    with gain 1, values with gain beta (`_init_module`, lines 355-361)."""
    for module in model.modules():
        if isinstance(module, SelfAttention):
            weight, d = module.qkv.weight, module.qkv.in_features
            drawn = _deepnorm_std(module.qkv, depth)
            weight[: 2 * d] *= d**-0.5 / drawn
            weight[2 * d :] *= deepnorm_gain(depth) * d**-0.5 / drawn


def _nothing(model: nn.Module, depth: int) -> None:
    return None


@dataclass(frozen=True)
class Initialization:
    """One model.init scheme."""

    #: the standard deviation of a linear or embedding weight, given the model's compute
    #: depth (n_layers x model.loops)
    std: Callable[[nn.Linear | nn.Embedding, int], float]
    #: what the scheme does after every weight is drawn (the attention's own scales)
    finish: Callable[[nn.Module, int], None]
    #: ModelConfig fields only this scheme reads (refused with the others:
    #: lengthgen.config.refuse_unread_options)
    options: tuple[str, ...] = ()


INITIALIZATIONS: dict[str, Initialization] = {
    "gpt2": Initialization(std=_gpt2_std, finish=_nothing),
    "t5": Initialization(std=_t5_std, finish=narrow_queries),
    "deepnorm_straight": Initialization(std=_deepnorm_std, finish=deepnorm_attention,
                                        options=("head_init_fan_out",)),
}


class UnscaledQueries(nn.Linear):
    """A fused query-key-value map whose queries come out multiplied by sqrt(d_head):
    the attention's q.k / sqrt(d_head) is then q.k, unscaled, as in T5 (exact where
    sqrt(d_head) is a power of two). The gain is a buffer outside the state dict, so
    the weights and checkpoints are those of the plain map."""

    def __init__(self, plain: nn.Linear, head_dim: int) -> None:
        super().__init__(plain.in_features, plain.out_features, bias=plain.bias is not None)
        gain = torch.ones(plain.out_features)
        gain[: plain.out_features // 3] = math.sqrt(head_dim)
        self.register_buffer("gain", gain, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x) * self.gain.to(x.dtype)


def _scaled(qkv: nn.Linear, head_dim: int) -> nn.Linear:
    return qkv


#: model.attention_scale -> the query-key-value map the attention uses, given the plain one
ATTENTION_SCALES: dict[str, Callable[[nn.Linear, int], nn.Linear]] = {
    "inv_sqrt_d": _scaled,
    "none": UnscaledQueries,
}
