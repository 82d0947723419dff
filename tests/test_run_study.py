"""A real local Ray run of a 2-trial study: four Parquet tables, one MLflow run per
trial, SQL over the results, and a re-run that runs nothing again."""

import json
import shutil
from pathlib import Path

import mlflow
import pytest
from typer.testing import CliRunner

from analysis.query import open_results, run_query
from orchestrator.cli import app
from orchestrator.mlflow_tracking.group_runs import TRIAL_RUNS
from orchestrator.studies.study import load_study
from results_contract import groups

STUDY = Path(__file__).parent / "study_files" / "good_two_trials.yaml"
runner = CliRunner()


@pytest.fixture(scope="module")
def finished_study(tmp_path_factory):
    results = tmp_path_factory.mktemp("run") / "results"
    outcome = runner.invoke(app, ["run", str(STUDY), "--results", str(results)])
    yield results, outcome


def test_run_writes_the_four_tables(finished_study):
    results, outcome = finished_study
    assert outcome.exit_code == 0, outcome.output
    study = load_study(STUDY)
    with open_results(results, "two_trials") as con:
        trials = run_query(con, "select trial_id, status, weight_seed, n_params, pe from trials order by weight_seed").to_pylist()
        counts = {t: run_query(con, f"select count(*) as n from {t}").to_pylist()[0]["n"]
                  for t in ("train", "eval", "samples")}
        final_eval = run_query(con, "select digits, n, in_distribution from eval where step = 30 order by trial_id, digits").to_pylist()
    assert [t["trial_id"] for t in trials] == [c.trial_id for c in study.trials]
    assert {t["status"] for t in trials} == {"done"} and [t["weight_seed"] for t in trials] == [0, 1]
    assert all(t["n_params"] > 0 and t["pe"] == "alibi" for t in trials)
    assert counts == {"train": 2 * 3, "eval": 2 * 2 * 2, "samples": 2 * 2 * 8}
    assert final_eval[:2] == [
        {"digits": 2, "n": 8, "in_distribution": True},
        {"digits": 3, "n": 8, "in_distribution": False},
    ]


def test_mlflow_holds_one_finished_run_per_trial(finished_study):
    results, _ = finished_study
    client = mlflow.MlflowClient(f"sqlite:///{results.resolve()}/mlflow.db")
    experiment = client.get_experiment_by_name("two_trials")
    runs = client.search_runs([experiment.experiment_id], filter_string=TRIAL_RUNS)
    study = load_study(STUDY)
    assert len(runs) == 2
    assert {r.info.status for r in runs} == {"FINISHED"}
    assert {r.data.tags["trial_id"] for r in runs} == {c.trial_id for c in study.trials}
    # the group columns of `trials` (one definition, results_contract.groups) are the runs' tags
    with open_results(results, "two_trials") as con:
        columns = {r["trial_id"]: (r["group_id"], r["group_label"]) for r in
                   run_query(con, "select trial_id, group_id, group_label from trials").to_pylist()}
    assert columns == {c.trial_id: (groups.group_id(c), study.group_label(c)) for c in study.trials}
    assert {r.data.tags["trial_id"]: (r.data.tags["group"], r.data.tags["group_label"]) for r in runs} == columns
    run = runs[0]
    assert run.data.params["model.pe"] == "alibi" and run.data.params["train.steps"] == "30"
    assert {"loss", "acc/digits_002", "acc/digits_003", "summary/ood_accuracy_mean"} <= set(run.data.metrics)
    assert len(client.get_metric_history(run.info.run_id, "loss")) == 3
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"config.yaml", "accuracy_vs_length.png"} <= artifacts


def test_query_command_answers_from_parquet(finished_study):
    results, _ = finished_study
    outcome = runner.invoke(app, [
        "query", "select t.pe, e.digits, count(*) as n from eval e join trials t using (trial_id) group by all order by all",
        "--study", "two_trials", "--results", str(results), "--format", "json",
    ])
    assert outcome.exit_code == 0, outcome.output
    assert json.loads(outcome.output) == [{"pe": "alibi", "digits": 2, "n": 4}, {"pe": "alibi", "digits": 3, "n": 4}]
    bad = runner.invoke(app, ["query", "select nope from trials", "--results", str(results)])
    assert bad.exit_code == 2 and "nope" in bad.output


def test_rerun_runs_only_unfinished_trials(finished_study):
    results, _ = finished_study
    again = runner.invoke(app, ["run", str(STUDY), "--results", str(results)])
    assert again.exit_code == 0 and "2 of 2 trials had already finished" in " ".join(again.output.split())

    # forget one trial's outcome: only that trial runs, re-attached to its MLflow run
    first = load_study(STUDY).trials[0].trial_id
    shutil.rmtree(results / "two_trials" / "trials" / f"trial_id={first}")
    resumed = runner.invoke(app, ["run", str(STUDY), "--results", str(results)])
    assert resumed.exit_code == 0, resumed.output
    assert "1 of 2 trials had already finished" in " ".join(resumed.output.split())
    client = mlflow.MlflowClient(f"sqlite:///{results.resolve()}/mlflow.db")
    runs = client.search_runs([client.get_experiment_by_name("two_trials").experiment_id],
                              filter_string=TRIAL_RUNS)
    assert len(runs) == 2 and {r.info.status for r in runs} == {"FINISHED"}
    with open_results(results, "two_trials") as con:
        rows = run_query(con, "select count(*) as n from train").to_pylist()[0]["n"]
    assert rows == 6  # the re-run trial replaced its rows


def test_status_command(finished_study):
    results, _ = finished_study
    outcome = runner.invoke(app, ["status", str(STUDY), "--results", str(results)])
    assert outcome.exit_code == 0, outcome.output
    assert "done 2" in outcome.output and "2 of 2 finished" in outcome.output
