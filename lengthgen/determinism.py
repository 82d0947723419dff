"""train.deterministic: torch's deterministic algorithms for one trial, and what CUDA needs.

On a CPU, lengthgen's training is already repeatable: the same config, torch build, CPU
and thread count give the same numbers bit for bit. On a GPU, some kernels are not:
atomic additions in backward passes and cuBLAS's split reductions make two runs of one
trial drift apart in the last bits, and training amplifies that (Summers & Dinneen
2021, arXiv 2103.04514). `train.deterministic: true` switches to the deterministic
implementations (torch.use_deterministic_algorithms, cuDNN's deterministic and
non-benchmarked kernels, cuBLAS's fixed workspace), at some cost in speed, and raises
where an operation has none. The settings are global to the process; `deterministic`
restores them when the trial ends, so a worker that runs several trials (Ray reuses
its actors) never carries one trial's mode into the next.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import torch

#: device types on which torch offers deterministic implementations
DETERMINISTIC_DEVICES = ("cpu", "cuda")
#: cuBLAS's fixed workspace for reproducible results (CUDA >= 10.2); read when cuBLAS
#: starts in the process, so it is set before the trial's first CUDA operation
CUBLAS_WORKSPACE = ":4096:8"


def check_deterministic(device: torch.device) -> None:
    """Refuse train.deterministic on a device that cannot honour it."""
    if device.type not in DETERMINISTIC_DEVICES:
        raise ValueError(
            f"train.deterministic: true cannot be honoured on device {device.type!r}: torch has "
            f"deterministic algorithms for {', '.join(DETERMINISTIC_DEVICES)} only"
        )


@contextlib.contextmanager
def deterministic(enabled: bool, device: torch.device) -> Iterator[None]:
    """Run the block with torch's deterministic algorithms when ``enabled``, then put the
    process's previous settings back."""
    if not enabled:
        yield
        return
    check_deterministic(device)
    if device.type == "cuda":
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", CUBLAS_WORKSPACE)
    before = (
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
        torch.backends.cudnn.deterministic,
        torch.backends.cudnn.benchmark,
    )
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = True, False
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(before[0], warn_only=before[1])
        torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = before[2], before[3]
