"""The one training step of a trial (`TrainingStep`): `lengthgen.training.train`
takes it at every step and `lg-study bench` times it."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from functools import partial
from typing import NamedTuple

import numpy as np
import torch
import torch.nn.functional as F

from lengthgen.batches import TrainingBatch, batch_parts, batch_tensors, placed_parts
from lengthgen.compiled_step import COMPILE_SCOPES, SupervisedLoss
from lengthgen.config import TrainConfig, TrialConfig
from lengthgen.model.base import Architecture, Batch, Positions
from lengthgen.model.position.samplers import build_position_sampler
from lengthgen.model.recurrence import STATE_NOISE_DRAWS, progressive_terms
from lengthgen.precision import autocast

#: where a step's batch and positions are prepared before the copy to its device
HOST = torch.device("cpu")


def learning_rate(config: TrialConfig, step: int) -> float:
    """Linear warmup to train.lr over train.warmup steps, then cosine decay to
    train.min_lr_ratio x train.lr (0 by default, as 001 E.2; 0.1 in 001 Table E.1 and in
    Cho et al. 2024's recipe). A floor of 0 adds 0.0 to the undecayed formula: the same
    bits as before the floor existed."""
    train = config.train
    if step < train.warmup:
        return train.lr * (step + 1) / train.warmup
    progress = (step - train.warmup) / max(1, train.steps - train.warmup)
    floor = train.lr * train.min_lr_ratio
    return floor + (train.lr - floor) * 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))


def accumulate_gradients(
    forward_batch: Callable, parts: list[tuple[Batch, Positions]], device: torch.device, precision: str,
    weight: float = 1.0,
) -> torch.Tensor:
    """Forward and backward of each part of a batch. Each part's mean cross entropy is
    weighted by its share of the batch's supervised tokens, so the summed gradient is
    that of the whole batch's mean cross entropy. Returns that mean (detached). With
    one part (the whole padded batch) this is the plain training step, bit for bit.
    `weight` scales the loss (a term of the progressive loss); 1 leaves it untouched."""
    total = supervised_total(parts) if len(parts) > 1 else None
    losses, counted = [], 0
    for part, positions in parts:
        with autocast(device, precision):
            loss, count = part_loss(forward_batch(part, positions))
        if total is not None:
            loss = loss * (count / total)
            counted += count
        if weight != 1.0:
            loss = loss * weight
        loss.backward()
        losses.append(loss.detach())
    if total is not None and counted != total:
        raise RuntimeError(f"{counted} supervised targets from {total} answer-mask tokens")
    return sum(losses[1:], losses[0])


def part_loss(outputs: tuple[torch.Tensor, torch.Tensor] | SupervisedLoss) -> tuple[torch.Tensor, int]:
    """(mean cross entropy, supervised outputs) of what a forward_batch gave: the
    supervised logits and targets, or the loss itself (train.compile_scope step's
    `CompiledLoss`, which computes it inside its compiled graph)."""
    if isinstance(outputs, SupervisedLoss):
        return outputs
    logits, targets = outputs
    return F.cross_entropy(logits.float(), targets), len(targets)


def supervised_total(parts: list[tuple[Batch, Positions]]) -> int:
    """The supervised tokens of a split batch: counted on the host where the parts carry
    their supervised index (lengthgen.batches.placed_parts), else read from the device."""
    if all(part.supervised_index is not None for part, _ in parts):
        return sum(len(part.supervised_index) for part, _ in parts)
    return int(sum(part.answer_mask.sum() for part, _ in parts))


def _step_generator(config: TrialConfig, step: int, stream: int = 1) -> torch.Generator:
    """Torch randomness of training step `step`, from the data seed only: stream 1 the
    position sampling, stream 2 the loop counts of the progressive loss, stream 3 the
    noise of model.state_init noise."""
    return torch.Generator().manual_seed(_step_seed(config, step, stream))


def _step_seed(config: TrialConfig, step: int, stream: int) -> int:
    """The seed of `_step_generator`'s stream, for a generator on another device."""
    return int(np.random.SeedSequence([config.seeds.data, step, stream]).generate_state(1)[0])


def _decay_groups(model: torch.nn.Module, weight_decay: float) -> list[dict]:
    """Decay matrices only; biases and norm gains are not decayed (nanoGPT)."""
    params = [p for p in model.parameters() if p.requires_grad]
    return [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]


#: AdamW's implementation per device type: on CUDA the fused kernel (one launch for
#: every parameter instead of a few per tensor); on the CPU the foreach one (each
#: operation over every tensor at once), which gives the per-tensor loop's numbers bit
#: for bit (tests/test_cpu_step.py) in fewer calls: the fused kernel would be faster
#: still, but rounds differently from the numbers the CPU's pins were trained with
ADAMW_OPTIONS: dict[str, dict[str, bool]] = {"cuda": {"fused": True}, "cpu": {"foreach": True}}


def adamw_options(device: torch.device) -> dict[str, bool]:
    return ADAMW_OPTIONS.get(device.type, {})


def clip_gradients(model: torch.nn.Module, max_norm: float) -> None:
    """Clip the gradient's global norm to `max_norm` in one foreach pass over every
    tensor (the per-tensor loop's numbers bit for bit on the CPU, tests/test_cpu_step.py;
    torch's default already on CUDA)."""
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm, foreach=True)


