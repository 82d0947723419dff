"""`resources.seeds_per_trial: auto`: as many seeds per batch as memory and the group
allow. The memory a batch may use is read where trials run, by one small Ray task with
a trial's resources (`probe_budget`, once per run, before the batches are formed); each
group's K is then that budget over one seed's estimate (lengthgen.seed_memory), at most
the group's pending seeds and AUTO_SEEDS (orchestrator.running.seed_batches.auto_seeds).

The budget: orchestrator.running.memory_budget."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from rich.console import Console

from lengthgen.seed_memory import seed_memory
from orchestrator.running.memory_budget import MIB, probe_budget
from orchestrator.running.seed_batches import auto_seeds
from orchestrator.studies.config_paths import TRIAL_CONFIG
from orchestrator.studies.study import Study


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
               "workers": f"the run's {pending} seeds over {budget.at_once} trial{'s' * (budget.at_once > 1)} at once",
               "cap": f"at most {chosen.seeds} (memory for {chosen.fit})"}[chosen.bound]
        console.print(f"seeds_per_trial auto: {study.short_label(config) or study.name}: {chosen.seeds} seeds per "
                      f"batch, {why}; a seed needs about {per_seed / MIB:.0f} MiB of {budget.bytes / MIB:.0f} MiB "
                      f"({budget.where})", highlight=False)
        return chosen.seeds

    return size
