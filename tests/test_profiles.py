"""Profiles kept apart and content-addressed trials (issue 13), on a real local Ray.

A profile's trials live in their own results root (RESULTS/_profiles/PROFILE/STUDY)
and MLflow experiment (STUDY/PROFILE), so `run --profile smoke` after `run` leaves the
default run's files and runs as they were. A trial finished under the same results
folder, in another study or profile, is reused rather than trained: its rows are
copied into the study's folder and its MLflow run is made from them, tagged
`reused_from`; `--no-reuse` trains it again."""

from __future__ import annotations

from pathlib import Path

import mlflow
import pytest
from typer.testing import CliRunner

from analysis.query import open_results, run_query
from orchestrator.cli import app
from orchestrator.mlflow_tracking.group_runs import TRIAL_RUNS
from orchestrator.studies.study import load_study
from results_contract.layout import profile_root

runner = CliRunner()
STUDY = """\
name: {name}
base:
  task: {{name: successor, train_digits: [1, 2]}}
  model: {{arch: decoder, size: tiny, pe: alibi}}
  train: {{steps: 6, batch_size: 8, lr: 3.0e-3, warmup: 2, log_every: 3}}
  eval: {{digits: [2, 3], samples: 4, every: 3}}
resources: {{cpus_per_trial: 1}}
profiles:
  smoke: {{train.steps: 3}}
"""


def _words(text: str) -> str:
    return " ".join(text.split())


def _snapshot(results: Path, client: mlflow.MlflowClient, experiment: str) -> tuple[dict, list]:
    """Every file of the study's default folder (bytes) and its experiment's runs."""
    files = {p.relative_to(results): p.read_bytes() for p in (results / "apart").rglob("*.parquet")}
    found = client.get_experiment_by_name(experiment)
    runs = client.search_runs([found.experiment_id])
    return files, sorted((r.info.run_id, r.info.status, r.info.end_time, sorted(r.data.metrics.items()),
                          sorted(r.data.tags.items())) for r in runs)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("profiles")
    results = folder / "results"
    first, second = folder / "apart.yaml", folder / "elsewhere.yaml"
    first.write_text(STUDY.format(name="apart"))
    second.write_text(STUDY.format(name="elsewhere"))
    client = mlflow.MlflowClient(f"sqlite:///{results.resolve()}/mlflow.db")

    def run(*args: str):
        return runner.invoke(app, ["run", *args, "--results", str(results)])

    outcomes = {"default": run(str(first))}
    before = _snapshot(results, client, "apart")
    outcomes["smoke"] = run(str(first), "--profile", "smoke")
    after = _snapshot(results, client, "apart")
    outcomes["reused"] = run(str(second))
    yield {"results": results, "client": client, "first": first, "second": second,
           "outcomes": outcomes, "before": before, "after": after, "run": run}


def test_a_profile_run_leaves_the_default_run_untouched(runs) -> None:
    outcomes, results = runs["outcomes"], runs["results"]
    assert outcomes["default"].exit_code == 0, outcomes["default"].output
    assert outcomes["smoke"].exit_code == 0, outcomes["smoke"].output
    assert "ran 1 trials" in outcomes["smoke"].output  # the profile's trial is its own
    assert runs["before"] == runs["after"]  # the default run's files and MLflow runs
    smoke_root = profile_root(results, "smoke")
    with open_results(smoke_root, "apart") as con:
        assert run_query(con, "select max(step) as s from train").to_pylist() == [{"s": 3}]
    with open_results(results, "apart") as con:
        assert run_query(con, "select max(step) as s from train").to_pylist() == [{"s": 6}]
    client = runs["client"]
    smoke = client.search_runs([client.get_experiment_by_name("apart/smoke").experiment_id],
                               filter_string=TRIAL_RUNS)
    assert len(smoke) == 1 and smoke[0].info.status == "FINISHED"
    assert smoke[0].data.tags["trial_id"] == load_study(runs["first"], "smoke").trials[0].trial_id


def test_status_query_and_report_take_the_profile(runs) -> None:
    results, first = str(runs["results"]), str(runs["first"])
    for args in ([first], [first, "--profile", "smoke"], ["apart", "--profile", "smoke"]):
        status = runner.invoke(app, ["status", *args, "--results", results])
        assert status.exit_code == 0, status.output
        progress = _words(status.output).split("finished")[-1].split("exact-match")[0]
        assert "done 1" in status.output and "-" not in progress and "not run" not in status.output
    assert "1 of 1 finished, 0 not started" in runner.invoke(
        app, ["status", first, "--profile", "smoke", "--results", results]).output
    steps = runner.invoke(app, ["query", "select max(step) as s from train", "--study", "apart",
                                "--profile", "smoke", "--format", "csv", "--results", results])
    assert steps.exit_code == 0 and steps.output.split() == ["s", "3"], steps.output
    unknown = runner.invoke(app, ["status", "apart", "--profile", "nope", "--results", results])
    assert unknown.exit_code == 2
    report = runner.invoke(app, ["report", "apart", "--profile", "smoke", "--results", results])
    assert report.exit_code == 0, report.output
    assert Path(report.output.split()[-1]).parent == profile_root(runs["results"], "smoke") / "apart" / "report"


def test_a_study_whose_trials_finished_elsewhere_trains_nothing(runs) -> None:
    outcome, results, client = runs["outcomes"]["reused"], runs["results"], runs["client"]
    assert outcome.exit_code == 0, outcome.output
    trial_id = load_study(runs["second"]).trials[0].trial_id
    assert f"trial {trial_id} reused: finished in apart" in _words(outcome.output)
    assert "1 of 1 trials were reused, not trained" in _words(outcome.output)
    assert "ran " not in outcome.output and not (results / "elsewhere" / "_tune").exists()
    with open_results(results, "elsewhere") as con:
        rows = run_query(con, "select study, status, reused_from from trials").to_pylist()
        steps = run_query(con, "select count(*) as n from train").to_pylist()
    assert rows == [{"study": "elsewhere", "status": "done", "reused_from": "apart"}]
    assert steps == [{"n": 2}]  # steps 3 and 6, as the trial logged them in `apart`
    reused = client.search_runs([client.get_experiment_by_name("elsewhere").experiment_id],
                                filter_string=TRIAL_RUNS)
    original = client.search_runs([client.get_experiment_by_name("apart").experiment_id],
                                  filter_string=TRIAL_RUNS)
    assert len(reused) == 1 and reused[0].info.status == "FINISHED"
    assert reused[0].data.tags["reused_from"] == "apart" and reused[0].data.tags["trial_id"] == trial_id
    assert reused[0].data.metrics == original[0].data.metrics


@pytest.mark.slow
@pytest.mark.long
def test_no_reuse_trains_again(runs) -> None:
    outcome = runs["run"](str(runs["second"]), "--profile", "smoke", "--no-reuse")
    assert outcome.exit_code == 0, outcome.output
    assert "reused" not in outcome.output and "ran 1 trials" in outcome.output
    with open_results(profile_root(runs["results"], "smoke"), "elsewhere") as con:
        rows = run_query(con, "select status from trials").to_pylist()
    assert rows == [{"status": "done"}]
