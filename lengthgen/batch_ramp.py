"""The optimiser batch ramped up over training (train.batch_ramp), by gradient
accumulation of micro-batches of train.batch_size rows.

McLeish et al. 2024's released code (mcleish7/arithmetic,
cramming/backend/torch_default.py, `schedule_batch_size`, with `batch_size: 8192`,
`batch_size_ramp: 0.60` of cramming/config/train/cramming.yaml) starts at one
micro-batch and, after every optimiser step, sets the batch to

    min(int(f * B / r // m + 1) * m, B)

rows, f the share of the budget elapsed, B the target batch, r the ramp's share, m the
micro-batch; each micro-batch's mean loss enters divided by the number of micro-batches
(`backward`: loss / accumulation_steps_expected). f is their share of a wall-clock
budget; here it is the share of train.steps done, so the ramp is a function of the
step alone and a trial is reproducible and resumable.

Micro-batches are numbered along the trial: optimiser step s trains micro-batches
first(s) .. first(s) + k(s) - 1, first(s) the micro-batches of the steps before it;
micro-batch number i is batch number i of the trial's data stream (its questions and
positions from the data seed and i). Without a ramp every step is one micro-batch,
number s: the trial of before the option existed.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from lengthgen.eval_config import STRICT


@dataclass(frozen=True)
class BatchRamp:
    """train.batch_ramp: reach `to` rows an optimiser step over the first `over` of the steps."""

    __pydantic_config__ = STRICT
    #: the target optimiser batch B (rows), a multiple of train.batch_size
    to: int
    #: r, the share of train.steps over which the batch grows from one micro-batch to B
    over: float

    def __post_init__(self) -> None:
        if not 0 < self.over < 1:
            raise ValueError(f"train.batch_ramp.over is the share of train.steps the ramp takes, in (0, 1), "
                             f"got {self.over}")


def micro_batches(ramp: BatchRamp | None, micro: int, steps: int, step: int) -> int:
    """k(step): the micro-batches of optimiser step `step` (from 0) of `steps`."""
    if ramp is None:
        return 1
    share = step / steps
    return min(int(share * ramp.to / ramp.over // micro + 1) * micro, ramp.to) // micro


@lru_cache(maxsize=16)
def _firsts(ramp: BatchRamp, micro: int, steps: int) -> np.ndarray:
    counts = np.array([micro_batches(ramp, micro, steps, s) for s in range(steps)], dtype=np.int64)
    return np.concatenate([[0], np.cumsum(counts)])


def micro_range(ramp: BatchRamp | None, micro: int, steps: int, step: int) -> range:
    """The numbers of the micro-batches optimiser step `step` trains."""
    if ramp is None:
        return range(step, step + 1)
    first = int(_firsts(ramp, micro, steps)[step])
    return range(first, first + micro_batches(ramp, micro, steps, step))
