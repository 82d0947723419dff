"""Copies from the host to the device that do not wait for the device.

A plain `tensor.to("cuda")` from pageable host memory synchronises the stream: the host
waits until every kernel queued before it has run, so the next step's batch cannot be
prepared while the GPU trains on this one. Staged through pinned memory the copy is
queued like a kernel (torch's host allocator keeps the pinned buffer until it is done).
On the CPU it is the plain copy."""

from __future__ import annotations

import torch


def to_device(tensor: torch.Tensor, device: torch.device | str) -> torch.Tensor:
    """`tensor` (on the host) on `device`, queued without a host synchronisation on CUDA."""
    device = torch.device(device)
    if device.type != "cuda" or tensor.device.type != "cpu":
        return tensor.to(device)
    return tensor.pin_memory().to(device, non_blocking=True)
