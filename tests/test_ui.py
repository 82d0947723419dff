"""`lg-study ui`: the MLflow UI over a study's tracking store, checked over the REST API
the page itself uses and, where a Chromium is installed, in a headless browser.

The store is a real SQLite MLflow store written by orchestrator.mlflow_tracking.tracking.StudyTracker
with the tags and run names `lg-study run` gives (mlflow_sync.describe), for real
trial configs of studies/quickstart.yaml; no Ray run, to keep the test fast.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from datetime import datetime, timezone
from pathlib import Path

import pytest
from typer.testing import CliRunner

from analysis.mlflow_ui import _live_members
from orchestrator.cli import app
from orchestrator.mlflow_tracking.mlflow_sync import describe
from orchestrator.mlflow_tracking.tracking import StudyTracker
from orchestrator.store.trial_rows import trials_row
from orchestrator.studies.study import load_study
from results_contract.experiments import default_store_uri

QUICKSTART = Path(__file__).parents[1] / "studies" / "quickstart.yaml"
LG_STUDY = Path(sys.executable).parent / "lg-study"
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
STARTUP_S = 120
STARTED = datetime(2025, 1, 2, 3, 4, 5, tzinfo=timezone.utc)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def as_from_a_terminal():
    """Ctrl-C's signal as a terminal's shell gives it to the processes started within: a
    pytest worker may have left SIGINT ignored or blocked (both survive exec, and the
    CLI then never sees it). A Python handler is reset to the default by exec."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    blocked = signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        signal.signal(signal.SIGINT, previous)


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> tuple[Path, str, dict[str, dict[str, str]]]:
    """Three finished runs of the quickstart study: run name -> tags."""
    results = tmp_path_factory.mktemp("results")
    study = load_study(QUICKSTART)
    tracker = StudyTracker(default_store_uri(results), study.name)
    runs = {}
    for config in study.trials[:3]:
        row = trials_row(study.name, config, "done", "cpu", STARTED, group_label=study.group_label(config))
        trial_id, tags, params = describe(row)
        run_id = tracker.run_for_trial(trial_id, tags, params)
        tracker.log_metrics(run_id, {"loss": 0.5, "acc/digits_004": 0.25}, step=100)
        tracker.finish(run_id, "FINISHED", {"summary/ood_accuracy_mean": 0.1}, {})
        runs[tags["mlflow.runName"]] = tags
    return results, study.name, runs


@pytest.fixture(scope="module")
def ui(store):
    """`lg-study ui --study quickstart` as a user starts it; stopped like Ctrl-C."""
    results, name, _ = store
    with as_from_a_terminal():
        process = subprocess.Popen(
            [str(LG_STUDY), "ui", "--study", name, "--port", str(free_port()),
             "--results", str(results)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        )
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in process.stdout],
                     daemon=True).start()
    printed, deadline = [], time.monotonic() + STARTUP_S
    while not any(line.startswith("experiment ") for line in printed):
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            pytest.fail(f"lg-study ui did not start: {printed} {process.stderr.read()}")
        try:
            printed.append(lines.get(timeout=0.5))
        except queue.Empty:
            pass
    base = re.search(r"MLflow UI: (\S+)", "".join(printed)).group(1)
    experiment = re.search(r"experiment \S+: (\S+)", "".join(printed)).group(1)
    yield base, experiment
    process.send_signal(signal.SIGINT)  # what Ctrl-C sends; the CLI stops its server
    try:
        # the CLI's own bound is two waits of 15 s (SIGTERM, then SIGKILL): under load it
        # may use both, and the CLI killed before it is done leaves the server behind
        process.wait(60)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        pytest.fail(f"lg-study ui did not stop within 60 s of Ctrl-C: {process.stderr.read()[-2000:]}")
    server = re.search(r"server pid (\d+)", process.stderr.read())
    assert server, "the CLI says which server it started"
    # a zombie counts as gone: a worker orphaned as the server ends waits for its adopter
    # to reap it, in a container maybe never, and holds nothing
    assert not _live_members(int(server.group(1))), "the server and its workers are gone"


def test_a_zombie_is_not_a_live_member_of_its_group() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    assert _live_members(child.pid) == [child.pid]
    os.kill(child.pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while _live_members(child.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    os.killpg(child.pid, 0)  # unreaped: still in the process table, as a zombie
    assert _live_members(child.pid) == []
    child.wait()


def post(url: str, body: dict) -> dict:
    request = urllib.request.Request(url, json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as reply:
        return json.load(reply)


def test_ui_prints_the_address_and_the_experiment_url(ui) -> None:
    base, experiment = ui
    assert base.startswith("http://127.0.0.1:")
    assert re.fullmatch(re.escape(base) + r"/#/experiments/\d+/runs\?workflowType=machine_learning", experiment)


def test_rest_api_serves_the_runs_with_names_and_tags(ui, store) -> None:
    base, experiment = ui
    _, name, runs = store
    experiment_id = re.search(r"experiments/(\d+)", experiment).group(1)
    found = post(f"{base}/api/2.0/mlflow/runs/search", {"experiment_ids": [experiment_id]})
    got = {r["info"]["run_name"]: {t["key"]: t["value"] for t in r["data"]["tags"]}
           for r in found["runs"]}
    assert set(got) == set(runs)
    assert all(re.fullmatch(r"\w+-tiny-\w+-w\d+-d\d+", run) for run in got)
    for run, tags in got.items():
        for key in ("study", "group", "group_label", "trial_id", "weight_seed", "data_seed",
                    "pe", "size", "distribution"):
            assert tags[key] == runs[run][key], key
        assert tags["study"] == name and tags["status"] == "done"


def test_browser_shows_the_experiment_and_its_runs(ui, store, tmp_path: Path) -> None:
    browser = next((path for name in BROWSERS if (path := shutil.which(name))), None)
    if browser is None:
        pytest.skip("no Chromium or Chrome on PATH (e.g. `apt-get install chromium`); "
                    "the UI's REST API is checked by the test above")
    _, experiment = ui
    _, name, runs = store
    command = [
        browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
        "--no-first-run", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", f"--user-data-dir={tmp_path / 'profile'}",
        "--virtual-time-budget=30000", "--dump-dom", experiment,
    ]
    text = ""
    for _ in range(3):  # the React app fetches the runs after it loads; retry if early
        dom = subprocess.run(command, capture_output=True, text=True, timeout=90,
                             check=False).stdout
        text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", re.sub(
            r"<(script|style)\b.*?</\1>", " ", dom, flags=re.DOTALL)))
        if all(run in text for run in runs):
            break
    assert name in text, "the experiment's name is on the page"
    missing = [run for run in runs if run not in text]
    assert not missing, f"runs not shown: {missing}; page text: {text[:2000]}"


def test_without_a_store_ui_is_bad_input(tmp_path: Path) -> None:
    outcome = CliRunner().invoke(app, ["ui", "--results", str(tmp_path)])
    assert outcome.exit_code == 2 and "no MLflow store" in outcome.output


def test_a_port_in_use_is_bad_input(store) -> None:
    results, _, _ = store
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        outcome = CliRunner().invoke(app, ["ui", "--results", str(results), "--port", str(port)])
    assert outcome.exit_code == 2 and f"port {port}" in outcome.output