def build_optimizer(model: torch.nn.Module, train: TrainConfig, device: torch.device | None = None) -> torch.optim.AdamW:
    """AdamW over the decay groups, at train.lr until the schedule sets each step's rate,
    in the implementation of the device the model trains on (`ADAMW_OPTIONS`); fused on
    every device where train.compile_scope says so (lengthgen.compiled_step.COMPILE_SCOPES)."""
    options = adamw_options(device or next(model.parameters()).device)
    if train.compile and COMPILE_SCOPES[train.compile_scope].fused_adamw:
        options = {"fused": True}
    return torch.optim.AdamW(_decay_groups(model, train.weight_decay), lr=train.lr, betas=(0.9, 0.98),
                             eps=train.adam_eps, **options)


def compiled_forward_batch(train: TrainConfig, model: Architecture, device: torch.device,
                           backend: str = "inductor") -> Callable:
    """The trial's forward_batch: the model's, or compiled by `backend` as train.compile
    and train.compile_scope say (lengthgen.compiled_step). A compiled form shares its
    parameters with `model`; evaluation runs uncompiled."""
    if not train.compile:
        return model.forward_batch
    return COMPILE_SCOPES[train.compile_scope].forward_batch(model, device, backend)


class MicroBatches(NamedTuple):
    """The micro-batches of one optimiser step (train.batch_ramp)."""

    #: each micro-batch's number in the trial's stream of batches (lengthgen.batch_ramp)
    numbers: list[int]
    #: each micro-batch's parts (TrainingStep.parts)
    parts: list[list[tuple[Batch, Positions]]]


