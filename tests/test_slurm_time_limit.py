"""A study run as a Slurm job on a real two-node Slurm cluster on this machine (slow:
`pytest -m slow`; tests/slurm_cluster.py starts it, and says why it is skipped where it
cannot be), written and submitted by `lg-study slurm --submit`, as a user does: a study too
long for its time limit gets Slurm's warning before it, stops cleanly (exit 130,
checkpoints kept), and the job's log says what was kept and how to continue. Its cluster
is its own, beside tests/test_slurm_jobs.py's, so that the two files' jobs run at once.
"""

from __future__ import annotations

import time

import pytest
from ray_studies import tiny_study, trial_rows
from slurm_cluster import cluster_or_skip, ray_processes_of, submit

from results_contract.layout import checkpoint_path

pytestmark = pytest.mark.slow
#: trials far longer than the job's time limit, evaluated (and checkpointed) every 500 steps
LIMITED = tiny_study("limited", 100_000, {"seeds.weight": [0, 1]}, "{cpus_per_trial: 1}",
                     source="test fixture: a Slurm job stopped by its time limit").replace(
    "log_every: 20", "log_every: 500").replace("every: 20}", "every: 500}")


@pytest.fixture(scope="module")
def slurm():
    # job ids apart from test_slurm_jobs' cluster's (from 1): their Ray folders are named by them
    yield from cluster_or_skip(first_job_id=5001)


@pytest.fixture(scope="module")
def limited(slurm, tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("limited")
    started = time.monotonic()
    # Slurm checks its time limits every 30 s and warns when the time left is within the grace
    # and one such period: 60-90 s after the start, the study running since about 20 s
    job_id, results, log = submit(slurm, folder, LIMITED, "2", "--grace", "30")
    job = slurm.wait_for_end(job_id, 400)
    return {"job_id": job_id, "job": job, "results": results, "log": log.read_text(),
            "wall": time.monotonic() - started,
            "script": results / "limited" / "_slurm" / "job.sbatch"}


def test_a_job_warned_of_its_time_limit_stops_cleanly(limited) -> None:
    job, log = limited["job"], limited["log"]
    assert (job["JobState"], job["ExitCode"]) == ("FAILED", "130:0"), log  # stopped before the limit
    assert "Slurm's warning: the time limit is near; stopping the study" in log
    assert "interrupted: 2 of 2 trials not finished" in log, log
    rows = trial_rows(limited["results"], "limited")
    assert {r["status"] for r in rows.values()} == {"running"}
    assert all(checkpoint_path(limited["results"], "limited", t).exists() for t in rows)


def test_the_job_log_says_what_was_kept_and_that_resubmitting_continues(limited) -> None:
    said = " ".join(limited["log"].split())
    assert "Kept in " in said and "each unfinished trial's rows up to its last checkpoint" in said
    assert f"otherwise 'sbatch {limited['script']}' continues the study" in said
    assert "Traceback" not in limited["log"]


def test_no_ray_process_outlives_the_job(limited) -> None:
    assert ray_processes_of(limited["job_id"]) == []
