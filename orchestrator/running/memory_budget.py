"""The memory a seed batch may use where trials run (`resources.seeds_per_trial: auto`,
orchestrator.running.auto_seeds): read by one small Ray task with a trial's resources.

On a GPU, the card's free memory times the trial's share of it (gpus_per_trial, at most
one card: a trial trains on one device); on a CPU, the node's available memory over the
trials that run on it at once (its CPUs over cpus_per_trial, at most
max_concurrent_trials). Each times a safety fraction, for what the estimate does not
count (the worker's own runtime, evaluation sets, allocator slack). Standard library
and Ray only, so that the task's worker starts in about a second."""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import ray

if TYPE_CHECKING:
    from orchestrator.studies.study import Resources

#: of a GPU's free memory: the worker's CUDA context (about 0.5 GB) and the caching
#: allocator's fragmentation come out of it
GPU_SAFETY = 0.8
#: of a CPU trial's share of the node's available memory: each worker's Python and torch
#: (a few hundred MB), evaluation sets and Ray's object store come out of it, and other
#: programs may take memory while the study runs
CPU_SAFETY = 0.5
GIB = 2**30
MIB = 2**20


class MemoryBudget(NamedTuple):
    """The memory one Tune trial's seed batch may use, and where it comes from (words);
    on CPUs, how many trials run at once on the node (None on a GPU)."""

    bytes: int
    where: str
    at_once: int | None = None


class TrialShare(NamedTuple):
    """What of a node one trial takes (a study's `resources`, as plain numbers, so that the
    probe's Ray task imports nothing of the study's)."""

    cpus_per_trial: float
    gpus_per_trial: float
    max_concurrent_trials: int | None


def budget_here(resources: TrialShare | Resources, node_cpus: float, available: Callable[[], int],
                cuda_free: Callable[[], int]) -> MemoryBudget:
    """The budget of a trial with `resources` on a node of `node_cpus` CPUs, read with
    `available` (the node's available memory) or, with gpus_per_trial > 0, `cuda_free`
    (the card's free memory): injected, so that a test reads a GPU's branch on a CPU."""
    if resources.gpus_per_trial > 0:
        share, free = min(resources.gpus_per_trial, 1.0), cuda_free()
        return MemoryBudget(int(GPU_SAFETY * share * free),
                            f"{GPU_SAFETY} x {share:g} of the GPU's {free / GIB:.1f} GiB free")
    at_once = max(1, math.floor(node_cpus / resources.cpus_per_trial))
    if resources.max_concurrent_trials is not None:
        at_once = min(at_once, resources.max_concurrent_trials)
    free = available()
    return MemoryBudget(int(CPU_SAFETY * free / at_once),
                        f"{CPU_SAFETY} x the node's {free / GIB:.1f} GiB available over {at_once} trial{'s' * (at_once > 1)} at once",
                        at_once)


def node_available_bytes() -> int:
    """Memory this node can still give: MemAvailable, within this process's cgroup (v2)
    limit where it has one (a container's limit, which MemAvailable does not see)."""
    meminfo = Path("/proc/meminfo")
    if not meminfo.exists():
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")
    fields = dict(line.split(":", 1) for line in meminfo.read_text().splitlines())
    available = int(fields["MemAvailable"].split()[0]) * 1024
    cgroup = Path("/sys/fs/cgroup")
    limit = (cgroup / "memory.max").read_text().strip() if (cgroup / "memory.max").exists() else "max"
    if limit != "max":
        available = min(available, int(limit) - int((cgroup / "memory.current").read_text()))
    return available


def cuda_free_bytes() -> int:
    import torch

    return torch.cuda.mem_get_info()[0]


def _node_cpus() -> float:
    """The CPUs Ray gives the node this task runs on (what Tune packs trials into)."""
    node = ray.get_runtime_context().get_node_id()
    return next(n["Resources"].get("CPU", 1.0) for n in ray.nodes() if n["NodeID"] == node)


def _probe(share: TrialShare) -> MemoryBudget:
    return budget_here(share, _node_cpus(), node_available_bytes, cuda_free_bytes)


def probe_budget(resources: TrialShare | Resources) -> MemoryBudget:
    """The budget, read by a Ray task with a trial's CPUs and GPUs, so on a node and card
    where trials run. The task's worker is a fresh process: it imports this module and
    Ray alone (about a second), not torch and the study's modules (four or more)."""
    share = TrialShare(resources.cpus_per_trial, resources.gpus_per_trial, resources.max_concurrent_trials)
    task = ray.remote(num_cpus=share.cpus_per_trial, num_gpus=share.gpus_per_trial)(_probe)
    return ray.get(task.remote(share))
