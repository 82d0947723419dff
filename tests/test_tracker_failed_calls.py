"""A metric call that fails after the store kept it (a tracking server killed between its
commit and its answer) is not logged again by the next call: the tracker forgets what it
believed of the run and reads the run's logged steps from the store."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.mlflow_tracking.tracking import StudyTracker


def test_a_batch_stored_but_not_answered_is_not_logged_twice(tmp_path: Path) -> None:
    tracker = StudyTracker(f"sqlite:///{tmp_path}/mlflow.db", "study")
    run_id = tracker.run_for_trial("t1", {}, {})
    tracker.log_steps(run_id, [(1, {"loss": 2.0})])
    stored_then_lost = tracker.client.log_batch

    def stored_but_unanswered(*args, **kwargs):
        stored_then_lost(*args, **kwargs)
        raise ConnectionError("the server died before it answered")

    tracker.client.log_batch = stored_but_unanswered
    with pytest.raises(ConnectionError):
        tracker.log_steps(run_id, [(1, {"loss": 2.0}), (2, {"loss": 1.5})])
    tracker.client.log_batch = stored_then_lost
    again = tracker.run_for_trial("t1", {}, {})  # the next sync, as sync_trial makes it
    tracker.log_steps(again, [(1, {"loss": 2.0}), (2, {"loss": 1.5}), (3, {"loss": 1.0})])
    assert again == run_id
    assert [m.step for m in tracker.client.get_metric_history(run_id, "loss")] == [1, 2, 3]
