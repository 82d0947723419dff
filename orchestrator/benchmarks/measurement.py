"""One row of `lg-study bench`: a ratio of two things measured side by side, and the
best-of-n wall time those measurements use."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class Measurement:
    name: str
    #: None: not measured here (`detail` says why)
    ratio: float | None
    #: e.g. ">= 20", or "report" where the issue sets no bar
    target: str
    detail: str

    @property
    def met(self) -> bool | None:
        if not self.target.startswith(">=") or self.ratio is None:
            return None
        return self.ratio >= float(self.target.removeprefix(">="))


def best_seconds(work: Callable[[], object], repeat: int = 1) -> float:
    """Best of `repeat` wall times: the least disturbed run on a shared machine."""
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - started)
    return best