class TrainingStep:
    """The one optimizer step of a trial: `train` takes it at every step, and `lg-study
    bench` times it, so that a benchmark measures the step trials take (decay groups,
    schedule, dropout seed, precision, clipping included).

    `parts` turns batch number `step` into what is trained (tensors, the positions
    drawn from the data seed, the length buckets); `update` trains on them. A caller
    that times the update alone prepares the parts first."""

    def __init__(
        self, config: TrialConfig, model: Architecture, device: torch.device, forward_batch: Callable | None = None
    ) -> None:
        """`forward_batch`: another form of model.forward_batch (a benchmark's compile
        mode, a reference model); by default the trial's, compiled with train.compile."""
        self.config, self.model, self.device = config, model, device
        if config.model.attention_kernel == "flex" and device.type != "cuda":
            raise ValueError(f"model.attention_kernel flex trains on CUDA only: torch {torch.__version__} has no "
                             f"FlexAttention backward on {device.type!r}; use model.attention_kernel: sdpa there")
        self.optimizer = build_optimizer(model, config.train, device)
        if forward_batch is None:
            forward_batch = compiled_forward_batch(config.train, model, device)
        self.forward_batch = forward_batch
        self.sampler = build_position_sampler(config.model)

    def parts(self, step: int, batch: TrainingBatch) -> list[tuple[Batch, Positions]]:
        """Batch number `step` on the device, with its positions, whole or in length
        buckets, and the host's decisions (lengthgen.batches.placed_parts)."""
        return placed_parts(self.model, self.host_parts(step, batch), self.device)

    def host_parts(self, step: int, batch: TrainingBatch) -> list[tuple[Batch, Positions]]:
        """`parts` before the copy: built on the host, where the positions (integers,
        from the data seed's CPU Generator) are the values the device would compute."""
        tensors = batch_tensors(batch, HOST)
        positions = self.model.sample_positions(
            tensors.tokens, tensors.prompt_lengths, self.sampler, _step_generator(self.config, step), training=True
        )
        return batch_parts(self.model, batch, tensors, positions, self.config.train.length_buckets)

    def update(self, step: int, parts: list[tuple[Batch, Positions]]) -> torch.Tensor:
        """Train on the parts of batch number `step` at its learning rate; the batch's mean
        loss (detached). A loss that is not finite leaves the weights as they were."""
        config = self.config
        for group in self.optimizer.param_groups:
            group["lr"] = learning_rate(config, step)
        if config.model.dropout > 0:
            # dropout draws from torch's global Generator: seeded by (data seed, step), a
            # resumed trial drops the units an uninterrupted one would
            torch.manual_seed(int(np.random.SeedSequence([config.seeds.data, step]).generate_state(1)[0]))
        self.optimizer.zero_grad(set_to_none=True)
        with self._noise(step):
            loss = self.gradients(step, parts)
        if self.optimizer.defaults.get("fused"):
            self._step_unless_not_finite(loss)
        elif torch.isfinite(loss):
            if config.train.grad_clip > 0:
                clip_gradients(self.model, config.train.grad_clip)
            self.optimizer.step()
        return loss

    def _step_unless_not_finite(self, loss: torch.Tensor) -> None:
        """Fused AdamW (CUDA) skips its step on the device when `found_inf` is 1, weights,
        moments and step counts left as they were: the step reads nothing from the GPU,
        where `if torch.isfinite(loss)` would wait for the forward and backward to finish."""
        if self.config.train.grad_clip > 0:  # a non-finite gradient makes the clipped one NaN: that step is skipped
            clip_gradients(self.model, self.config.train.grad_clip)
        self.optimizer.found_inf = (~torch.isfinite(loss)).float()
        self.optimizer.step()

    def _noise(self, step: int) -> contextlib.AbstractContextManager:
        """The noise stream of step `step` for a model whose forward draws noise
        (model.state_init noise); nothing for the others (a benchmark's reference model
        among them, which is no Architecture)."""
        if not getattr(self.model, "stochastic", False):
            return contextlib.nullcontext()
        draw = STATE_NOISE_DRAWS[self.config.train.state_noise_draw]
        return self.model.noise_from(draw(_step_seed(self.config, step, stream=3), self.device))

    def gradients(self, step: int, parts: list[tuple[Batch, Positions]] | MicroBatches) -> torch.Tensor:
        """Accumulate the gradient of the step's loss; the loss (detached). With
        train.progressive_loss_alpha, the sum of the progressive loss's terms, each a
        pass of its own loop counts (lengthgen.model.recurrence.progressive_terms).
        MicroBatches (train.batch_ramp): the mean of their losses, each micro-batch with
        its own progressive-loss draw (from its number), as the authors' accumulation."""
        if not isinstance(parts, MicroBatches):
            return self._micro_gradients(step, parts, 1.0)
        share = 1.0 / len(parts.numbers)
        losses = [self._micro_gradients(number, part, share) for number, part in zip(*parts, strict=True)]
        return sum(losses[1:], losses[0])

    def _micro_gradients(self, number: int, parts: list[tuple[Batch, Positions]], share: float) -> torch.Tensor:
        train = self.config.train
        if not train.progressive_loss_alpha:
            return accumulate_gradients(self.forward_batch, parts, self.device, train.precision, share)
        terms = progressive_terms(train.progressive_loss_alpha, self.config.model.loops,
                                  _step_generator(self.config, number, stream=2))
        losses = [accumulate_gradients(partial(self.forward_batch, loops=loops), parts, self.device, train.precision,
                                       weight * share) for weight, loops in terms]
        return sum(losses[1:], losses[0])

    def ramped(self, step: int, batches: list[TrainingBatch], numbers: range) -> torch.Tensor:
        """Optimiser step `step` on micro-batches `numbers` (train.batch_ramp), each
        with the positions of its own number."""
        return self.update(step, MicroBatches(list(numbers), [self.parts(n, b) for n, b in zip(numbers, batches,
                                                                                                  strict=True)]))

    def __call__(self, step: int, batch: TrainingBatch) -> torch.Tensor:
        """The whole step on batch number `step`: `parts`, then `update`."""
        return self.update(step, self.parts(step, batch))
