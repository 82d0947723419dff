"""Numeric precision of training and evaluation: a registry of autocast dtypes.

`bf16` runs the forward pass under torch.autocast in bfloat16 (the usual choice on
recent GPUs); parameters, optimizer state and the loss stay in float32. On CPU,
autocast to bfloat16 works but is only fast on processors with bf16 matrix units.
"""

from __future__ import annotations

import contextlib

import torch

PRECISIONS: dict[str, torch.dtype | None] = {"fp32": None, "bf16": torch.bfloat16}


def autocast(device: torch.device, precision: str) -> contextlib.AbstractContextManager:
    dtype = PRECISIONS[precision]
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=dtype)
