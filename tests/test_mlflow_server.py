"""A real `mlflow server` (SQLite backend) on 127.0.0.1 under a real study, as the
README's cluster recipe uses one: undisturbed; SIGKILLed once the first trial is done
(and left dead: `status` shows the lag, `lg-study sync` catches up once it is back);
SIGKILLed and started again while trials still train; and behind a proxy that delays
every request by 1 s. Training never waits for MLflow: the runs end as the rows say,
with every metric point once."""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from mlflow_servers import DelayProxy, MlflowServer
from ray_studies import LG_STUDY, study_command, tiny_study, trial_rows, watch

from orchestrator.mlflow_tracking.group_runs import TRIAL_RUNS
from orchestrator.mlflow_tracking.mlflow_store import bound_http_calls

pytestmark = [pytest.mark.slow, pytest.mark.long]  # four `lg-study run`s, a sync, four servers: about 3.5 minutes here

STUDY = tiny_study("srv", 300, {"seeds.weight": list(range(6))}, "{cpus_per_trial: 1}")
#: the server killed and started again must be back while trials still train: on an idle
#: machine the six trials after the first took less time than the server once took to
#: start (10 s and more with MLflow's job runners); ten trials leave about 30 s of training
#: after the first is done, six times what the server takes now
RESTARTED_STUDY = tiny_study("srv", 300, {"seeds.weight": list(range(10))}, "{cpus_per_trial: 1}")
#: the most a disturbed run may take, as a multiple of the undisturbed one's wall time
SLOWER_AT_MOST = 1.5


ENV = {**{k: v for k, v in os.environ.items() if not k.startswith(("RAY_", "PYTEST"))}, "COLUMNS": "300"}


def run(command: list[str], uri: str) -> subprocess.Popen:
    return subprocess.Popen([*command, "--tracking-uri", uri], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=ENV)


def finish(process: subprocess.Popen, started: float) -> dict:
    out, err = process.communicate(timeout=600)
    trained = re.search(r"ran \d+ trials in (\d+) s", err)
    return {"rc": process.returncode, "out": out, "err": err, "wall": time.perf_counter() - started,
            "said": " ".join(err.split()), "trained": float(trained[1]) if trained else None}


def first_done(rows: dict, running: dict) -> bool:
    return any(row["status"] == "done" for row in rows.values())


def first_training(rows: dict, running: dict) -> bool:
    """A trial mid-training: most of the study (5 trials and more) is still to train.
    Killed after the first trial was done instead, the server was once gone only after
    the rest had been logged (an idle machine, 6 trials in 20 s), and nothing warned."""
    return bool(running)


def runs_match_rows(url: str, results: Path) -> None:
    """One FINISHED run per trial, each metric at exactly its rows' steps, once each,
    nested under the one parent of the study's one group, which shows every trial."""
    from mlflow import MlflowClient

    client = MlflowClient(url)
    experiment = client.get_experiment_by_name("srv").experiment_id
    runs = client.search_runs([experiment], filter_string=TRIAL_RUNS)
    assert sorted(r.data.tags["trial_id"] for r in runs) == sorted(trial_rows(results, "srv"))
    assert {r.info.status for r in runs} == {"FINISHED"}
    [parent] = client.search_runs([experiment], filter_string="tags.`lg_study.kind` = 'group'")
    assert {r.data.tags["mlflow.parentRunId"] for r in runs} == {parent.info.run_id}
    assert parent.data.tags["finished_trials"] == str(len(runs))
    for found in runs:
        trial_id = found.data.tags["trial_id"]
        steps = pq.read_table(results / "srv" / "train" / f"trial_id={trial_id}" / "part-0.parquet",
                              partitioning=None)["step"].to_pylist()
        assert [m.step for m in client.get_metric_history(found.info.run_id, "loss")] == sorted(steps)
        evals = [m.step for m in client.get_metric_history(found.info.run_id, "acc/digits_003")]
        assert evals == list(range(20, 301, 20))


@pytest.fixture(scope="module")
def studies(tmp_path_factory):
    """Each way the server goes, the `lg-study run` it gave (and the commands after);
    the servers (up again where killed) answer until the module's tests are done."""
    bound_http_calls()  # this process's own MLflow calls: a failed one fails fast
    tmp = tmp_path_factory.mktemp("mlflow_server")
    seen: dict[str, dict] = {}
    servers = []
    try:
        for case in ("undisturbed", "killed", "restarted", "slow"):
            (tmp / case).mkdir()
            _, results, command = study_command(tmp / case, RESTARTED_STUDY if case == "restarted" else STUDY)
            servers.append(MlflowServer(tmp / case / "server").start())
            seen[case] = {**_run_case(case, command, servers[-1], results), "results": results,
                          "url": servers[-1].url}
        yield seen
    finally:
        for server in servers:
            server.kill()


