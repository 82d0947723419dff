"""The driver's memory over a long run: what Tune keeps of ended trials, and heap the
allocator keeps, handed back.

What the driver holds per trial (docs/performance.md, "driver memory"), measured with
tracemalloc between the 50th and the 250th trial of a 300-trial run: about 78 KB of
Python objects, of which Tune's running statistics of every metric a trial reported
(min, max, mean, the last-5 and last-10 means with their deques, in
``Trial.run_metadata``) were 33 KB and their JSON copies in Tune's experiment state 18
KB; the rest is Tune's ``Trial`` itself and MLflow's artifact repository per run (its
own cache, bounded at 1,024 runs). The statistics feed Tune's schedulers and searchers
while a trial runs; lg-study's trial lists read none of them, nor Tune's experiment
state (a study resumes from its own rows), so an ended trial's are dropped
(``release_metric_history``).

Memory freed by Python and Arrow is kept by glibc's allocator in its heap instead of
returned to the system, so that the resident size grows with the trial count although
nothing holds it. ``malloc_trim(0)`` returns it; the callback calls it after every
``every`` ended trials (a few milliseconds each time here).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import os
from typing import Any

from ray import tune

#: finished trials between two trims; LG_STUDY_TRIM_EVERY=0 turns trimming off (to
#: measure the driver without it: docs/performance.md)
TRIM_EVERY = 50
TRIM_SETTING = "LG_STUDY_TRIM_EVERY"


def trim_every() -> int:
    return int(os.environ.get(TRIM_SETTING, TRIM_EVERY))


def _malloc_trim():
    """glibc's malloc_trim, or None where the C library is not glibc (macOS, musl)."""
    name = ctypes.util.find_library("c")
    try:
        return ctypes.CDLL(name).malloc_trim if name else None
    except (OSError, AttributeError):
        return None


def release_metric_history(trial: Any) -> None:
    """Drop an ended Tune trial's running statistics of its metrics and the JSON Tune
    cached of them; its last result, config and error stay (the result grid reads
    them). Tune calls the callbacks before it serialises the ended trial again for its
    experiment state, which then holds the smaller record."""
    metadata = getattr(trial, "run_metadata", None)
    if metadata is None:
        return
    metadata.metric_analysis = {}  # its __setattr__ drops its cached JSON
    metadata.metric_n_steps = {}
    trial.invalidate_json_state()


class DriverMemoryCallback(tune.Callback):
    """For each trial that ends (done, failed or diverged), release Tune's metric
    history of it; after every ``every`` of them, collect Python's garbage and hand
    the allocator's free heap back to the system."""

    def __init__(self, every: int | None = None) -> None:
        self.every = trim_every() if every is None else every
        self.ended = 0
        self.trims = 0

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._ended(trial)

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._ended(trial)

    def _ended(self, trial: Any) -> None:
        release_metric_history(trial)
        self.ended += 1
        if self.every > 0 and self.ended % self.every == 0:
            self.trim()

    def trim(self) -> bool:
        """Collect garbage and trim the heap; False where there is no malloc_trim."""
        gc.collect()
        trim = _malloc_trim()
        if trim is None:
            return False
        trim(0)
        self.trims += 1
        return True
