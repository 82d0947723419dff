"""The driver's MLflow thread (orchestrator.mlflow_tracking.syncer) against tracking
servers that fail: one that refuses connections, one that answers 503, one that accepts
and never answers. Marking a trial never waits; each failed call is bounded
(mlflow_store.HTTP_BOUNDS); the outage is said once, in lg-study's words; what is owed
is left in the study's folder, where `status` finds it and the next run catches up.
The real `mlflow server` killed, restarted and slowed under a study: test_mlflow_server."""

from __future__ import annotations

import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest
from ray_studies import free_port
from test_tracking import eval_rows, train_row, trial_row
from typer.testing import CliRunner

from orchestrator.cli import app
from orchestrator.mlflow_tracking.lag_ledger import Lag, lag_path, read_lag, write_lag
from orchestrator.mlflow_tracking.mlflow_store import HTTP_BOUNDS
from orchestrator.mlflow_tracking.syncer import MlflowSyncer
from orchestrator.mlflow_tracking.tracking import StudyTracker
from orchestrator.store.results_store import write_trial_table


def a_trial(root: Path, status: str = "running") -> dict[str, str]:
    """A trial of study `cb` with rows at steps 1 and 2; its worker's params."""
    row = trial_row(0, status)
    write_trial_table(root, "cb", "trials", row["trial_id"], [row])
    write_trial_table(root, "cb", "train", row["trial_id"], [train_row(1), train_row(2)])
    write_trial_table(root, "cb", "eval", row["trial_id"], eval_rows(2))
    return {"results_root": str(root), "study": "cb", "trial_id": row["trial_id"]}


def said_within(said: list[str], seconds: float) -> float:
    """Seconds until the syncer said something (at most ``seconds``)."""
    start = time.monotonic()
    while not said and time.monotonic() - start < seconds:
        time.sleep(0.05)
    return time.monotonic() - start


class _Answer503(BaseHTTPRequestHandler):
    requests: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        type(self).requests.append(self.path)
        self.send_response(503)
        self.send_header("Content-Length", "0")
        self.send_header("Retry-After", "3600")  # obeyed by MLflow's default client
        self.end_headers()

    do_POST = do_GET

    def log_message(self, *args: object) -> None:
        pass


def test_a_refusing_server_is_said_once_and_its_lag_left_for_status(tmp_path: Path) -> None:
    uri = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    params = a_trial(tmp_path)
    said: list[str] = []
    syncer = MlflowSyncer(uri, "cb", tmp_path, "cb", say=said.append)
    started = time.monotonic()
    for _ in range(50):  # Tune's loop marking the trial at every report
        syncer.trial(params, live=True)
    assert time.monotonic() - started < 0.05
    syncer.job("end_running_runs", after=True)
    assert said_within(said, 15) < 15
    time.sleep(0.5)
    assert len(said) == 1, said
    words = said[0]
    assert words.startswith(f"MLflow at {uri} is unreachable since ") and "(connection refused)" in words
    assert f"Training goes on: every trial's rows are safe in {tmp_path / 'cb'}" in words
    assert "catch up when it answers again" in words and "`lg-study run`" in words and "`lg-study sync`" in words
    started = time.monotonic()
    lag = syncer.close()
    assert time.monotonic() - started < 1  # the server is down: nothing to wait for
    assert lag.trials == [params["trial_id"]] and lag.jobs == [["end_running_runs", None, "after"]]
    assert lag.down_since and lag.reason == "connection refused"
    assert read_lag(tmp_path, "cb") == lag
    shown = CliRunner().invoke(app, ["status", "cb", "--results", str(tmp_path)], env={"COLUMNS": "300"})
    line = " ".join(shown.output.split())
    assert f"MLflow at {uri} was unreachable since " in line and "the runs of 1 trials lag their rows" in line
    assert f"lg-study sync STUDY.yaml --results {tmp_path} --tracking-uri {uri}" in line


def test_a_server_answering_503_costs_three_tries_and_no_retry_after_sleep(tmp_path: Path) -> None:
    _Answer503.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", free_port()), _Answer503)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    said: list[str] = []
    try:
        syncer = MlflowSyncer(f"http://127.0.0.1:{server.server_port}", "cb", tmp_path, "cb", say=said.append)
        syncer.trial(a_trial(tmp_path), live=True)
        waited = said_within(said, 20)
        syncer.close()
    finally:
        server.shutdown()
        server.server_close()
    retries = int(HTTP_BOUNDS["MLFLOW_HTTP_REQUEST_MAX_RETRIES"])
    assert waited < 6, said  # backoffs of 0 and 2-2.5 s, no hour-long Retry-After
    assert len(_Answer503.requests) == retries + 1  # the first call, given up on: said at once
    assert "(it answers with server errors (5xx))" in said[0]


def test_a_server_that_never_answers_is_given_up_after_its_timeout(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "1")  # a value set by the user is kept
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)  # connections queue in the backlog, never answered
        said: list[str] = []
        syncer = MlflowSyncer(f"http://127.0.0.1:{listener.getsockname()[1]}", "cb", tmp_path, "cb", say=said.append)
        syncer.trial(a_trial(tmp_path), live=True)
        waited = said_within(said, 20)
        syncer.close()
    assert 0.9 < waited < 4, said
    assert "(timed out)" in said[0]


def test_what_a_run_left_owed_is_caught_up_by_the_next(tmp_path: Path, mlflow_store: str) -> None:
    """A lag left with the store's URI: its trials synced, its owed jobs done in their
    phase (tags after the runs exist), the file gone once nothing is owed."""
    root = tmp_path / "results"
    params = a_trial(root, status="done")
    trial_id = params["trial_id"]
    write_lag(root, "cb", Lag(mlflow_store, [trial_id], [["tag_trial_runs", {trial_id: {"point": "3"}}, "after"]],
                              "2026-01-02T03:04:05+00:00", "connection refused"))
    syncer = MlflowSyncer(mlflow_store, "caught_up", root, "cb", say=print)
    syncer.job("sync_study", [trial_id])
    lag = syncer.close()
    assert not lag.behind and not lag_path(root, "cb").exists()
    [run] = StudyTracker(mlflow_store, "caught_up").runs_by_trial()[trial_id]
    tracker = StudyTracker(mlflow_store, "caught_up")
    found = tracker.client.get_run(run["run_id"])
    assert (found.info.status, found.data.tags["point"]) == ("FINISHED", "3")
    assert [m.step for m in tracker.client.get_metric_history(run["run_id"], "loss")] == [1, 2]


def test_a_lag_of_another_tracking_uri_is_not_carried(tmp_path: Path, mlflow_store: str) -> None:
    write_lag(tmp_path, "cb", Lag("http://elsewhere:5000", ["t1"], [["delete_runs", None, "before"]]))
    syncer = MlflowSyncer(mlflow_store, "elsewhere", tmp_path, "cb", say=print)
    assert syncer.lag().trials == [] and syncer.lag().jobs == []
    syncer.close()


def test_a_job_is_named_from_the_registry(tmp_path: Path) -> None:
    syncer = MlflowSyncer(f"http://127.0.0.1:{free_port()}", "cb", tmp_path, "cb", say=lambda words: None)
    try:
        with pytest.raises(ValueError, match="expected one of .'delete_runs', 'end_running_runs'"):
            syncer.job("delete_everything")
    finally:
        syncer.close()
