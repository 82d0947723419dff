"""Studies run as Slurm jobs on a real two-node Slurm cluster on this machine (slow:
`pytest -m slow`; tests/slurm_cluster.py starts it, and says why it is skipped where it
cannot be). Each job is written and submitted by `lg-study slurm --submit`, as a user does.

- A study of 8 trials is requeued mid-study (`scontrol requeue`, what a preemption or a
  node failure does): the job runs again, resumes, and ends with every trial done, its rows
  those of an undisturbed run bit for bit, nothing twice, one FINISHED MLflow run per trial,
  trials run on both nodes.
- A study too long for its time limit gets Slurm's warning before it: it stops cleanly
  (exit 130, checkpoints kept), and the job's log says what was kept and how to continue.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from datetime import datetime, timezone
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from ray_studies import LG_STUDY, one_finished_run_each, tiny_study, trained_to, trial_rows
from slurm_cluster import SlurmCluster, missing_reason, start_cluster

from results_contract.layout import checkpoint_path

pytestmark = [pytest.mark.slow, pytest.mark.long]
REQUEUED = tiny_study("requeued", 200, {"seeds.weight": list(range(4)), "seeds.data": [0, 1]},
                      "{cpus_per_trial: 1}", source="test fixture: a Slurm job requeued mid-study")
#: trials far longer than the job's time limit, evaluated (and checkpointed) every 500 steps
LIMITED = tiny_study("limited", 100_000, {"seeds.weight": [0, 1]}, "{cpus_per_trial: 1}",
                     source="test fixture: a Slurm job stopped by its time limit").replace(
    "log_every: 20", "log_every: 500").replace("every: 20}", "every: 500}")
#: columns that say when, where and how a trial ran, not what it computed
RUN_COLUMNS = {"started_at", "finished_at", "wall_s", "node", "pid", "host", "resumed_from_step"}


@pytest.fixture(scope="module")
def slurm():
    reason = missing_reason()
    if reason:
        pytest.skip(reason)
    yield from start_cluster()


def clean_env(cluster: SlurmCluster) -> dict[str, str]:
    """The environment a user submits from: no pytest or Ray settings of this process."""
    return {k: v for k, v in cluster.env.items() if not k.startswith(("RAY_", "PYTEST"))}


def submit(cluster: SlurmCluster, folder: Path, text: str, time_limit: str, *options: str) -> tuple[str, Path, Path]:
    """`lg-study slurm STUDY --submit` on two one-CPU nodes: the job id, the results folder, the job's log."""
    study, results = folder / f"{text.split(chr(10))[0].removeprefix('name: ')}.yaml", folder / "results"
    study.write_text(text)
    done = subprocess.run([LG_STUDY, "slurm", str(study), "--nodes", "2", "--gpus-per-node", "0", "--cpus-per-node",
                           "1", "--time", time_limit, "--results", str(results), *options, "--submit"],
                          env=clean_env(cluster), capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("#!/bin/bash") and "#SBATCH --requeue" in done.stdout
    job_id = re.search(r"submitted: Slurm job (\d+)", done.stderr).group(1)
    assert f"tail -f {results}/{study.stem}/_slurm/job-{job_id}.log" in done.stderr
    return job_id, results, results / study.stem / "_slurm" / f"job-{job_id}.log"


def before_its_end(results: Path, study: str, trial_id: str) -> bool:
    """Whether a running trial has a checkpoint and three evaluations (60 steps) or more still to go:
    a requeue now stops it mid-training."""
    step = trained_to(results, study, trial_id)
    return checkpoint_path(results, study, trial_id).exists() and step is not None and step <= 200 - 60


def requeue_mid_study(cluster: SlurmCluster, job_id: str, results: Path, study: str) -> None:
    """Once a trial is done and another is mid-training, with three or more of the 8 trials not
    done (so that the job's second run needs both nodes), requeue the job; then start it again at
    once (Slurm holds a requeued job back two minutes)."""
    deadline = time.monotonic() + 300
    while True:
        rows = trial_rows(results, study)
        done = sum(r["status"] == "done" for r in rows.values())
        running = [t for t, r in rows.items() if r["status"] == "running" and before_its_end(results, study, t)]
        if 1 <= done <= 5 and running:
            break
        # a poll starved of CPU long enough can miss every window: then the test says so
        assert done <= 5, f"the study got too far to be requeued mid-study with trials left: {rows}"
        assert time.monotonic() < deadline and cluster.job(job_id)["JobState"] in {"PENDING", "RUNNING"}, rows
        time.sleep(0.1)
    cluster.scontrol("requeue", job_id)
    while cluster.job(job_id)["JobState"] != "PENDING":
        assert time.monotonic() < deadline, cluster.job(job_id)
        time.sleep(0.5)
    cluster.scontrol("update", f"JobId={job_id}", "StartTime=now")


def rows(results: Path, study: str, table: str) -> list[dict]:
    found = []
    for path in sorted((results / study / table).glob("trial_id=*/part-0.parquet")):
        found += pq.read_table(path, partitioning=None).to_pylist()
    drop = RUN_COLUMNS if table == "trials" else {"wall_s"}
    return sorted(({k: v for k, v in row.items() if k not in drop} for row in found),
                  key=lambda row: (row["trial_id"], row.get("step", 0), row.get("digits", 0)))


@pytest.fixture(scope="module")
def requeued(slurm, tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("requeued")
    started = time.monotonic()
    job_id, results, log = submit(slurm, folder, REQUEUED, "20")
    requeue_mid_study(slurm, job_id, results, "requeued")
    requeued_at = datetime.now(timezone.utc)
    job = slurm.wait_for_end(job_id, 600)
    wall = time.monotonic() - started
    clean = folder / "undisturbed"
    subprocess.run([LG_STUDY, "run", str(folder / "requeued.yaml"), "--results", str(clean)], check=True,
                   capture_output=True, timeout=600, env=clean_env(slurm))
    return {"job": job, "results": results, "clean": clean, "log": log.read_text(), "wall": wall,
            "requeued_at": requeued_at, "ray_log": (log.parent / f"ray-{job_id}.log").read_text(), "ray_files": sorted(Path("/tmp").glob(f"lgsray-{job_id}-*"))}


def test_a_requeued_job_runs_again_and_finishes_the_study(requeued) -> None:
    job, log = requeued["job"], requeued["log"]
    assert (job["JobState"], job["Restarts"], job["ExitCode"]) == ("COMPLETED", "1", "0:0"), log
    first, second = log.split("(run 2)")
    said = " ".join(first.split())
    assert "Slurm is stopping the job (a requeue, a preemption or scancel)" in said, log
    assert "each unfinished trial's rows up to its last checkpoint, from which it continues" in said, log
    assert "trials had been interrupted" in second and "the study finished: every trial is done" in second, log
    assert requeued["ray_files"] == [], "Ray's files of the job's runs are left on the head node"


def test_the_requeued_study_has_the_rows_of_an_undisturbed_run(requeued) -> None:
    results, clean = requeued["results"], requeued["clean"]
    for table in ("trials", "train", "eval"):
        assert rows(results, "requeued", table) == rows(clean, "requeued", table), table
    trials = rows(results, "requeued", "trials")
    assert len(trials) == 8 and {t["status"] for t in trials} == {"done"}
    train = rows(results, "requeued", "train")
    assert len(train) == len({(r["trial_id"], r["step"]) for r in train}) == 8 * 10


def test_the_requeued_study_has_one_finished_mlflow_run_per_trial_and_ran_on_both_nodes(requeued) -> None:
    results = requeued["results"]
    trials = [pq.read_table(p, partitioning=None).to_pylist()[0]
              for p in (results / "requeued" / "trials").glob("trial_id=*/part-0.parquet")]
    one_finished_run_each(results, "requeued", [t["trial_id"] for t in trials])
    # each run of the job is a new Ray cluster, with new node ids: the second run's used both nodes
    # (it had three or more trials to run, on two one-CPU nodes)
    ran = sorted((t["started_at"].isoformat(), t["trial_id"], t["node"][:8], t["resumed_from_step"]) for t in trials)
    assert len({t["node"] for t in trials if t["started_at"] > requeued["requeued_at"]}) == 2, \
        (requeued["requeued_at"].isoformat(), ran, requeued["log"], requeued["ray_log"][-6000:])


@pytest.fixture(scope="module")
def limited(slurm, tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("limited")
    started = time.monotonic()
    # Slurm checks its time limits every 30 s and warns when the time left is within the grace
    # and one such period: 60-90 s after the start, the study running since about 20 s
    job_id, results, log = submit(slurm, folder, LIMITED, "2", "--grace", "30")
    job = slurm.wait_for_end(job_id, 400)
    return {"job": job, "results": results, "log": log.read_text(), "wall": time.monotonic() - started,
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


def test_no_ray_process_outlives_the_jobs(requeued, limited) -> None:
    leftover = subprocess.run(["pgrep", "-f", "lgsray-"], capture_output=True, text=True, check=False).stdout.split()
    assert [pid for pid in leftover if int(pid) != os.getpid()] == []
