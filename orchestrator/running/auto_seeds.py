"""`resources.seeds_per_trial: auto`: as many seeds per batch as memory and the group
allow. The memory a batch may use is read where trials run, by one small Ray task with
a trial's resources (`probe_budget`, once per run, before the batches are formed); each
group's K is then that budget over one seed's estimate (lengthgen.seed_memory), at most
the group's pending seeds and AUTO_SEEDS (orchestrator.running.seed_batches.auto_seeds).

The budget: on a GPU, the card's free memory times the trial's share of it
(gpus_per_trial, at most one card: a trial trains on one device); on a CPU, the node's
available memory over the trials that run on it at once (its CPUs over cpus_per_trial,
at most max_concurrent_trials). Each times a safety fraction, for what the estimate
does not count (the worker's own runtime, evaluation sets, allocator slack)."""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import ray
from rich.console import Console

from lengthgen.seed_memory import seed_memory
from orchestrator.running.seed_batches import auto_seeds
from orchestrator.studies.config_paths import TRIAL_CONFIG
from orchestrator.studies.study import Resources, Study

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


def budget_here(resources: Resources, node_cpus: float, available: Callable[[], int],
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


def _probe(resources: dict[str, Any]) -> MemoryBudget:
    return budget_here(Resources(**resources), _node_cpus(), node_available_bytes, cuda_free_bytes)


def probe_budget(resources: Resources) -> MemoryBudget:
    """The budget, read by a Ray task with a trial's CPUs and GPUs, so on a node and card
    where trials run."""
    task = ray.remote(num_cpus=resources.cpus_per_trial, num_gpus=resources.gpus_per_trial)(_probe)
    return ray.get(task.remote(resources.model_dump()))


def auto_batch_size(study: Study, pending: int, console: Console) -> Callable[[list[dict[str, Any]]], int]:
    """Each group's K for `seeds_per_trial: auto` (seed_batches calls it with a group's
    pending trials' Tune params), `pending` trials in the run, saying on `console` what K
    is and why, the group named by its short label (the run table's)."""
    budget = probe_budget(study.spec.resources)
    spread = None if budget.at_once is None else math.ceil(pending / budget.at_once)

    def size(group: list[dict[str, Any]]) -> int:
        config = TRIAL_CONFIG.validate_python(group[0]["config"])
        per_seed = seed_memory(config).total
        chosen = auto_seeds(len(group), budget.bytes, per_seed, spread=spread)
        why = {"group": f"its {len(group)} pending seeds",
               "memory": f"memory for {chosen.fit}" + ("" if chosen.fit else ": each seed alone"),
               "workers": f"the run's {pending} seeds over {budget.at_once} trials at once",
               "cap": f"at most {chosen.seeds} (memory for {chosen.fit})"}[chosen.bound]
        console.print(f"seeds_per_trial auto: {study.short_label(config) or study.name}: {chosen.seeds} seeds per "
                      f"batch, {why}; a seed needs about {per_seed / MIB:.0f} MiB of {budget.bytes / MIB:.0f} MiB "
                      f"({budget.where})", highlight=False)
        return chosen.seeds

    return size
