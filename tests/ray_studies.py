"""Studies run as a user runs them, `lg-study run` in a subprocess over a real Ray, for
the tests that stop them (test_faults, test_seed_batch_faults, test_interrupts) or run
them across a two-node cluster on this machine (test_cluster): the study files, the
command, the rows read while the driver writes them, the study's MLflow runs, and the
`cluster` fixture (tests/conftest.py registers it).

The cluster's nodes are two `ray start --block` processes, a head and a second node
joining it, each with one CPU and a resource of its own. Each node is stopped through
its own process (SIGTERM ends the node's processes); `ray stop` would stop every Ray on
the machine."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from orchestrator.mlflow_tracking.group_runs import TRIAL_RUNS
from results_contract.layout import checkpoint_path, table_path

BIN = Path(sys.executable).parent
LG_STUDY = str(BIN / "lg-study")


def tiny_study(name: str, steps: int, axes: dict[str, list], resources: str, source: str | None = None) -> str:
    """A study file's text: the successor task on 1 and 2 digits, a tiny decoder, `steps`
    steps reported every 20, evaluated at 2 and 3 digits every 20 steps; each axis's
    values written as str() writes them (give "3.0e-3" for that spelling)."""
    lines = [f"name: {name}", *([f'source: "{source}"'] if source else []), "base:",
             "  task: {name: successor, train_digits: [1, 2]}",
             "  model: {arch: decoder, size: tiny, pe: nope}",
             f"  train: {{steps: {steps}, batch_size: 16, lr: 3.0e-3, warmup: 5, log_every: 20}}",
             "  eval: {digits: [2, 3], samples: 8, every: 20}", "axes:",
             *(f"  {axis}: [{', '.join(map(str, values))}]" for axis, values in axes.items()),
             f"resources: {resources}"]
    return "\n".join(lines) + "\n"


def study_command(folder: Path, text: str) -> tuple[Path, Path, list[str]]:
    """The study `text` written into `folder`: its file, its results folder, and the
    `lg-study run` command that runs it there."""
    study_file, results = folder / f"{text.split(chr(10))[0].removeprefix('name: ')}.yaml", folder / "results"
    study_file.write_text(text)
    return study_file, results, [LG_STUDY, "run", str(study_file), "--results", str(results)]


def trial_rows(results: Path, study: str) -> dict[str, dict]:
    """The study's trials rows by trial id, read while the driver may be replacing them."""
    rows = {}
    for path in (results / study / "trials").glob("trial_id=*/part-0.parquet"):
        try:
            row = pq.read_table(path, partitioning=None).to_pylist()[0]
        except OSError:  # replaced while we read it
            continue
        rows[row["trial_id"]] = row
    return rows


def trained_to(results: Path, study: str, trial_id: str) -> int | None:
    """The last step of a trial's train rows on disk (None: none yet, or being replaced)."""
    path = table_path(results, study, "train", trial_id)
    try:
        return max(pq.read_table(path, columns=["step"], partitioning=None)["step"].to_pylist(), default=None)
    except OSError:
        return None


def mid_training(results: Path, study: str, trial_id: str, row: dict) -> bool:
    """Whether a running trial has a checkpoint and at most half its steps trained: a
    stop sent now reaches it before it ends. A trial past its last step is still
    `running` while it writes its tables and draws its plot, and ends `done` however
    it is stopped then (the race that made an interrupted study look uninterrupted)."""
    step = trained_to(results, study, trial_id)
    total = json.loads(row["config_json"])["train"]["steps"]
    return checkpoint_path(results, study, trial_id).exists() and step is not None and step <= total // 2


def watch(process: subprocess.Popen, results: Path, study: str, act: Callable[[dict, dict], bool],
          seconds: float = 240) -> None:
    """Every 0.1 s while `process` runs (at most `seconds`): act(rows, running) with the
    study's trials rows and those of its trials mid-training (mid_training); watching
    ends when act returns True."""
    deadline = time.monotonic() + seconds
    while process.poll() is None and time.monotonic() < deadline:
        rows = trial_rows(results, study)
        running = {t: r for t, r in rows.items() if r["status"] == "running" and mid_training(results, study, t, r)}
        if act(rows, running):
            return
        time.sleep(0.1)


