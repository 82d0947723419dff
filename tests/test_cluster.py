"""A study across a real two-node Ray cluster on this machine (slow: `pytest -m slow`).

Two `ray start --block` processes, a head and a second node joining it, each with one
CPU and a resource of its own; a study of four one-CPU trials must then use both.
Each node is stopped through its own `ray start --block` process (SIGTERM ends the
node's processes); `ray stop` would stop every Ray on the machine.
"""

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
from pathlib import Path

import mlflow
import pytest

from analysis.query import open_results, run_query

pytestmark = pytest.mark.slow
BIN = Path(sys.executable).parent
STUDY = """\
name: cluster
source: "test fixture: four one-CPU trials on two one-CPU nodes"
base:
  task: {name: successor, train_digits: [1, 2]}
  model: {arch: decoder, size: tiny, pe: nope}
  train: {steps: 60, batch_size: 16, lr: 3.0e-3, warmup: 5, log_every: 20}
  eval: {digits: [2, 3], samples: 8, every: 20}
axes:
  seeds.weight: [0, 1, 2, 3]
resources: {cpus_per_trial: 1}
"""


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


def test_study_runs_on_both_nodes_of_a_cluster(cluster, tmp_path):
    address, node_ids, env = cluster
    study_file, results = tmp_path / "cluster.yaml", tmp_path / "results"
    study_file.write_text(STUDY)
    run = subprocess.run([str(BIN / "lg-study"), "run", str(study_file), "--address", address,
                          "--results", str(results)], capture_output=True, text=True, timeout=300,
                         check=False, env=env)
    assert run.returncode == 0, run.stdout + run.stderr
    with open_results(results, "cluster") as con:
        trials = run_query(con, "select trial_id, status, node from trials").to_pylist()
        counts = run_query(con, "select count(*) as n, count(distinct trial_id) as trials from eval").to_pylist()
    assert [t["status"] for t in trials] == ["done"] * 4
    assert {t["node"] for t in trials} == node_ids  # both nodes ran trials
    assert counts == [{"n": 4 * 3 * 2, "trials": 4}]
    client = mlflow.MlflowClient(f"sqlite:///{results.resolve()}/mlflow.db")
    runs = client.search_runs([client.get_experiment_by_name("cluster").experiment_id])
    assert sorted(r.data.tags["trial_id"] for r in runs) == sorted(t["trial_id"] for t in trials)
    assert {r.info.status for r in runs} == {"FINISHED"}
