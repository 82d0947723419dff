"""The searcher that hands Tune a grid study's trials (orchestrator.running.trial_list): each
trial once, in order, then FINISHED; the pending-trials setting set only during a run
(the real runs through Tune are every test of `lg-study run`), and the ETA its
progress lines print."""

from __future__ import annotations

import os

import pytest
from ray.tune.search import Searcher

from orchestrator.running import trial_list


def test_each_trial_is_suggested_once_in_order_then_finished() -> None:
    trials = [{"trial_id": f"t{i}"} for i in range(3)]
    searcher = trial_list.TrialList(trials)
    suggested = [searcher.suggest(f"tune{i}") for i in range(5)]
    assert suggested[:3] == [{"trial": t} for t in trials]
    assert suggested[3:] == [Searcher.FINISHED, Searcher.FINISHED]
    assert len(searcher) == 3


def test_the_pending_setting_lives_only_inside_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(trial_list.PENDING_SETTING, raising=False)
    monkeypatch.setattr(trial_list.ray, "cluster_resources", lambda: {"CPU": 400.0})
    with trial_list.pending_like_a_grid():
        assert os.environ[trial_list.PENDING_SETTING] == "440"  # Tune's grid rule: CPUs x 1.1
    assert trial_list.PENDING_SETTING not in os.environ
    monkeypatch.setattr(trial_list.ray, "cluster_resources", lambda: {"CPU": 2.0})
    with trial_list.pending_like_a_grid():
        assert os.environ[trial_list.PENDING_SETTING] == "200"


def test_a_users_own_pending_setting_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(trial_list.PENDING_SETTING, "7")
    with trial_list.pending_like_a_grid():
        assert os.environ[trial_list.PENDING_SETTING] == "7"
    assert os.environ[trial_list.PENDING_SETTING] == "7"


def test_the_eta_follows_the_recent_rate_not_the_start_up() -> None:
    from orchestrator.running.tune_runner import ETA_WINDOW, eta_seconds

    # 50 s of start-up, then a trial every 0.2 s: 100 trials left take 20 s
    finishes = [50.0 + 0.2 * i for i in range(ETA_WINDOW + 1)]
    assert eta_seconds(finishes, 0.0, 100) == pytest.approx(20.0)
    # fewer than 3 finished: the rate since the start
    assert eta_seconds([10.0], 0.0, 9) == pytest.approx(90.0)
    assert eta_seconds([10.0, 10.5], 0.0, 8) == pytest.approx(42.0)
