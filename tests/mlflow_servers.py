"""A real MLflow tracking server on 127.0.0.1 for the tests that take it away from a
study (test_mlflow_server): `mlflow server` with a SQLite backend in a process group of
its own (SIGKILL of the group kills it as an outage would), started again on the same
port and store, and an HTTP proxy in front of it that delays every request."""

from __future__ import annotations

import http.client
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Self

from ray_studies import free_port

from orchestrator.mlflow_tracking.store_template import copy_empty_store

MLFLOW = str(Path(sys.executable).parent / "mlflow")
#: MLflow 3's job runners (three Huey consumers, each importing MLflow) burn about 20 s
#: of CPU in a server's first 20 s here, taken from the study under test; lg-study starts
#: no jobs, and `lg-study ui` runs its server without them too
SERVER_ENV = {"PYTHONUNBUFFERED": "1", "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
#: hop-by-hop headers a proxy does not pass on
_HOP = {"connection", "keep-alive", "transfer-encoding", "proxy-connection", "te", "upgrade", "trailer"}


class MlflowServer:
    """`mlflow server` on a free port of 127.0.0.1, its store and artifacts in ``folder``."""

    def __init__(self, folder: Path, port: int | None = None) -> None:
        self.folder, self.port = Path(folder), port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen | None = None

    def start(self, timeout: float = 120) -> Self:
        self.folder.mkdir(parents=True, exist_ok=True)
        store = self.folder / "mlflow.db"
        if not store.exists():  # MLflow's migrations, 1.4-2.7 s a new store here, run once per version
            copy_empty_store(store)
        log = open(self.folder / "server.log", "ab")  # noqa: SIM115 (the server's own, kept open)
        self.process = subprocess.Popen(
            [MLFLOW, "server", "--backend-store-uri", f"sqlite:///{self.folder}/mlflow.db",
             "--artifacts-destination", str(self.folder / "artifacts"), "--host", "127.0.0.1",
             "--port", str(self.port), "--workers", "1"],
            stdout=log, stderr=log, start_new_session=True, env={**os.environ, **SERVER_ENV})
        wait_healthy(self.url, timeout, self.process)
        return self

    def kill(self) -> None:
        """SIGKILL to the server's whole process group: no goodbye to its clients."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.kill()


def wait_healthy(url: str, timeout: float, process: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"mlflow server exited with {process.returncode} before it answered")
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as answer:
                if answer.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise TimeoutError(f"no answer from {url}/health within {timeout} s")


class DelayProxy:
    """An HTTP proxy on a free port of 127.0.0.1 that waits ``delay`` seconds before
    passing each request on to ``upstream`` (a slow server, not a dead one)."""

    def __init__(self, upstream: str, delay: float) -> None:
        host, port = upstream.removeprefix("http://").split(":")
        handler = type("Handler", (_Forward,), {"upstream": (host, int(port)), "delay": delay})
        self.server = ThreadingHTTPServer(("127.0.0.1", free_port()), handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_port}"

    def __enter__(self) -> Self:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


class _Forward(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    upstream: tuple[str, int]
    delay: float

    def _forward(self) -> None:
        time.sleep(self.delay)
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
        connection = http.client.HTTPConnection(*self.upstream, timeout=60)
        try:
            connection.request(self.command, self.path, body=body, headers=headers)
            answer = connection.getresponse()
            data = answer.read()
        finally:
            connection.close()
        self.send_response(answer.status, answer.reason)
        for key, value in answer.getheaders():
            if key.lower() not in _HOP and key.lower() != "content-length":
                self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _forward

    def log_message(self, format: str, *args: object) -> None:
        pass
