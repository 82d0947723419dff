"""train.compile: the model's forward compiled whole, with what depends on the data
decided on the host before it.

A compiled forward breaks into pieces wherever the code reads a tensor's value on the
host (`.item()`, `bool(tensor)`, `int(tensor.max())`) or makes a shape that depends on
the data (boolean indexing): each break is a return to Python and a synchronisation
with the GPU. So the training step is cut in three: `Architecture.training_inputs`
(eager: the widths and masks of the batch), the forward (compiled, no host read), and
the selection of the supervised outputs (eager: a data-dependent shape). Whether the
batch's rows share their positions, which the uncompiled forward reads from the data
(`lengthgen.model.position.stack.shared_rows`), is decided before the forward
(`Architecture.rows_decided`); the checks of learned tables run before it too
(`Architecture.check_positions`). A training step decides both, and the supervised
outputs' index, on the host before the batch is copied (lengthgen.batches.placed_parts).
tests/test_compiled_step.py asks torch._dynamo for zero graph breaks on every
architecture and positional encoding.

How many graphs a trial compiles: the batch width changes from batch to batch (the
longest question of each), so the forward is compiled with torch's automatic dynamic
shapes: the first width gives a static graph, the second a graph whose widths are
symbolic, which every later width reuses. Each value of the shared-rows decision, and
each (frozen, trained) loop count of the progressive loss, is a graph of its own:
`MAX_GRAPHS` per such value. Batches are not padded to width buckets: a symbolic width
bounds the graphs without training on padding, and leaves the batches (and so the
numbers of an uncompiled trial) as they are.

train.compile_scope step (`CompiledLoss`) compiles the loss with the forward: the mean
cross entropy over the supervised outputs, written as one over every output with the
unsupervised targets ignored (the same mean, summed in another order), so the graph
has no data-dependent shape and AOTAutograd compiles its backward whole. On a CPU it
asks Inductor for its C++ wrapper: the generated Python that calls each kernel (a
quickstart step calls about 65, 39 of them matmuls) costs more than the small kernels
it calls. A later model of the same config (the next trial in a reused worker) runs
the graphs already compiled: Dynamo guards the module's structure, not its identity.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import torch
import torch.nn.functional as F

from lengthgen.model.base import Architecture, Batch, Positions, supervised_outputs

#: graphs compiled per value of the host decisions (rows shared or not, loop counts):
#: one static at the first width, one with a symbolic width after
MAX_GRAPHS = 2
#: torch._dynamo's recompile limit must leave room for every graph of a trial (both
#: values of the shared-rows decision, the loop counts of a looped model up to 16);
#: past the limit it would run the forward uncompiled, silently
RECOMPILE_LIMIT = 64
#: Inductor's options for `CompiledLoss` on a CPU: the C++ wrapper (the module docstring).
#: Not on CUDA, where the Python wrapper's cost hides behind the asynchronous kernels
INDUCTOR_CPU_OPTIONS: dict[str, object] = {"cpp_wrapper": True}
#: the target `CompiledLoss` gives the outputs that are not trained (cross_entropy's default)
IGNORED = -100


class SupervisedLoss(NamedTuple):
    """What `CompiledLoss` returns for a part, where a forward_batch returns the supervised
    logits and targets (lengthgen.training_step.accumulate_gradients takes both)."""

    #: the mean cross entropy of the part's supervised outputs
    loss: torch.Tensor
    #: how many outputs are supervised (the weight of the part in a split batch)
    count: int


class CompiledForward:
    """`model.forward_batch` with `model.forward` compiled by torch.compile (`backend`,
    `mode`: "reduce-overhead" adds CUDA graphs). Shares its parameters with `model`."""

    def __init__(self, model: Architecture, backend: str = "inductor", mode: str | None = None) -> None:
        self.model = model
        torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, RECOMPILE_LIMIT)
        self.forward = torch.compile(model.forward, backend=backend, mode=mode if backend == "inductor" else None)

    def __call__(self, batch: Batch, positions: Positions, **options) -> tuple[torch.Tensor, torch.Tensor]:
        inputs = self.model.training_inputs(batch, positions)
        if batch.rows_shared is None:  # not decided on the host (lengthgen.batches.placed_parts)
            self.model.check_positions(positions)
        with self.model.rows_decided(positions, shared=batch.rows_shared):
            logits = self.forward(*inputs.args, **inputs.kwargs, **options)
        return supervised_outputs(logits, inputs, batch.supervised_index)


class CompiledLoss:
    """train.compile_scope step: the mean cross entropy of a batch's supervised outputs,
    computed with `model.forward` in one compiled graph (the module docstring). Called as
    a forward_batch is; returns a `SupervisedLoss`. Shares its parameters with `model`."""

    def __init__(self, model: Architecture, device: torch.device, backend: str = "inductor") -> None:
        self.model = model
        torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, RECOMPILE_LIMIT)
        options = dict(INDUCTOR_CPU_OPTIONS) if backend == "inductor" and device.type == "cpu" else None
        self.loss = torch.compile(self.supervised_loss, backend=backend, options=options)

    def supervised_loss(self, targets: torch.Tensor, supervised: torch.Tensor, args: tuple, kwargs: dict,
                        options: dict) -> torch.Tensor:
        """The mean cross entropy of the supervised outputs: the one a forward_batch's
        selected logits and targets give, over every output with the others ignored."""
        logits = self.model(*args, **kwargs, **options)
        ignored = targets.masked_fill(~supervised, IGNORED)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), ignored.reshape(-1), ignore_index=IGNORED)

    def __call__(self, batch: Batch, positions: Positions, **options) -> SupervisedLoss:
        inputs = self.model.training_inputs(batch, positions)
        if batch.rows_shared is None:  # not decided on the host (lengthgen.batches.placed_parts)
            self.model.check_positions(positions)
        count = (len(batch.supervised_index) if batch.supervised_index is not None
                 else int(inputs.supervised.sum()))
        with self.model.rows_decided(positions, shared=batch.rows_shared):
            loss = self.loss(inputs.targets, inputs.supervised, inputs.args, inputs.kwargs, options)
        return SupervisedLoss(loss, count)


class CompileScope(NamedTuple):
    """What a train.compile_scope compiles, and how the optimizer steps with it."""

    #: the trial's forward_batch, from (model, device, backend)
    forward_batch: Callable[[Architecture, torch.device, str], Callable]
    #: AdamW fused on every device: one call for every parameter, where the foreach form
    #: makes about 20; for a scope whose numbers are not the eager step's anyway
    fused_adamw: bool


#: train.compile_scope: forward, the model's forward alone; step, the forward with its loss
COMPILE_SCOPES = {
    "forward": CompileScope(lambda model, device, backend: CompiledForward(model, backend), fused_adamw=False),
    "step": CompileScope(CompiledLoss, fused_adamw=True),
}
