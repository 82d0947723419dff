"""The driver's heap trim (orchestrator/running/driver_memory.py): every N ended trials,
and off with LG_STUDY_TRIM_EVERY=0."""

from __future__ import annotations

import sys

from orchestrator.running.driver_memory import TRIM_SETTING, DriverMemoryCallback


def test_the_heap_is_trimmed_after_every_n_ended_trials() -> None:
    callback = DriverMemoryCallback(every=3)
    for _ in range(7):
        callback.on_trial_complete(0, [], None)
    callback.on_trial_error(0, [], None)
    glibc = sys.platform.startswith("linux")
    assert callback.ended == 8
    assert callback.trims == (2 if glibc else 0)


def test_trimming_is_off_with_the_setting_at_zero(monkeypatch) -> None:
    monkeypatch.setenv(TRIM_SETTING, "0")
    callback = DriverMemoryCallback()
    for _ in range(200):
        callback.on_trial_complete(0, [], None)
    assert callback.trims == 0


def _reported_trial(steps: int = 3):
    """A Tune trial (a stub: no trainable behind it) that reported ``steps`` results."""
    from ray.tune.experiment import Trial

    trial = Trial("lg_study_trial", stub=True, config={"trial": {"trial_id": "t0"}})
    for step in range(1, steps + 1):
        trial.update_last_result({"training_iteration": step, "loss": 1.0 / step, "acc_5": 0.5})
    return trial


def test_an_ended_trial_keeps_its_last_result_but_not_tunes_metric_history() -> None:
    trial = _reported_trial()
    _, before = trial.get_json_state()  # cached, as Tune's experiment state caches it
    assert set(trial.metric_analysis) == {"training_iteration", "loss", "acc_5"}
    DriverMemoryCallback(every=0).on_trial_complete(0, [trial], trial)
    _, after = trial.get_json_state()
    assert trial.metric_analysis == {} and trial.metric_n_steps == {}
    assert trial.last_result["loss"] == 1.0 / 3 and trial.config == {"trial": {"trial_id": "t0"}}
    assert "last-10-avg" in before and "last-10-avg" not in after
    assert len(after) < len(before) / 2


def test_a_failed_trial_is_released_as_well() -> None:
    trial = _reported_trial()
    DriverMemoryCallback(every=0).on_trial_error(0, [trial], trial)
    assert trial.metric_analysis == {} and trial.last_result["acc_5"] == 0.5
