"""Stopping a study the other ways (slow: `pytest -m slow`): Ctrl-C in a terminal
(SIGINT to the whole process group, Ray's processes included), a driver killed with
SIGKILL (nothing of lg-study's runs), and `run --restart --yes`. After each, a re-run
leaves every trial in `trials` once, each table without repeated rows, and exactly
one ended MLflow run per trial."""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import subprocess
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from ray_studies import mlflow_client, one_finished_run_each, study_command, tiny_study, watch

from analysis.query import open_results, run_query

pytestmark = pytest.mark.slow
#: trials long enough that, once one is done, another stays mid-training for seconds: at
#: 200 steps the last pair ran 2 s, and a watcher sharing the cores with another test's
#: study (the slow tier's two workers) saw the study end first
STOPPED_STEPS = 600
#: a study run whole twice (--restart) needs no such window
RESTARTED_STEPS = 200


def stops_study(steps: int) -> str:
    return tiny_study("stops", steps, {"seeds.weight": [0, 1, 2, 3]}, "{cpus_per_trial: 1}")


def mlflow_runs_running(results: Path, trial_ids) -> int:
    """How many MLflow runs of these trials the driver has marked RUNNING (read-only:
    the driver writes)."""
    store = results / "mlflow.db"
    if not store.exists() or not trial_ids:
        return 0
    marks = ", ".join("?" * len(trial_ids))
    try:
        with contextlib.closing(sqlite3.connect(f"file:{store}?mode=ro", uri=True, timeout=1)) as con:
            return con.execute("select count(*) from runs join tags using (run_uuid) where status = 'RUNNING'"
                               f" and key = 'trial_id' and value in ({marks})", list(trial_ids)).fetchone()[0]
    except sqlite3.Error:  # the store is still being created, or locked by a write
        return 0


def run_until(command: list[str], results: Path, stop, ready=lambda running: True, **popen) -> tuple[int, str]:
    """Start `lg-study run`; once some trial is done, another has a checkpoint and
    `ready(running)` holds for those mid-training, `stop` it."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **popen)
    stopped = []

    def act(rows, running) -> bool:
        if any(r["status"] == "done" for r in rows.values()) and running and ready(running):
            stop(process)
            stopped.append(True)
        return bool(stopped)

    watch(process, results, "stops", act)
    output, _ = process.communicate(timeout=120)
    if popen.get("start_new_session"):
        # a driver killed with SIGKILL leaves Ray's dashboard and runtime-env agents
        # behind (docs/reliability.md); they are in the driver's own process group
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
    assert stopped, output
    return process.returncode, output


def assert_complete(results: Path, steps: int = STOPPED_STEPS) -> None:
    with open_results(results, "stops") as con:
        trials = run_query(con, "select trial_id, status from trials").to_pylist()
        train = run_query(con, "select count(*) as n, count(distinct (trial_id, step)) as d from train").to_pylist()
    assert len(trials) == 4 and {t["status"] for t in trials} == {"done"}
    assert train == [{"n": 4 * steps // 20, "d": 4 * steps // 20}]
    runs = one_finished_run_each(results, "stops", [t["trial_id"] for t in trials])
    client = mlflow_client(results)
    for run in runs:
        logged = [m.step for m in client.get_metric_history(run.info.run_id, "loss")]
        assert logged == list(range(20, steps + 1, 20)), logged
    assert not list((results / "stops" / "_checkpoints").glob("*.pt"))


@pytest.fixture
def study(tmp_path) -> tuple[list[str], Path]:
    _, results, command = study_command(tmp_path, stops_study(STOPPED_STEPS))
    return command, results


@pytest.mark.long
def test_ctrl_c_in_a_terminal_then_resume(study):
    command, results = study
    code, output = run_until(command, results, lambda p: os.killpg(p.pid, signal.SIGINT),
                             start_new_session=True)
    assert code == 130, output
    again = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "were run again (from their last checkpoint" in " ".join(again.stderr.split())
    assert_complete(results)


def test_driver_killed_with_sigkill_then_resume(study):
    command, results = study
    # the worker writes its checkpoint before the driver's callback has seen the report
    # that opens the trial's MLflow run: wait for the run of a trial mid-training, or
    # there is nothing to end (a finished trial's run left RUNNING is completed instead)
    code, _ = run_until(command, results, lambda p: p.kill(),
                        ready=lambda running: mlflow_runs_running(results, list(running)) > 0,
                        start_new_session=True)
    assert code == -signal.SIGKILL
    client = mlflow_client(results)
    left = client.search_runs([client.get_experiment_by_name("stops").experiment_id],
                              filter_string="attributes.status = 'RUNNING'")
    assert left  # nothing ended them: the next run must
    again = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "ended as KILLED" in again.stderr
    assert_complete(results)


@pytest.mark.long
def test_restart_runs_everything_again(tmp_path):
    _, results, command = study_command(tmp_path, stops_study(RESTARTED_STEPS))
    first = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert first.returncode == 0, first.stdout + first.stderr
    before = {t: pq.read_table(p, partitioning=None).to_pylist()[0]["started_at"]
              for t, p in ((p.parent.name, p) for p in (results / "stops" / "trials").glob("*/part-0.parquet"))}
    again = subprocess.run([*command, "--restart", "--yes"], capture_output=True, text=True, timeout=300, check=False)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "had already finished" not in again.stderr
    after = {t: pq.read_table(p, partitioning=None).to_pylist()[0]["started_at"]
             for t, p in ((p.parent.name, p) for p in (results / "stops" / "trials").glob("*/part-0.parquet"))}
    assert after.keys() == before.keys() and all(after[t] > before[t] for t in after)
    assert_complete(results, RESTARTED_STEPS)  # the first runs are deleted: one run per trial
