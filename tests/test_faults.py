"""Faults through a real local Ray, driven as a user would: `lg-study run` in a subprocess.

One study, two runs. In the first, a trial's worker is killed with SIGKILL once it
has a checkpoint (Tune retries it from the checkpoint): its `train` and `eval` rows up
to that checkpoint are in Parquet already. Then the driver gets SIGTERM while trials
run. The second run resumes. Then every trial is in `trials` once with its final
status, each table holds each trial's rows once, MLflow holds exactly one ended run
per trial with no step logged twice and shows what the results folder says, and the
diverging trials (lr 1e6) are `diverged` with their step and last finite loss.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import torch
from ray_studies import mlflow_client, mlflow_runs, study_command, tiny_study, trial_rows, watch

from analysis.query import open_results, run_query
from orchestrator.mlflow_tracking.mlflow_sync import RUN_END
from orchestrator.studies.metric_names import accuracy_name
from orchestrator.studies.study import load_study

# two `lg-study run` processes and a SIGKILL, a minute or more: with the other
# fault-injection tests (test_interrupts) in the tier CI runs after the default one
pytestmark = [pytest.mark.slow, pytest.mark.long]

STUDY = tiny_study("faults", 200, {"train.lr": ["3.0e-3", "1.0e6"], "seeds.weight": [0, 1, 2]},
                   "{cpus_per_trial: 1, max_failures: 1}", source="test fixture: worker SIGKILL, driver SIGTERM, divergence")
STEPS = list(range(20, 201, 20))


def steps_in(results: Path, table: str, trial_id: str) -> list[int]:
    path = results / "faults" / table / f"trial_id={trial_id}" / "part-0.parquet"
    return pq.read_table(path, partitioning=None).column("step").to_pylist() if path.exists() else []


def listening_addresses(pid: int) -> set[str]:
    """Addresses the process tree of ``pid`` listens on (TCP)."""
    import ray  # noqa: F401  (puts Ray's vendored psutil on the path)

    psutil = pytest.importorskip("psutil")
    try:
        tree = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        return set()
    found = set()
    for process in tree:
        try:
            found |= {c.laddr.ip for c in process.net_connections("tcp") if c.status == "LISTEN"}
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


@pytest.fixture(scope="module")
def faults(tmp_path_factory):
    study_file, results, command = study_command(tmp_path_factory.mktemp("faults"), STUDY)
    env = {**os.environ, "COLUMNS": "200"}
    events: dict = {"addresses": set()}
    checkpoints = results / "faults" / "_checkpoints"

    first = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)

    def act(rows, running) -> bool:
        if "killed" not in events and running:
            trial_id, row = min(running.items())
            events["addresses"] = listening_addresses(first.pid)
            os.kill(row["pid"], signal.SIGKILL)
            events["killed"] = (trial_id, row["pid"])
            # the checkpoint first: the worker writes the rows of its step before it
            step = torch.load(checkpoints / f"{trial_id}.pt", weights_only=True)["step"]
            events["rows_at_kill"] = (step, steps_in(results, "train", trial_id), steps_in(results, "eval", trial_id))
        elif "killed" in events and "recovered" not in events:
            trial_id, pid = events["killed"]
            row = rows.get(trial_id, {})
            if row.get("pid") not in (None, pid) and row.get("resumed_from_step") is not None:
                events["recovered"] = row["resumed_from_step"]
        elif "recovered" in events and "interrupted" not in events and running and \
                any(r["status"] == "done" for r in rows.values()):
            first.send_signal(signal.SIGTERM)
            events["interrupted"] = set(running)
        return False

    watch(first, results, "faults", act)
    first_output, _ = first.communicate(timeout=120)
    events["first"] = (first.returncode, first_output)
    events["after_first"] = trial_rows(results, "faults")
    events["runs_after_first"] = mlflow_runs(results, "faults")

    second = subprocess.run(command, check=False, capture_output=True, text=True, env=env, timeout=300)
    events["second"] = (second.returncode, second.stdout + second.stderr)
    return study_file, results, events


def test_first_run_was_killed_recovered_and_interrupted(faults):
    _, _, events = faults
    code, output = events["first"]
    assert {"killed", "recovered", "interrupted"} <= set(events), (events.keys(), output)
    assert events["recovered"] > 0  # the retried attempt started from its checkpoint
    assert code == 130, output
    assert "attempt 1 failed (its worker process died); retrying from its last checkpoint" in output
    assert "run the same command again to resume" in output
    # interrupted trials stay `running` in the table; their MLflow runs ended as KILLED
    after = events["after_first"]
    assert all(after[t]["status"] == "running" for t in events["interrupted"])
    statuses = {r.data.tags["trial_id"]: r.info.status for r in events["runs_after_first"]}
    assert all(statuses[t] == "KILLED" for t in events["interrupted"])
    assert "RUNNING" not in statuses.values()


def test_a_killed_workers_rows_up_to_its_last_checkpoint_are_in_parquet(faults):
    _, _, events = faults
    step, train_steps, eval_steps = events["rows_at_kill"]
    assert step >= STEPS[0]
    written = [s for s in STEPS if s <= step]
    assert set(written) <= set(train_steps), (step, train_steps)
    assert set(written) <= set(eval_steps), (step, eval_steps)


def test_local_ray_listens_on_loopback_only(faults):
    _, _, events = faults
    assert events["addresses"], "no listening socket seen"
    assert events["addresses"] <= {"127.0.0.1", "::ffff:127.0.0.1", "::1"}, events["addresses"]


def test_second_run_resumes_and_every_trial_is_there_once(faults):
    study_file, results, events = faults
    code, output = events["second"]
    assert code == 0, output
    study = load_study(study_file)
    with open_results(results, "faults") as con:
        trials = run_query(con, "select trial_id, status, lr, resumed_from_step, diverged_at, "
                                "last_finite_loss, error from trials").to_pylist()
        counts = run_query(con, "select trial_id, count(*) as n, count(distinct step) as steps "
                                "from train group by all").to_pylist()
        evals = run_query(con, "select trial_id, count(*) as n from eval group by all").to_pylist()
    assert sorted(t["trial_id"] for t in trials) == sorted(c.trial_id for c in study.trials)
    by_id = {t["trial_id"]: t for t in trials}
    for trial_id in events["interrupted"]:
        assert by_id[trial_id]["status"] == "done"
        assert by_id[trial_id]["resumed_from_step"] > 0
    done = {t for t, row in by_id.items() if row["status"] == "done"}
    assert done == {t for t, row in by_id.items() if row["lr"] < 1}
    assert {c["trial_id"]: (c["n"], c["steps"]) for c in counts if c["trial_id"] in done} == \
        dict.fromkeys(done, (len(STEPS), len(STEPS)))
    assert {e["trial_id"]: e["n"] for e in evals if e["trial_id"] in done} == dict.fromkeys(done, 2 * len(STEPS))
    assert not list((results / "faults" / "_checkpoints").glob("*.pt"))


def test_diverging_trials_are_recorded_and_the_study_goes_on(faults):
    _, results, _ = faults
    with open_results(results, "faults") as con:
        diverged = run_query(con, "select status, diverged_at, last_finite_loss, error "
                                  "from trials where lr > 1").to_pylist()
    assert len(diverged) == 3
    for row in diverged:
        assert row["status"] == "diverged"
        assert row["diverged_at"] >= 1 and row["last_finite_loss"] > 0
        assert f"non-finite loss at step {row['diverged_at']}" in row["error"]


def test_mlflow_holds_one_ended_run_per_trial_without_repeated_steps(faults):
    study_file, results, events = faults
    study = load_study(study_file)
    runs = mlflow_runs(results, "faults")
    assert sorted(r.data.tags["trial_id"] for r in runs) == sorted(c.trial_id for c in study.trials)
    client = mlflow_client(results)
    outcomes = {}
    for run in runs:
        outcomes[run.data.tags["trial_id"]] = (run.info.status, run.data.tags["status"])
        if run.info.status == "FINISHED":
            for metric in ("loss", "acc/digits_002"):
                steps = [m.step for m in client.get_metric_history(run.info.run_id, metric)]
                assert steps == STEPS, (run.data.tags["trial_id"], metric, steps)
    assert sorted(outcomes.values()) == [("FAILED", "diverged")] * 3 + [("FINISHED", "done")] * 3
    killed_trial, _ = events["killed"]
    [killed_run] = [r for r in runs if r.data.tags["trial_id"] == killed_trial]
    assert killed_run.data.tags["worker_failures"] == "1"


def test_mlflow_after_the_resume_is_what_the_results_folder_says(faults):
    """Each trial's run: the end its status gives, and each metric at exactly the
    steps (and values) of its rows, none twice."""
    _, results, _ = faults
    client = mlflow_client(results)
    runs = {r.data.tags["trial_id"]: r for r in mlflow_runs(results, "faults")}
    with open_results(results, "faults") as con:
        statuses = {r["trial_id"]: r["status"] for r in run_query(con, "select * from trials").to_pylist()}
        train = run_query(con, "select trial_id, step, loss from train order by step").to_pylist()
        evals = run_query(con, "select trial_id, step, digits, accuracy from eval order by step").to_pylist()
    assert sorted(runs) == sorted(statuses)
    for trial_id, status in statuses.items():
        run = runs[trial_id]
        assert (run.info.status, run.data.tags["status"]) == RUN_END[status]

        def logged(metric, run_id=run.info.run_id):
            return [(m.step, m.value) for m in sorted(client.get_metric_history(run_id, metric),
                                                       key=lambda m: m.step)]

        assert logged("loss") == [(r["step"], r["loss"]) for r in train if r["trial_id"] == trial_id]
        for digits in (2, 3):
            assert logged(accuracy_name(digits)) == [
                (r["step"], r["accuracy"]) for r in evals if (r["trial_id"], r["digits"]) == (trial_id, digits)]


def test_status_shows_the_diverged_trials(faults):
    from typer.testing import CliRunner

    from orchestrator.cli import app

    study_file, results, _ = faults
    outcome = CliRunner().invoke(app, ["status", str(study_file), "--results", str(results)])
    assert outcome.exit_code == 0, outcome.output
    text = " ".join(outcome.output.split())
    assert "diverged 3" in text and "done 3" in text and "6 of 6 finished" in text
    assert "non-finite loss" in text
