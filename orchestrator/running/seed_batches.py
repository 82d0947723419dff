"""Seed batches as Ray Tune trials: the trials of one configuration group (differing
only in their seeds) go to Tune together, K at a time (`resources.seeds_per_trial`),
and one worker trains them as one seed batch (lengthgen.seed_batch). Each seed stays
its own trial: its id, rows, checkpoint and MLflow run are the ones it has alone.

A batch's Tune param is its first seed's trial param with the list of all of its
seeds' params under `"batch"` (`members` reads both forms), so that everything that
names a Tune trial by a trial id still finds one."""

from __future__ import annotations

import json
from typing import Any

#: seeds_per_trial: auto trains every pending seed of a group together, up to this many
#: (a batch's memory grows with K; a GPU's rows measure the largest that fits)
AUTO_SEEDS = 16
BATCH = "batch"


def members(params: dict[str, Any]) -> list[dict[str, Any]]:
    """The trial params of every seed a Tune trial trains (one, or a seed batch's)."""
    return params.get(BATCH) or [params]


def seed_batches(trials: list[dict[str, Any]], seeds_per_trial: int | str) -> list[dict[str, Any]]:
    """The Tune params of `trials`: each trial alone with seeds_per_trial 1 (as before);
    otherwise the trials of each configuration group in batches of at most K, the
    largest batches first, in the order of each group's first trial among batches of
    one size. A batch of one is a plain trial.

    Largest first because a batch of K seeds costs about K trials' time: started last,
    a large batch would keep one worker busy while the others have nothing left (the
    quickstart's batches of 2, 4, 4, 2 and 4 seeds on two workers end at 10 trials'
    time in that order, at 8 largest first)."""
    size = AUTO_SEEDS if seeds_per_trial == "auto" else int(seeds_per_trial)
    if size == 1:
        return list(trials)
    by_group: dict[str, list[dict[str, Any]]] = {}
    for params in trials:
        by_group.setdefault(_group_of(params), []).append(params)
    units = []
    for group in by_group.values():
        for start in range(0, len(group), size):
            chunk = group[start : start + size]
            units.append(chunk[0] if len(chunk) == 1 else {**chunk[0], BATCH: chunk})
    return sorted(units, key=lambda unit: -len(members(unit)))  # stable: group order within a size


def _group_of(params: dict[str, Any]) -> str:
    """The configuration group of a trial param: its config without the seeds that
    a batch may vary (the eval seed too: a seed batch evaluates each seed at its own)."""
    config = {key: value for key, value in params["config"].items() if key != "seeds"}
    return json.dumps(config, sort_keys=True)
