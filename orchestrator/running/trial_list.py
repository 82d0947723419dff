"""The trials of a grid study, handed to Tune one by one.

Tune's ``grid_search`` over the list of trial params would do the same, but its variant
generator deep-copies the unresolved search space, the whole list, for every trial it
makes: quadratic in the trials, 50 s before the first of 1,000 one-step trials started
here (docs/performance.md). A searcher that suggests each trial's params once is linear.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

import ray
from ray.tune.search import Searcher

PENDING_SETTING = "TUNE_MAX_PENDING_TRIALS_PG"


class TrialList(Searcher):
    """Suggests ``{"trial": params}`` for each trial in order, then FINISHED. Tune
    retries a failed trial itself (FailureConfig) without asking for a new one."""

    def __init__(self, trials: list[dict[str, Any]]) -> None:
        super().__init__()
        self._trials = list(trials)
        self._next = 0

    def __len__(self) -> int:
        return len(self._trials)

    def suggest(self, trial_id: str) -> dict[str, Any] | str:
        if self._next >= len(self._trials):
            return Searcher.FINISHED
        self._next += 1
        return {"trial": self._trials[self._next - 1]}

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
        """Nothing to learn: the list is fixed."""


@contextlib.contextmanager
def pending_like_a_grid() -> Iterator[None]:
    """Lets Tune queue as many trials as it queues for a grid: at least 200, more on a
    cluster of over 182 CPUs (Tune's rule for its grid generator). For any other
    searcher Tune queues one, so a reused worker waits for the next trial to be made
    after each one ends (0.185 s instead of 0.148 s per one-step trial here). A user's
    own TUNE_MAX_PENDING_TRIALS_PG wins. Tune reads it when the run starts."""
    if PENDING_SETTING in os.environ:
        yield
        return
    os.environ[PENDING_SETTING] = str(max(200, int(ray.cluster_resources().get("CPU", 1.0) * 1.1)))
    try:
        yield
    finally:
        os.environ.pop(PENDING_SETTING, None)
