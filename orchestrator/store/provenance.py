"""Where and with what a trial ran: the provenance columns of its `trials` row.

Training is deterministic on one machine and chaotic across machines: the same config
gives other numbers on another CPU model, instruction set, GPU, torch or CUDA build,
or thread count, because floating-point sums round differently and training amplifies
the difference. So every row names its numerical environment, and the code that made
it (lg-study's version, its git commit and whether the checkout had uncommitted
changes, and lengthgen's science version). Computed in the worker that trains the
trial: on a cluster, that is the machine that made the numbers.

`environment` is one readable line of the settings that can change the numbers (not
the host: two hosts with the same CPU and software give the same numbers).
`lg-study status` and the report name the configuration groups whose trials ran in
more than one environment (analysis/sql/questions/environments.sql).
"""

from __future__ import annotations

import importlib.metadata
import platform
import socket
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import torch

#: the provenance columns, in the order `trials` shows them (science_version is written
#: by orchestrator.store.trial_rows with every row)
PROVENANCE_COLUMNS = (
    "environment", "science_version", "lgstudy_version", "git_commit", "git_dirty", "python_version",
    "torch_version", "numpy_version", "cuda_version", "cudnn_version", "device_type", "cpu_model",
    "cpu_capability", "gpu_name", "torch_threads", "deterministic", "precision", "host",
)


def provenance(device: torch.device | str, deterministic: bool, precision: str = "fp32") -> dict[str, Any]:
    """The provenance columns of a trial training on ``device`` in this process now
    (torch's thread count as the trainable has set it), in train.precision ``precision``."""
    device = torch.device(device)
    code = code_version()
    columns = {
        "lgstudy_version": code["version"],
        "git_commit": code["commit"],
        "git_dirty": code["dirty"],
        "python_version": platform.python_version(),
        "torch_version": str(torch.__version__),
        "numpy_version": np.__version__,
        "cuda_version": None if torch.version.cuda is None else str(torch.version.cuda),
        "cudnn_version": _cudnn_version(),
        "device_type": device.type,
        "cpu_model": cpu_model(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "gpu_name": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
        "torch_threads": torch.get_num_threads(),
        "deterministic": deterministic,
        "precision": precision,
        "host": socket.gethostname(),
    }
    return {"environment": environment_label(columns), **columns}


def environment_label(columns: dict[str, Any]) -> str:
    """What can change the numbers, in one line, e.g. ``cpu AMD EPYC (cpu family 25, model
    17, stepping 1) AVX512, 1 thread; torch 2.13.0+cpu, numpy 2.4.6`` or ``cuda NVIDIA H100 80GB HBM3; torch 2.6.0+cu124, CUDA
    12.4, cuDNN 90100, numpy 2.2.6`` (the CPU too, which runs the data and the optimizer's
    bookkeeping; the deterministic flag is part of the config, hence of the group)."""
    threads = columns["torch_threads"]
    cpu = f"{columns['cpu_model']} {columns['cpu_capability']}, {threads} thread{'s' * (threads != 1)}"
    device = f"cuda {columns['gpu_name']} on {cpu}" if columns["device_type"] == "cuda" else f"cpu {cpu}"
    software = [f"torch {columns['torch_version']}"]
    if columns["cuda_version"] and columns["device_type"] == "cuda":
        software += [f"CUDA {columns['cuda_version']}", f"cuDNN {columns['cudnn_version']}"]
    software.append(f"numpy {columns['numpy_version']}")
    return f"{device}; {', '.join(software)}"


@cache
def cpu_model() -> str:
    """The CPU's model name with its family, model and stepping numbers where Linux gives
    them (virtual machines often name every generation alike, e.g. "AMD EPYC"), else
    what platform knows."""
    try:
        lines = (line.partition(":") for line in Path("/proc/cpuinfo").read_text().splitlines())
        fields = {key.strip(): value.strip() for key, _, value in lines if value}
    except OSError:
        fields = {}
    name = fields.get("model name") or fields.get("Model") or fields.get("Hardware")
    if not name:
        return platform.processor() or platform.machine() or "unknown"
    numbers = [f"{key} {fields[key]}" for key in ("cpu family", "model", "stepping") if key in fields]
    return f"{name} ({', '.join(numbers)})" if numbers else name


@cache
def code_version() -> dict[str, Any]:
    """lg-study's installed version, and the git commit of the checkout it runs from with
    a dirty flag (None for both outside a git checkout, e.g. an installed wheel). Read
    once per process: the code a worker runs is what it imported when it started."""
    try:
        version = importlib.metadata.version("lg-study")
    except importlib.metadata.PackageNotFoundError:
        version = None
    checkout = Path(__file__).resolve().parent.parent
    commit = _git(checkout, "rev-parse", "HEAD")
    dirty = None
    if commit is not None:
        changes = _git(checkout, "status", "--porcelain", "--", "lengthgen", "orchestrator")
        dirty = bool(changes) if changes is not None else None
    return {"version": version, "commit": commit, "dirty": dirty}


def _git(checkout: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(checkout), *args], capture_output=True, text=True, timeout=10,
                              check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def _cudnn_version() -> int | None:
    try:
        return torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    except RuntimeError:
        return None
