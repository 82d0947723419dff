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
forward pass, evaluation included) to which the first injection adds the embedded
input. Here the state starts at zero, so that the first layer reads the embedded
input itself, as a model without loops does: no draw outside the seeds, and
`loops: 1` without injection is the plain decoder bit for bit. With `none` the
authors' code would discard the input (only noise enters); here `none` is the plain
stack. Their other injection types (`linear`, `ffn`: a learned map of the state and
the input concatenated) are not implemented.
"""

from __future__ import annotations

from dataclasses import dataclass


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
