"""Seed batches as Ray Tune trials: the trials of one configuration group (differing
only in their seeds) go to Tune together, K at a time (`resources.seeds_per_trial`),
and one worker trains them as one seed batch (lengthgen.seed_batch). Each seed stays
its own trial: its id, rows, checkpoint and MLflow run are the ones it has alone.

A batch's Tune param is its first seed's trial param with the list of all of its
seeds' params under `"batch"` (`members` reads both forms), so that everything that
names a Tune trial by a trial id still finds one."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, NamedTuple

#: seeds_per_trial: auto never batches more seeds than this, whatever memory allows: a
#: batch's seeds end together and a worker killed mid-batch retrains all of them from
#: their checkpoints, so a larger batch delays a group's first results and raises what
#: one failure costs, for a gain nothing here has measured (the issue's GPU rows stop at
#: 16 seeds of the 2m model; on a CPU a batch's step costs about K solo steps)
AUTO_SEEDS = 16
BATCH = "batch"


class AutoSeeds(NamedTuple):
    """What `seeds_per_trial: auto` chose for one configuration group."""

    #: seeds per batch, at least 1
    seeds: int
    #: what bounded it: "group" (its pending seeds), "memory", "workers" (the run's
    #: pending seeds spread over the CPU trials that run at once) or "cap" (AUTO_SEEDS)
    bound: str
    #: how many seeds the memory budget holds
    fit: int


def auto_seeds(pending: int, budget_bytes: float, seed_bytes: float, cap: int = AUTO_SEEDS,
               spread: int | None = None) -> AutoSeeds:
    """K for `seeds_per_trial: auto`: as many of a group's `pending` seeds as a budget of
    `budget_bytes` holds at `seed_bytes` each (lengthgen.seed_memory), at most `cap` and,
    on CPUs, at most `spread`: the run's pending seeds over the trials that run at once
    (a CPU batch of K seeds costs about K seeds' time, so one batch of every seed would
    leave the other cores idle; a GPU trains a batch faster than its seeds alone, and
    has no such bound). At least 1 (a seed that does not fit trains alone, as it would
    without batches). The bound is the smallest term; a tie names the group, then
    memory, then the workers."""
    fit = int(budget_bytes // seed_bytes) if seed_bytes > 0 else cap
    bounds = {"group": pending, "memory": fit, **({"workers": spread} if spread is not None else {}), "cap": cap}
    bound = min(bounds, key=bounds.__getitem__)
    return AutoSeeds(max(1, bounds[bound]), bound, fit)


def members(params: dict[str, Any]) -> list[dict[str, Any]]:
    """The trial params of every seed a Tune trial trains (one, or a seed batch's)."""
    return params.get(BATCH) or [params]


def seed_batches(
    trials: list[dict[str, Any]], seeds_per_trial: int | Callable[[list[dict[str, Any]]], int]
) -> list[dict[str, Any]]:
    """The Tune params of `trials`: each trial alone with seeds_per_trial 1 (as before);
    otherwise the trials of each configuration group in batches of at most K, the
    largest batches first, in the order of each group's first trial among batches of
    one size. A batch of one is a plain trial. `seeds_per_trial` is K, or gives each
    group's K from the group's trials (`auto`: orchestrator.running.auto_seeds).

    Largest first because a batch of K seeds costs about K trials' time: started last,
    a large batch would keep one worker busy while the others have nothing left (the
    quickstart's batches of 2, 4, 4, 2 and 4 seeds on two workers end at 10 trials'
    time in that order, at 8 largest first)."""
    if seeds_per_trial == 1:
        return list(trials)
    by_group: dict[str, list[dict[str, Any]]] = {}
    for params in trials:
        by_group.setdefault(_group_of(params), []).append(params)
    units = []
    for group in by_group.values():
        size = seeds_per_trial(group) if callable(seeds_per_trial) else seeds_per_trial
        for start in range(0, len(group), size):
            chunk = group[start : start + size]
            units.append(chunk[0] if len(chunk) == 1 else {**chunk[0], BATCH: chunk})
    return sorted(units, key=lambda unit: -len(members(unit)))  # stable: group order within a size


def _group_of(params: dict[str, Any]) -> str:
    """The configuration group of a trial param: its config without the seeds that
    a batch may vary (the eval seed too: a seed batch evaluates each seed at its own)."""
    config = {key: value for key, value in params["config"].items() if key != "seeds"}
    return json.dumps(config, sort_keys=True)
