"""The training section of a trial config (`train:` in a study file): the optimiser, its
schedule, precision and compilation; one comment per field. Re-exported by
lengthgen.config, where the other sections live."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from lengthgen.batch_ramp import BatchRamp
from lengthgen.compiled_step import COMPILE_SCOPES
from lengthgen.eval_config import STRICT
from lengthgen.model.recurrence import STATE_NOISE_DRAWS
from lengthgen.precision import PRECISIONS

PrecisionName = Literal[tuple(PRECISIONS)]
StateNoiseDrawName = Literal[tuple(STATE_NOISE_DRAWS)]
CompileScopeName = Literal[tuple(COMPILE_SCOPES)]

_STRICT = STRICT


@dataclass(frozen=True)
class TrainConfig:
    __pydantic_config__ = _STRICT
    #: optimiser steps the trial trains
    steps: int = 2000
    #: rows of a batch (with batch_ramp: of a micro-batch)
    batch_size: int = 64
    #: peak learning rate, reached after `warmup` steps, then cosine decay to
    #: `min_lr_ratio` x lr
    lr: float = 1e-3
    #: steps of linear warm-up from 0 to lr
    warmup: int = 100
    #: the cosine's floor as a share of lr: 0 decays to 0 (001 E.2), 0.1 to a tenth (001
    #: Table E.1; Cho et al. 2024's recipe)
    min_lr_ratio: float = 0.0
    #: AdamW's decoupled weight decay, of the parameters with two or more dimensions only
    #: (not biases or norm gains: lengthgen.training_step)
    weight_decay: float = 0.1
    #: AdamW's epsilon (torch's default 1e-8; McLeish et al. 2024's code: 1e-12)
    adam_eps: float = 1e-8
    #: gradient norm clip (0 disables)
    grad_clip: float = 1.0
    #: report the training loss every this many steps
    log_every: int = 50
    #: fp32; tf32 (float32 storage, TF32 CUDA matmuls); or bf16 autocast
    #: (lengthgen.precision). Part of the trial's identity at tf32 or bf16
    precision: PrecisionName = "fp32"
    #: compile the model's forward with torch.compile, whole (no graph break) and with a
    #: symbolic batch width (lengthgen.compiled_step): slower start, faster steps on GPUs
    compile: bool = False
    #: what train.compile compiles (lengthgen.compiled_step): forward, the model's forward
    #: alone; step, the forward with its loss (and so the backward, through AOTAutograd),
    #: with AdamW fused, and on a CPU Inductor's C++ wrapper: a quickstart step on one CPU
    #: thread in fewer, fused calls (docs/performance.md). Other numbers than forward's
    #: up to float rounding
    compile_scope: CompileScopeName = "forward"
    #: torch's deterministic algorithms (and cuDNN's, cuBLAS's fixed workspace): two runs
    #: on one GPU give the same numbers bit for bit, at some cost in speed; on a CPU
    #: training is repeatable without it (lengthgen.determinism)
    deterministic: bool = False
    #: train each batch as at most this many groups of rows of consecutive lengths, each
    #: trimmed to its longest row, by gradient accumulation before the one optimizer step:
    #: the same questions, positions and gradient as the padded batch (up to float
    #: rounding), less compute on padding (lengthgen.batches.length_buckets). 1: one
    #: padded batch. A no-op with format.fixed_length (aligned rows all have one width).
    #: With model.dropout > 0 the dropout masks differ from the padded batch's; with
    #: train.compile the group widths share the graph of a symbolic width
    length_buckets: int = 1
    #: looped models (model.loops >= 2): McLeish et al. 2024's objective, the progressive
    #: loss of Bansal et al. 2022 with this alpha (1 in every run of theirs): each step's
    #: loss is (1 - alpha) x that of loops//2 trained loops after the others without
    #: gradient + alpha x that of a random number of loops, the last of them trained
    #: (lengthgen.model.recurrence.progressive_terms). 0: off, the plain loss through every loop
    progressive_loss_alpha: float = 0.0
    #: null: every optimiser step trains one batch of batch_size rows. {to: B, over: r}:
    #: the optimiser batch grows from one micro-batch of batch_size rows to B rows over the
    #: first r of the steps, by gradient accumulation, as McLeish et al. 2024's code
    #: (lengthgen.batch_ramp); B a multiple of batch_size
    batch_ramp: BatchRamp | None = None
    #: model.state_init noise only: where the training steps' noise is drawn. host: from a
    #: CPU generator and copied, the same noise on every device; device: from the trial's
    #: device's generator with the same seed, other values on a GPU than on the host and
    #: no host draw (lengthgen.model.recurrence.STATE_NOISE_DRAWS). On a CPU both are one
    #: draw. Evaluation draws on the host either way
    state_noise_draw: StateNoiseDrawName = "host"

    def __post_init__(self) -> None:
        for name in ("steps", "batch_size", "log_every", "length_buckets"):
            if getattr(self, name) < 1:
                raise ValueError(f"train.{name} must be >= 1, got {getattr(self, name)}")
        if self.lr <= 0:
            raise ValueError(f"train.lr must be > 0, got {self.lr}")
        if not 0 <= self.min_lr_ratio <= 1:
            raise ValueError(f"train.min_lr_ratio must be in [0, 1] (the cosine's floor as a share of "
                             f"train.lr), got {self.min_lr_ratio}")
        if not 0 <= self.progressive_loss_alpha <= 1:
            raise ValueError(f"train.progressive_loss_alpha must be in [0, 1] (0: off), got {self.progressive_loss_alpha}")
        if self.batch_ramp is not None and (self.batch_ramp.to % self.batch_size or self.batch_ramp.to <= self.batch_size):
            raise ValueError(
                f"train.batch_ramp.to ({self.batch_ramp.to}) is the optimiser batch the ramp reaches in micro-batches "
                f"of train.batch_size ({self.batch_size}) rows: a multiple of it, larger than it"
            )
        if not self.adam_eps > 0:
            raise ValueError(f"train.adam_eps must be > 0, got {self.adam_eps}")
        if self.warmup < 0 or self.weight_decay < 0 or self.grad_clip < 0:
            raise ValueError("train.warmup, train.weight_decay and train.grad_clip must be >= 0")
        if self.compile_scope != "forward" and not self.compile:
            raise ValueError(f"train.compile_scope {self.compile_scope} is what train.compile compiles: "
                             f"set train.compile: true, or leave train.compile_scope at forward")
        if self.deterministic and self.compile:
            raise ValueError(
                "train.deterministic: true cannot be honoured with train.compile: true (compiled "
                "kernels are chosen by autotuning, which may differ between runs); set one of them to false"
            )
