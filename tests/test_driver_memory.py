"""The driver's heap trim (orchestrator/running/driver_memory.py): every N ended trials,
and off with LG_STUDY_TRIM_EVERY=0."""

from __future__ import annotations

import sys

from orchestrator.running.driver_memory import TRIM_SETTING, HeapTrimCallback


def test_the_heap_is_trimmed_after_every_n_ended_trials() -> None:
    callback = HeapTrimCallback(every=3)
    for _ in range(7):
        callback.on_trial_complete(0, [], None)
    callback.on_trial_error(0, [], None)
    glibc = sys.platform.startswith("linux")
    assert callback.ended == 8
    assert callback.trims == (2 if glibc else 0)


def test_trimming_is_off_with_the_setting_at_zero(monkeypatch) -> None:
    monkeypatch.setenv(TRIM_SETTING, "0")
    callback = HeapTrimCallback()
    for _ in range(200):
        callback.on_trial_complete(0, [], None)
    assert callback.trims == 0
