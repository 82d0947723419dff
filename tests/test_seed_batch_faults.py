"""Seed batches through a real local Ray, driven as a user would: `lg-study run` of a
study with `resources.seeds_per_trial: 4`, whose one worker (one Ray Tune trial, four
seeds) is killed with SIGKILL once a seed has a checkpoint. Tune retries the batch,
every seed resuming from its own checkpoint; then the study has 4 trials, each with
its rows once, and 4 MLflow runs FINISHED with no step logged twice (test_faults.py's
study, its healthy group only; the fixture's helpers are tests/ray_studies.py's)."""

from __future__ import annotations

import os
import signal
import subprocess

import pytest
from ray_studies import mlflow_client, mlflow_runs, study_command, tiny_study, watch

from analysis.query import open_results, run_query
from orchestrator.studies.study import load_study

pytestmark = [pytest.mark.slow, pytest.mark.long]

# test_faults.py's study, its healthy group only, at four weight seeds in one seed batch
STUDY = tiny_study("faults", 200, {"seeds.weight": [0, 1, 2, 3]},
                   "{cpus_per_trial: 1, max_failures: 1, seeds_per_trial: 4}",
                   source="test fixture: worker SIGKILL, driver SIGTERM, divergence")
STEPS = list(range(20, 201, 20))


@pytest.fixture(scope="module")
def batch_run(tmp_path_factory):
    study_file, results, command = study_command(tmp_path_factory.mktemp("seed_batch_faults"), STUDY)
    run = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           env={**os.environ, "COLUMNS": "200"})
    killed = {}

    def act(rows, running) -> bool:
        if not killed and running:
            killed["pid"] = next(iter(running.values()))["pid"]
            os.kill(killed["pid"], signal.SIGKILL)
        return False

    watch(run, results, "faults", act)
    output, _ = run.communicate(timeout=240)
    return study_file, results, killed, run.returncode, output


def test_a_killed_seed_batch_resumes_every_seed_and_each_is_a_trial_once(batch_run):
    study_file, results, killed, code, output = batch_run
    assert killed and code == 0, output
    assert "retrying from its last checkpoint" in output
    study = load_study(study_file)
    with open_results(results, "faults") as con:
        trials = run_query(con, "select trial_id, status, resumed_from_step, pid, seeds_per_trial, seed_slot, "
                                "environment from trials").to_pylist()
        counts = run_query(con, "select trial_id, count(*) as n, count(distinct step) as steps "
                                "from train group by all").to_pylist()
        evals = run_query(con, "select trial_id, count(*) as n from eval group by all").to_pylist()
    ids = sorted(c.trial_id for c in study.trials)
    assert sorted(t["trial_id"] for t in trials) == ids and len(ids) == 4
    assert {t["status"] for t in trials} == {"done"}
    assert sorted(t["seed_slot"] for t in trials) == [0, 1, 2, 3]
    assert {t["seeds_per_trial"] for t in trials} == {4}
    assert all(t["environment"].endswith("; seed batch of 4") for t in trials)
    assert any((t["resumed_from_step"] or 0) > 0 for t in trials)  # resumed from checkpoints
    assert len({t["pid"] for t in trials}) == 1 and trials[0]["pid"] != killed["pid"]  # one worker, retried
    assert {c["trial_id"]: (c["n"], c["steps"]) for c in counts} == dict.fromkeys(ids, (len(STEPS), len(STEPS)))
    assert {e["trial_id"]: e["n"] for e in evals} == dict.fromkeys(ids, 2 * len(STEPS))
    assert not list((results / "faults" / "_checkpoints").glob("*.pt"))


def test_a_seed_batch_gives_each_seed_its_finished_mlflow_run(batch_run):
    _, results, _, _, _ = batch_run
    runs = mlflow_runs(results, "faults")
    assert len(runs) == 4 and {r.info.status for r in runs} == {"FINISHED"}
    client = mlflow_client(results)
    for run in runs:
        for metric in ("loss", "acc/digits_002"):
            assert [m.step for m in client.get_metric_history(run.info.run_id, metric)] == STEPS
