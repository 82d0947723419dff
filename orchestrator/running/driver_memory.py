"""The driver's memory over a long run: heap the allocator keeps, handed back.

What the driver holds per trial (docs/performance.md, "driver memory"): Tune's trial
records (it keeps every Trial for the run's result grid), MLflow's artifact
repository per run (its own cache, bounded at 1,024 runs), about 20 KB of Python
objects in all, and native memory outside Python's heap. Most of the growth measured
was neither: memory freed by Python and Arrow that glibc's allocator keeps in its heap
instead of returning it to the system, so that the resident size grows with the trial
count although nothing holds it. ``malloc_trim(0)`` returns it; this callback calls it
after every ``every`` finished trials (a few milliseconds each time here).
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


class HeapTrimCallback(tune.Callback):
    """After every ``every`` trials that end (done, failed or diverged), collect
    Python's garbage and hand the allocator's free heap back to the system."""

    def __init__(self, every: int | None = None) -> None:
        self.every = trim_every() if every is None else every
        self.ended = 0
        self.trims = 0

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._ended()

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._ended()

    def _ended(self) -> None:
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