def mlflow_client(results: Path):
    """A client of the MLflow store `lg-study run` made beside the results (MLflow
    imported here: conftest loads this module for every test)."""
    import mlflow

    return mlflow.MlflowClient(f"sqlite:///{results.resolve()}/mlflow.db")


def mlflow_runs(results: Path, experiment: str) -> list:
    """The runs of the study's experiment (none before the driver made it)."""
    client = mlflow_client(results)
    found = client.get_experiment_by_name(experiment)
    return client.search_runs([found.experiment_id], filter_string=TRIAL_RUNS) if found else []


def one_finished_run_each(results: Path, experiment: str, trial_ids: list[str]) -> list:
    """The experiment's runs, asserted to be exactly one FINISHED run per trial."""
    runs = mlflow_runs(results, experiment)
    assert sorted(r.data.tags["trial_id"] for r in runs) == sorted(trial_ids)
    assert {r.info.status for r in runs} == {"FINISHED"}
    return runs


# --- a two-node Ray cluster on this machine ---------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def node_ports() -> list[str]:
    """Ports two nodes on one machine must not share (the defaults are fixed numbers)."""
    return ["--dashboard-agent-listen-port", str(free_port()), "--dashboard-agent-grpc-port",
            str(free_port()), "--metrics-export-port", str(free_port()),
            "--runtime-env-agent-port", str(free_port())]


def cluster_node_ids(address: str, env: dict) -> set[str]:
    status = subprocess.run([str(BIN / "ray"), "status", "--address", address], env=env,
                            capture_output=True, text=True, timeout=60, check=False)
    return set(re.findall(r"node_([0-9a-f]{56})", status.stdout))


def stop(process: subprocess.Popen) -> None:
    """SIGTERM to `ray start --block` ends its node; SIGKILL its process group if it hangs."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)  # its own session: only this node's processes
            process.wait()


@pytest.fixture(scope="module")
def cluster():
    """(address, node ids, env) of a two-node Ray cluster on this machine, one CPU a node;
    `env` is the environment its clients (lg-study's driver, `ray status`) must run in."""
    temp = tempfile.mkdtemp(prefix="lgray", dir="/tmp")  # short: Ray's socket paths must fit
    port = free_port()
    address = f"127.0.0.1:{port}"
    # `ray start` turns on Ray's token authentication (the token is ~/.ray/auth_token);
    # clients of the cluster (`ray status`, lg-study's driver) must be told to send it
    env = {**os.environ, "RAY_AUTH_MODE": "token"}
    # a local Ray started earlier in this process (start_ray) switched multi-node
    # clusters off in os.environ; these nodes make one
    env.pop("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", None)
    # the nodes take this machine's network address (Ray maps 127.0.0.1 to it when a
    # driver connects), as the nodes of a real cluster do
    common = ["--block", "--num-cpus", "1", "--disable-usage-stats"]
    nodes: list[subprocess.Popen] = []
    with open(f"{temp}/head.log", "w") as head_log, open(f"{temp}/worker.log", "w") as worker_log:
        try:
            nodes.append(subprocess.Popen(
                [str(BIN / "ray"), "start", "--head", "--port", str(port), "--temp-dir", temp,
                 "--include-dashboard", "false", "--resources", json.dumps({"lg_head": 1}), *common,
                 *node_ports()],
                stdout=head_log, stderr=subprocess.STDOUT, env=env, start_new_session=True))
            deadline = time.monotonic() + 120
            while len(cluster_node_ids(address, env)) < 1:
                assert nodes[0].poll() is None and time.monotonic() < deadline, Path(head_log.name).read_text()
                time.sleep(1)
            nodes.append(subprocess.Popen(
                [str(BIN / "ray"), "start", "--address", address, "--resources",
                 json.dumps({"lg_worker": 1}), *common, *node_ports()],
                stdout=worker_log, stderr=subprocess.STDOUT, env=env, start_new_session=True))
            while len(ids := cluster_node_ids(address, env)) < 2:
                assert nodes[1].poll() is None and time.monotonic() < deadline, Path(worker_log.name).read_text()
                time.sleep(1)
            yield address, ids, env
        finally:
            for node in reversed(nodes):
                stop(node)
    shutil.rmtree(temp, ignore_errors=True)

