"""`lg-study ui`: the MLflow UI over a study's tracking store, bound to 127.0.0.1.

Starts ``python -m mlflow server`` as a child process and asks it for the study's
experiment over MLflow's REST API. Only the standard library is used here: the MLflow
Python API stays in orchestrator/mlflow_tracking/tracking.py, and analysis/ imports neither.
The store's URI and a study's experiment name are the ones the tracker writes under
(results_contract.experiments).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

HOST = "127.0.0.1"
STARTUP_TIMEOUT_S = 120.0


class UiError(RuntimeError):
    """The UI could not be started (no store, port taken, server died); says why."""


@dataclass
class UiServer:
    url: str  # the UI's address
    experiment_url: str | None  # the study's experiment page, when a study was named
    process: subprocess.Popen | None  # None when the tracking URI is a running server
    log: Path | None  # the server's own output

    def stop(self, timeout: float = 15.0) -> None:
        """Stop the server and the workers it started (its own process group), and return
        once the whole group is gone: the workers outlive the server by a moment, and a
        caller that checks (or reuses the port) right after would find them."""
        if self.process is None:
            return
        if self.process.poll() is None:
            _signal_group(self.process, signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                _signal_group(self.process, signal.SIGKILL)
                self.process.wait(timeout)
        if not _group_gone(self.process.pid, timeout):
            _signal_group(self.process, signal.SIGKILL)
            _group_gone(self.process.pid, timeout)


def server_command(tracking_uri: str, port: int, artifacts: Path) -> list[str]:
    """The ``mlflow server`` command line: one worker, on 127.0.0.1 only."""
    return [
        sys.executable, "-m", "mlflow", "server",
        "--backend-store-uri", tracking_uri,
        "--host", HOST,
        "--port", str(port),
        "--workers", "1",
        # where artifacts of runs made through the UI would go; studies' runs keep theirs
        "--artifacts-destination", artifacts.as_uri(),
    ]  # fmt: skip


def start(tracking_uri: str, port: int, study: str | None = None) -> UiServer:
    """Start the UI over ``tracking_uri`` (or, for an http(s) URI, use that server's)."""
    scheme = urllib.parse.urlparse(tracking_uri).scheme
    if scheme in ("http", "https"):
        url = tracking_uri.rstrip("/")
        return UiServer(url, _experiment_url(url, study), None, None)
    store_dir = Path.cwd()
    if scheme == "sqlite":
        # sqlite:///relative.db and sqlite:////absolute.db (SQLAlchemy's convention)
        db = Path(urllib.parse.urlparse(tracking_uri).path[1:])
        if not db.is_file():
            raise UiError(f"no MLflow store at {db}: run a study first (lg-study run STUDY.yaml)"
                          " or pass --results / --tracking-uri")
        store_dir = db.parent
    _check_port(port)
    log = store_dir / "mlflow-ui.log"
    with open(log, "w") as out:
        # its own session: stop() ends the server and the workers it spawns together
        process = subprocess.Popen(
            server_command(tracking_uri, port, store_dir / "mlartifacts"),
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True, env=_server_env(),
        )  # fmt: skip
    url = f"http://{HOST}:{port}"
    server = UiServer(url, None, process, log)
    try:
        _wait_until_up(url, process, log)
        server.experiment_url = _experiment_url(url, study)
    except BaseException:
        server.stop()
        raise
    return server


def serve(server: UiServer) -> int:
    """Wait until the server exits or the user stops it (Ctrl-C or SIGTERM)."""
    if server.process is None:
        return 0

    def stop_on_sigterm(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, stop_on_sigterm)
    try:
        return server.process.wait()
    except KeyboardInterrupt:
        return 0
    finally:
        server.stop()
        signal.signal(signal.SIGTERM, previous)


#: the query that opens MLflow 3's UI in its model-training view (runs, metrics)
TRAINING_VIEW = "workflowType=machine_learning"


def experiment_id(base_url: str, name: str) -> str | None:
    """The id of the experiment called ``name``, or None when there is none."""
    query = urllib.parse.urlencode({"experiment_name": name})
    try:
        reply = _get_json(f"{base_url}/api/2.0/mlflow/experiments/get-by-name?{query}")
    except urllib.error.HTTPError as error:
        if error.code == 404:
            return None
        raise
    return reply["experiment"]["experiment_id"]


def experiment_names(base_url: str) -> list[str]:
    reply = _post_json(f"{base_url}/api/2.0/mlflow/experiments/search", {"max_results": 1000})
    return sorted(e["name"] for e in reply.get("experiments", []))


def _experiment_url(base_url: str, study: str | None) -> str | None:
    if study is None:
        return None
    found = experiment_id(base_url, study)
    if found is None:
        known = ", ".join(experiment_names(base_url)) or "none"
        raise UiError(f"no MLflow experiment named {study!r} in this store; experiments: {known}")
    # MLflow 3's UI opens an experiment in its GenAI views (traces, token usage) unless the
    # address or the browser's last choice says otherwise, whatever the experiment's
    # mlflow.experimentKind tag: the address picks the model-training view
    return f"{base_url}/#/experiments/{found}/runs?{TRAINING_VIEW}"


def _server_env() -> dict[str, str]:
    env = dict(os.environ)
    # MLflow 3 also starts a pool of background job workers (GenAI scoring, trace
    # archival); browsing runs needs none of them. A user's own setting wins.
    env.setdefault("MLFLOW_SERVER_ENABLE_JOB_EXECUTION", "false")
    return env


def _check_port(port: int) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((HOST, port))
        except OSError:
            raise UiError(f"port {port} on {HOST} is in use; choose another with --port") from None


def _wait_until_up(url: str, process: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            tail = log.read_text(errors="replace")[-2000:]
            raise UiError(f"the MLflow server exited with code {process.returncode}:\n{tail}")
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as reply:
                if reply.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.25)
    raise UiError(f"the MLflow server did not answer at {url} within {STARTUP_TIMEOUT_S:.0f} s;"
                  f" see {log}")


def _get_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=30) as reply:
        return json.load(reply)


def _post_json(url: str, body: dict) -> dict:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=30) as reply:
        return json.load(reply)


def _group_gone(group: int, timeout: float) -> bool:
    """Whether process group ``group`` has no live process left within ``timeout``
    seconds. A zombie counts as gone: a worker that outlived the server is reaped by
    whoever adopted it, which in a container may be never, and it holds no port."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            return True
        if Path("/proc").is_dir() and not _live_members(group):
            return True
        time.sleep(0.05)
    return False


def _live_members(group: int) -> list[int]:
    """The processes of ``group`` that are not zombies, from /proc (Linux)."""
    live = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            # "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses
            state, _, pgrp = stat.read_text().rsplit(")", 1)[1].split()[:3]
        except (OSError, ValueError):
            continue  # gone while we read
        if int(pgrp) == group and state != "Z":
            live.append(int(stat.parent.name))
    return live


def _signal_group(process: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(process.pid, sig)  # the group this module started (start_new_session)
    except ProcessLookupError:
        pass