def _run_case(case: str, command: list[str], server: MlflowServer, results: Path) -> dict:
    if case == "slow":
        with DelayProxy(server.url, 1.0) as proxy:
            return finish(run(command, proxy.url), time.perf_counter())
    started = time.perf_counter()
    process = run(command, server.url)
    if case == "undisturbed":
        return finish(process, started)
    # killed while its first trials train, so that the rest of the study still reports to it;
    # restarted once the first trial is done, the server's start-up taking longer than a trial
    watch(process, results, "srv", first_done if case == "restarted" else first_training)
    server.kill()
    if case == "restarted":
        server.start()
        return finish(process, started)
    seen = finish(process, started)
    status = subprocess.run([LG_STUDY, "status", command[2], "--results", str(results)], check=False,
                            capture_output=True, text=True, env=ENV)
    server.start()
    sync = subprocess.run([LG_STUDY, "sync", command[2], "--results", str(results), "--tracking-uri", server.url],
                          check=False, capture_output=True, text=True, env=ENV)
    return {**seen, "status": " ".join(status.stdout.split()), "sync": sync}


def test_a_study_runs_undisturbed_through_the_server(studies) -> None:
    seen = studies["undisturbed"]
    assert seen["rc"] == 0, seen["err"]
    assert "MLflow at" not in seen["err"] and "warning" not in seen["err"]
    runs_match_rows(seen["url"], seen["results"])


def test_a_server_killed_mid_study_neither_stops_nor_slows_it(studies) -> None:
    seen, undisturbed = studies["killed"], studies["undisturbed"]
    assert seen["rc"] == 0, seen["err"]
    assert "Traceback" not in seen["err"] and "Max retries" not in seen["err"]
    assert seen["wall"] <= SLOWER_AT_MOST * undisturbed["wall"], (seen["wall"], undisturbed["wall"])
    assert {row["status"] for row in trial_rows(seen["results"], "srv").values()} == {"done"}
    said = seen["said"]
    assert said.count(f"warning: MLflow at {seen['url']} is unreachable since ") == 1
    assert "(connection refused). Training goes on: every trial's rows are safe in " in said
    lagging = re.search(r"MLflow at \S+ was unreachable since [^:]+:\d\d:\d\d UTC \(connection refused\): the runs "
                        r"of (\d+) trials lag their rows, which are safe in ", said)
    assert lagging and 1 <= int(lagging[1]) <= 6, said  # a warning line, after the table
    assert "srv: exact-match accuracy by test length" in seen["out"]
    assert f"the runs of {lagging[1]} trials lag their rows" in seen["status"], seen["status"]


def test_lg_study_sync_catches_the_runs_up_once_the_server_is_back(studies) -> None:
    seen = studies["killed"]
    sync = seen["sync"]
    assert sync.returncode == 0, sync.stderr
    assert "View run" not in sync.stdout  # MLflow's own lines stay off the terminal
    assert re.search(r"\d+ trials' runs brought up to date with their rows", " ".join(sync.stdout.split()))
    assert not (seen["results"] / "srv" / "_mlflow_lag.json").exists()
    runs_match_rows(seen["url"], seen["results"])


def test_a_server_back_during_the_run_is_caught_up_before_it_ends(studies) -> None:
    seen = studies["restarted"]
    assert seen["rc"] == 0, seen["err"]
    said = seen["said"]
    assert said.count("is unreachable since") == 1 and "answers again: the runs of " in said, said
    assert "lag their rows" not in said
    runs_match_rows(seen["url"], seen["results"])


def test_a_slow_server_does_not_slow_training_and_catches_up_once(studies) -> None:
    seen, undisturbed = studies["slow"], studies["undisturbed"]
    assert seen["rc"] == 0, seen["err"]
    assert seen["trained"] <= SLOWER_AT_MOST * undisturbed["trained"], (seen["trained"], undisturbed["trained"])
    assert "warning" not in seen["err"]
    runs_match_rows(seen["url"], seen["results"])
