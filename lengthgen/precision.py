"""Numeric precision of training and evaluation (`train.precision`): a registry.

- `fp32`: float32 throughout, TF32 off (IEEE float32 matmuls on a GPU).
- `tf32`: float32 weights, activations and optimizer state; CUDA matmuls and
  convolutions in TF32 (10-bit mantissa products, float32 sums). TF32 is a CUDA
  setting: on a CPU a tf32 trial computes exactly what an fp32 one does.
- `bf16`: the forward pass under torch.autocast in bfloat16 (matmuls and attention in
  bfloat16, norms and softmax-sensitive ops as autocast decides); parameters,
  optimizer state and the loss stay in float32. On CPU, autocast to bfloat16 works
  but is only fast on processors with bf16 matrix units.

The TF32 switch is global to the process, like torch's deterministic mode:
`precision_mode` sets it for one trial and puts the previous setting back after, so a
Ray worker that runs several trials never carries one trial's precision into the next.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Precision:
    #: the dtype of the forward pass under torch.autocast, or None (float32)
    autocast: torch.dtype | None
    #: TF32 for float32 CUDA matmuls and cuDNN convolutions (`torch.backends.*.allow_tf32`)
    tf32: bool


PRECISIONS: dict[str, Precision] = {
    "fp32": Precision(autocast=None, tf32=False),
    "tf32": Precision(autocast=None, tf32=True),
    # float32 ops outside autocast (the loss, the optimizer) stay IEEE, as they were
    # before tf32 existed: a bf16 trial's numbers do not depend on the TF32 switch
    "bf16": Precision(autocast=torch.bfloat16, tf32=False),
}


def autocast(device: torch.device, precision: str) -> contextlib.AbstractContextManager:
    dtype = PRECISIONS[precision].autocast
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=dtype)


#: the process-global TF32 switches: cuBLAS matmuls, cuDNN convolutions. Set through
#: the `allow_tf32` flags rather than torch 2.9's `fp32_precision` strings: code that
#: reads the flags (inductor among others) raises once the strings were set to a mix
#: the flags cannot express (conv and RNN apart)
_SWITCHES = ((torch.backends.cuda.matmul, "allow_tf32"), (torch.backends.cudnn, "allow_tf32"))


@contextlib.contextmanager
def precision_mode(precision: str) -> Iterator[None]:
    """Run the block with the TF32 setting of ``precision``, then restore the process's
    previous one. Set whatever the device: the settings only act on CUDA kernels."""
    before = [getattr(owner, name) for owner, name in _SWITCHES]
    for owner, name in _SWITCHES:
        setattr(owner, name, PRECISIONS[precision].tf32)
    try:
        yield
    finally:
        for (owner, name), value in zip(_SWITCHES, before, strict=True):
            setattr(owner, name, value)
