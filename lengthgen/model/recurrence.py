"""Looped (depth-recurrent) layers and input injection (model.loops, model.input_injection).

McLeish, Bansal, Stein, Jain, Kirchenbauer, Bartoldson, Kailkhura, Bhatele, Geiping,
Schwarzschild, Goldstein, "Transformers Can Do Arithmetic with the Right Embeddings",
NeurIPS 2024, arXiv 2405.17399, §3.2 (recurrence and input injection). The authors'
code: cramming/architectures/crammed_depthrecurrent.py of the released repository
mcleish7/arithmetic. Their looped transformer runs one block of `layers_in_recurrent_block`
layers `maximal_recurrence` times with shared weights (ScriptableRecurrentLM.forward);
`TransformerBlock.forward` adds the embedded input ("input_injection_type: add", the
default of cramming/config/arch/crammed-depthrecurrent.yaml) to the state before every
pass through the block, that is before every loop. Their "standard transformer with
input injection" (`arch.forward_only_model_with_skip=True`,
ScriptableRecurrentLMReplicaConcat) makes every layer a block of its own, so the input
is added before every layer.

The state the authors start from is noise (`initial_hidden_randomized: True`,
`state_init: embed`: N(0, 0.02^2) from torch's global generator, drawn anew at every
forward pass, generation included: `initialize_state`) to which the first injection
adds the embedded input. model.state_init `embed` (the default) starts the state at
the embedded input itself, so that the first layer reads it as a model without loops
does: no draw outside the seeds, and `loops: 1` without injection is the plain
decoder bit for bit. `noise` is the authors' start: the embedded input plus N(0,
0.02^2) noise drawn anew at every forward pass from the trial's own stream (the data
seed and the step at training, the eval seed and the length at evaluation), so a
trial stays reproducible; generation then re-runs the whole sequence for every token
with fresh noise, as their `_generate` does (no KV cache). Their plain 16-layer
stack is one recurrence of `add` injection, so noise plus the input, then no further
injection: here `state_init: noise` with `input_injection: none` and `loops: 1`.
Their `input_injection_type: none` would discard the input (only noise enters); here
`none` never does. Their other injection types (`linear`, `ffn`: a
learned map of the state and the input concatenated) are not implemented.

Looped models are trained, in the authors' recipe, with a progressive loss: the loss
at a random number of loops, the first of them without gradient (`progressive_terms`,
train.progressive_loss_alpha).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class InputInjection:
    """Before which layers of each loop the embedded input is added to the state."""

    #: before the first layer of every loop (the authors' looped transformer)
    every_loop: bool
    #: before every layer of every loop (their standard transformer with input injection)
    every_layer: bool

    @property
    def adds(self) -> bool:
        """False for `none`, which never adds the input."""
        return self.every_loop or self.every_layer

    def adds_before(self, loop: int, layer: int) -> bool:
        """Whether the input is added before layer `layer` of loop `loop` (both from 0)."""
        if loop == 0 and layer == 0:
            return False  # the state is the embedded input itself
        return self.every_layer or (self.every_loop and layer == 0)

    def adds_anything(self, n_layers: int, loops: int) -> bool:
        """Whether it adds the input anywhere in `loops` loops of `n_layers` layers (`loop`
        needs two loops: the first loop's input is the embedded input already)."""
        return any(self.adds_before(loop, layer) for loop in range(loops) for layer in range(n_layers))


INPUT_INJECTIONS: dict[str, InputInjection] = {
    "none": InputInjection(every_loop=False, every_layer=False),
    "loop": InputInjection(every_loop=True, every_layer=False),
    "layer": InputInjection(every_loop=True, every_layer=True),
}


#: model.state_init -> the standard deviation of the noise the first state adds to the
#: embedded input (0: none); `noise` is the authors' 0.02 (`torch.randn_like(...).mul(0.02)`)
STATE_INITS: dict[str, float] = {"embed": 0.0, "noise": 0.02}


def state_noise(shape: tuple[int, ...], std: float, generator: torch.Generator | None) -> torch.Tensor:
    """N(0, std^2) noise of `shape`, float32 on the CPU, from `generator` (the trial's
    noise stream, Architecture.noise_from); refused without one, so no draw ever comes
    from torch's global generator."""
    if generator is None:
        raise RuntimeError(
            "model.state_init noise draws the first recurrent state from the trial's noise stream, and "
            "this forward pass has none: run it inside Architecture.noise_from(generator)"
        )
    return torch.randn(shape, generator=generator, device=generator.device) * std


def _host_stream(seed: int, device: torch.device) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _device_stream(seed: int, device: torch.device) -> torch.Generator:
    return torch.Generator(device=device).manual_seed(seed)


#: train.state_noise_draw -> (the stream's seed, the trial's device) -> the generator the
#: noise of model.state_init noise is drawn from. `host`: the CPU's, so a seed gives the
#: same noise on every device, copied to it (on a GPU that draw can take as long as the
#: step: 32 M values a micro-batch of sota_abacus); `device`: the trial's device's own
#: generator from the same seed (on a CUDA device its Philox stream: other values than
#: the host's, repeatable on that device, no host draw and no copy)
STATE_NOISE_DRAWS = {"host": _host_stream, "device": _device_stream}


def progressive_terms(alpha: float, loops: int, generator: torch.Generator) -> list[tuple[float, tuple[int, int]]]:
    """The terms of the progressive loss of one training step, [(weight, (frozen, trained))]:
    the loss of a pass of `frozen` loops without gradient, then `trained` loops with it,
    enters with `weight`. Bansal, Schwarzschild, Borgnia, Emam, Huang, Goldblum,
    Goldstein, "End-to-end Algorithm Synthesis with Recurrent Networks: Logical
    Extrapolation Without Overthinking", NeurIPS 2022, arXiv 2202.05826, §3 (the
    progressive loss, alpha weighting its term), as McLeish et al. 2024's code trains
    looped models (`ScriptableRecurrentLMBPTT.forward_progressive` in
    cramming/architectures/crammed_depthrecurrent.py; `alpha: 1.0` in every run):

        (1 - alpha) L(R - B frozen, B trained) + alpha L(n frozen, k trained),
        n ~ U{0 .. R-1}, k ~ U{1 .. min(R - n, B)}, B = max(R // 2, 1),

    R = model.loops; one (n, k) per step, drawn from `generator` (n first, as theirs).
    A term of weight 0 is left out, as they skip it."""
    backprop = max(loops // 2, 1)
    terms = []
    if alpha != 1:
        terms.append((1.0 - alpha, (loops - backprop, backprop)))
    if alpha != 0:
        frozen = int(torch.randint(0, loops, (1,), generator=generator))
        trained = int(torch.randint(1, 1 + min(loops - frozen, backprop), (1,), generator=generator))
        terms.append((alpha, (frozen, trained)))
    return terms
