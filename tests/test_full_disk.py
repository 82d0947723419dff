"""A real full disk in the middle of a real study: `lg-study run` on a tmpfs too small
for the study, mounted in a user and mount namespace of its own (`unshare`), as a user
meets it. The run stops with one message and exit 74 rather than a traceback; no trial
is retried on the fault; `status` afterwards shows the stopped trials as interrupted
(their driver is gone); once the disk is grown, the same command finishes the study,
and its rows are those of an undisturbed run, bit for bit.

Skipped, with the reason, where no namespace and tmpfs can be made (a container
without user namespaces, no `unshare`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from mlflow.tracking import MlflowClient

from orchestrator.mlflow_tracking.group_runs import TRIAL_RUNS
from orchestrator.mlflow_tracking.mlflow_store import create_sqlite_store
from orchestrator.store.storage_faults import EXIT_CODE

pytestmark = [pytest.mark.slow, pytest.mark.long]  # three `lg-study run`s: about a minute

LG_STUDY = str(Path(sys.executable).parent / "lg-study")
STUDY = """\
name: disk
source: "test fixture: a full disk mid-study"
base:
  task: {name: successor, train_digits: [1, 2]}
  model: {arch: decoder, size: tiny, pe: nope}
  train: {steps: 100, batch_size: 16, lr: 3.0e-3, warmup: 5, log_every: 20}
  eval: {digits: [2, 3], samples: 8, every: 20}
axes:
  seeds.weight: [0, 1]
resources: {cpus_per_trial: 1, max_failures: 2}
"""
#: room left beside the new MLflow store: one of the trials' checkpoints (1.4 MB each)
#: and their first rows fit, the second checkpoint does not
HEADROOM_KIB = 2400
#: columns that say when, where and how a trial ran, not what it computed
RUN_COLUMNS = {"started_at", "finished_at", "wall_s", "node", "pid", "host", "resumed_from_step"}


def namespace_command(folder: Path) -> list[str] | None:
    """How to run a shell with a mount namespace of its own here (one that can mount a
    tmpfs on ``folder``), or None."""
    if shutil.which("unshare") is None:
        return None
    for command in (["unshare", "--user", "--map-root-user", "--mount"], ["unshare", "--mount"]):
        probe = subprocess.run([*command, "mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(folder)],
                               check=False, capture_output=True)
        if probe.returncode == 0:
            return command
    return None


def rows(results: Path, table: str) -> list[dict]:
    found = []
    for path in sorted((results / "disk" / table).glob("trial_id=*/part-0.parquet")):
        found += pq.read_table(path, partitioning=None).to_pylist()
    drop = RUN_COLUMNS if table == "trials" else {"wall_s"}
    return sorted(({k: v for k, v in row.items() if k not in drop} for row in found),
                  key=lambda row: (row["trial_id"], row.get("step", 0), row.get("digits", 0)))


@pytest.fixture(scope="module")
def full_disk(tmp_path_factory) -> dict[str, object]:
    """The study run on a too-small tmpfs, its status, then re-run on the grown disk;
    and the same study run undisturbed on this machine's disk."""
    tmp = tmp_path_factory.mktemp("full_disk")
    namespace = namespace_command(tmp)
    if namespace is None:
        pytest.skip("no user or mount namespace can be made here (unshare --user --map-root-user --mount, "
                    "unshare --mount): no tmpfs to fill")
    study = tmp / "disk.yaml"
    study.write_text(STUDY)
    store = tmp / "probe" / "mlflow.db"
    create_sqlite_store(store)
    size_kib = store.stat().st_size // 1024 + HEADROOM_KIB
    disk, out = tmp / "disk", tmp / "out"
    disk.mkdir()
    out.mkdir()
    run = f"{LG_STUDY} run {study} --results {disk}"
    script = f"""
        mount -t tmpfs -o size={size_kib}k tmpfs {disk} || exit 90
        {run} > {out}/first.out 2> {out}/first.err; echo $? > {out}/first.rc
        df -k {disk} > {out}/df
        {LG_STUDY} status {study} --results {disk} > {out}/status.out 2>&1
        cp -a {disk}/disk/trials {out}/trials_after_fault 2>/dev/null
        mount -o remount,size=256m {disk}
        {run} > {out}/second.out 2> {out}/second.err; echo $? > {out}/second.rc
        cp -a {disk}/. {out}/results
    """
    done = subprocess.run([*namespace, "sh", "-c", script], check=False, capture_output=True, text=True, timeout=600,
                          env={**_env(), "COLUMNS": "300"})
    assert done.returncode == 0, done.stdout + done.stderr
    clean = tmp / "clean"
    subprocess.run([LG_STUDY, "run", str(study), "--results", str(clean)], check=True, capture_output=True,
                   timeout=600, env=_env())
    read = {name: (out / name).read_text() for name in
            ("first.out", "first.err", "first.rc", "df", "status.out", "second.err", "second.rc")}
    return {**read, "results": out / "results", "clean": clean, "after_fault": out / "trials_after_fault"}


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("RAY_", "PYTEST"))}


def test_a_full_disk_stops_the_run_with_one_message_and_its_exit_code(full_disk) -> None:
    err = " ".join(full_disk["first.err"].split())
    assert full_disk["first.rc"].strip() == str(EXIT_CODE), err
    assert "Traceback" not in full_disk["first.err"] and "Traceback" not in full_disk["first.out"]
    assert "stopped: the disk holding the results is full:" in err
    assert "free now, of" in err and "on the filesystem mounted at" in err  # its free space, named
    assert "kept: " in err and "interrupted ones with their rows up to their last checkpoint" in err
    assert "to continue: free space there" in err and "lg-study run " in err and "--results" in err


def test_no_trial_is_retried_on_a_full_disk(full_disk) -> None:
    err = full_disk["first.err"]
    assert "retrying from its last checkpoint" not in err
    after = [pq.read_table(p, partitioning=None).to_pylist()[0]
             for p in Path(full_disk["after_fault"]).glob("trial_id=*/part-0.parquet")]
    assert after, "the disk filled before any trial had started: HEADROOM_KIB is too small"
    assert {row["status"] for row in after} <= {"running", "done"}, "a trial was written as failed"


def test_status_after_the_fault_shows_the_stopped_trials_as_interrupted(full_disk) -> None:
    said = " ".join(full_disk["status.out"].split())
    assert "interrupted" in said and "running 1" not in said and "running 2" not in said
    assert "no lg-study process holds the study" in said
    assert "resume them (each from its last checkpoint): lg-study run " in said


def test_the_rerun_on_the_grown_disk_gives_the_rows_of_an_undisturbed_run(full_disk) -> None:
    assert full_disk["second.rc"].strip() == "0", full_disk["second.err"]
    results, clean = full_disk["results"], full_disk["clean"]
    for table in ("trials", "train", "eval"):
        assert rows(results, table) == rows(clean, table), table
    assert {row["status"] for row in rows(results, "trials")} == {"done"}
    assert len(rows(results, "train")) == 2 * 5 and len(rows(results, "eval")) == 2 * 5 * 2


def test_the_rerun_leaves_one_finished_mlflow_run_per_trial(full_disk) -> None:
    client = MlflowClient(f"sqlite:///{full_disk['results']}/mlflow.db")
    experiment = client.get_experiment_by_name("disk")
    runs = client.search_runs([experiment.experiment_id], filter_string=TRIAL_RUNS)
    assert sorted(run.info.status for run in runs) == ["FINISHED", "FINISHED"]
    assert len({run.data.tags["trial_id"] for run in runs}) == 2
    for run in runs:
        steps = [m.step for m in client.get_metric_history(run.info.run_id, "loss")]
        assert steps == sorted(set(steps)) == [20, 40, 60, 80, 100]


#: a disk smaller than the study and its log: half the 8-trial study below (1.4 MiB)
SMALL_KIB = 1434


@pytest.fixture(scope="module")
def small_disks(tmp_path_factory) -> dict[str, str]:
    """`lg-study run` on a tmpfs of SMALL_KIB (the MLflow store alone takes most of it,
    so the run's log fills with the rest), then again on that disk once full (the log
    is made, and not a byte of it can be written), then on a tmpfs with no inode left
    for the log's folder (the log cannot be made): each run's stderr and exit code."""
    tmp = tmp_path_factory.mktemp("small_disk")
    namespace = namespace_command(tmp)
    if namespace is None:
        pytest.skip("no user or mount namespace can be made here: no tmpfs to fill")
    study = tmp / "disk.yaml"
    study.write_text(STUDY.replace("seeds.weight: [0, 1]", "seeds.weight: [0, 1, 2, 3, 4, 5, 6, 7]"))
    small, inodes, out = tmp / "small", tmp / "inodes", tmp / "out"
    for folder in (small, inodes, out):
        folder.mkdir()
    script = f"""
        mount -t tmpfs -o size={SMALL_KIB}k tmpfs {small} || exit 90
        mount -t tmpfs -o size={SMALL_KIB}k,nr_inodes=3 tmpfs {inodes} || exit 91
        for name in small full; do
            {LG_STUDY} run {study} --results {small}/r > {out}/$name.out 2> {out}/$name.err; echo $? > {out}/$name.rc
        done
        {LG_STUDY} run {study} --results {inodes}/r > {out}/inodes.out 2> {out}/inodes.err; echo $? > {out}/inodes.rc
    """
    done = subprocess.run([*namespace, "sh", "-c", script], check=False, capture_output=True, text=True, timeout=600,
                          env={**_env(), "COLUMNS": "300"})
    assert done.returncode == 0, done.stdout + done.stderr
    return {path.name: path.read_text() for path in out.iterdir()}


@pytest.mark.parametrize("case", ["small", "full", "inodes"])
def test_a_disk_too_full_for_the_log_gives_one_message_and_exit_74(small_disks, case: str) -> None:
    """However full the disk, the log's own failed writes (while the run ends, or its
    file never made) add no traceback to the storage fault's message."""
    err = small_disks[f"{case}.err"]
    said = " ".join(err.split())
    assert small_disks[f"{case}.rc"].strip() == str(EXIT_CODE), err
    assert "Traceback" not in err + small_disks[f"{case}.out"] and "Exit: 74" not in err, err
    assert said.count("stopped: the disk holding the results is full:") == 1, err
    assert "kept: " in said and "to continue: free space there" in said and "then run lg-study run " in said
