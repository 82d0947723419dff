"""Where each trial ran and under which science: a real local Ray run of a study with
perturbation replicates; its rows and MLflow runs name the environment and the code;
status and the report name a group that ran in two environments; a study whose
finished trials are of another science version is refused, then retrained with
--retrain-stale without losing the old rows or runs; reuse never crosses versions."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import mlflow
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from analysis.query import open_results, run_query, run_sql_file
from analysis.report import sql_path
from lengthgen.science import SCIENCE_VERSION
from orchestrator.cli import app
from orchestrator.mlflow_tracking.group_runs import TRIAL_RUNS
from orchestrator.store.provenance import PROVENANCE_COLUMNS, cpu_model, environment_label
from orchestrator.store.results_store import read_trial_row, write_trial_table
from orchestrator.store.reuse import finished_elsewhere
from orchestrator.studies.study import load_study
from results_contract.layout import table_path

STUDY_TEXT = """\
name: replicas
source: "tests/test_provenance.py: one weight seed, unperturbed and perturbed"
base:
  task: {name: successor, train_digits: [1, 2]}
  model: {arch: decoder, size: tiny, pe: alibi, positions: plain}
  train: {steps: 12, batch_size: 16, lr: 3.0e-3, warmup: 2, log_every: 6}
  eval: {digits: [2, 3], samples: 8}
axes:
  seeds.perturb: [0, 1]
resources: {cpus_per_trial: 1}
"""
runner = CliRunner()


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    folder = tmp_path_factory.mktemp("provenance")
    study_file, results = folder / "replicas.yaml", folder / "results"
    study_file.write_text(STUDY_TEXT)
    outcome = runner.invoke(app, ["run", str(study_file), "--results", str(results)])
    assert outcome.exit_code == 0, outcome.output
    yield study_file, results, outcome


def trials_rows(results: Path) -> list[dict]:
    with open_results(results, "replicas") as con:
        return run_query(con, "select * from trials order by perturb_seed").to_pylist()


def runs(results: Path) -> list:
    client = mlflow.MlflowClient(f"sqlite:///{results.resolve()}/mlflow.db")
    return client.search_runs([client.get_experiment_by_name("replicas").experiment_id],
                              filter_string=TRIAL_RUNS)


def test_every_row_names_its_environment_and_code(ran):
    _, results, outcome = ran
    rows = trials_rows(results)
    assert [r["perturb_seed"] for r in rows] == [0, 1]
    for row in rows:
        assert set(PROVENANCE_COLUMNS) <= set(row)
        assert row["science_version"] == SCIENCE_VERSION
        assert row["torch_threads"] == 1 and row["deterministic"] is False and row["precision"] == "fp32" and row["device_type"] == "cpu"
        assert cpu_model() in row["environment"] and row["torch_version"] in row["environment"]
        assert row["environment"] == environment_label(row)
        assert row["host"] and row["python_version"] and row["lgstudy_version"]
        assert row["git_commit"] is None or len(row["git_commit"]) == 40
    # a perturbation replicate is a seed: one group, and the table shows its seed
    assert len({r["group_id"] for r in rows}) == 1
    assert "p0" in outcome.output and "p1" in outcome.output


def test_mlflow_runs_carry_the_same_provenance(ran):
    _, results, _ = ran
    rows = {r["trial_id"]: r for r in trials_rows(results)}
    for run in runs(results):
        row = rows[run.data.tags["trial_id"]]
        assert run.data.tags["environment"] == row["environment"]
        assert run.data.tags["science_version"] == str(SCIENCE_VERSION)
        assert run.data.tags["perturb_seed"] == str(row["perturb_seed"])
    # one group: its short label is its base label, then the seeds
    assert {run.info.run_name for run in runs(results)} == {"successor/alibi/tiny/uniform_length · w0 d0",
                                                             "successor/alibi/tiny/uniform_length · w0 d0 p1"}


def test_a_group_that_ran_in_two_environments_is_named(ran):
    study_file, results, _ = ran
    with open_results(results, "replicas") as con:
        assert run_sql_file(con, sql_path("environments")).num_rows == 0
    moved = trials_rows(results)[1]
    write_trial_table(results, "replicas", "trials", moved["trial_id"],
                      [{**moved, "environment": "cpu Other CPU AVX2, 1 thread; torch 2.13.0+cpu"}])
    with open_results(results, "replicas") as con:
        mixed = run_sql_file(con, sql_path("environments")).to_pylist()
    assert [(r["environment"].split(";")[0], r["trials"]) for r in mixed] == sorted(
        [(moved["environment"].split(";")[0], 1), ("cpu Other CPU AVX2, 1 thread", 1)])
    status = runner.invoke(app, ["status", str(study_file), "--results", str(results)])
    assert status.exit_code == 0 and "more than one environment" in " ".join(status.output.split())
    write_trial_table(results, "replicas", "trials", moved["trial_id"], [moved])  # as it was


def test_another_science_version_is_refused_then_retrained_with_nothing_lost(ran):
    study_file, results, _ = ran
    old = trials_rows(results)[0]
    trial_id = old["trial_id"]
    write_trial_table(results, "replicas", "trials", trial_id, [{**old, "science_version": None}])
    refused = runner.invoke(app, ["run", str(study_file), "--results", str(results)])
    assert refused.exit_code == 2
    words = " ".join(refused.output.split())
    assert "science version none" in words and trial_id in words and "--retrain-stale" in words
    assert read_trial_row(results, "replicas", trial_id)["science_version"] is None  # untouched

    retrained = runner.invoke(app, ["run", str(study_file), "--results", str(results), "--retrain-stale"])
    assert retrained.exit_code == 0, retrained.output
    assert f"trial {trial_id}: trained under science version none" in " ".join(retrained.output.split())
    assert read_trial_row(results, "replicas", trial_id)["science_version"] == SCIENCE_VERSION
    kept = results / "replicas" / "_superseded" / "science-none"
    assert pq.read_table(kept / "trials" / f"trial_id={trial_id}" / "part-0.parquet").num_rows == 1
    assert (kept / "eval" / f"trial_id={trial_id}" / "part-0.parquet").is_file()
    tags = sorted(run.data.tags["trial_id"] for run in runs(results))
    assert tags == sorted([trial_id, f"{trial_id}@science-none", trials_rows(results)[1]["trial_id"]])
    with open_results(results, "replicas") as con:  # the views do not see the old rows
        assert run_query(con, "select count(*) as n from trials").to_pylist() == [{"n": 2}]


def test_reuse_takes_only_trials_of_this_science_version(tmp_path):
    study = load_study(Path(__file__).parent / "study_files" / "good_two_trials.yaml")
    config = study.trials[0]
    row = {"trial_id": config.trial_id, "status": "done", "config_json": config.canonical_json(),
           "device": "cpu", "started_at": datetime.now(timezone.utc)}
    write_trial_table(tmp_path, "elsewhere", "trials", config.trial_id, [{**row, "science_version": None}])
    assert finished_elsewhere(tmp_path, "here", [config]) == {}
    write_trial_table(tmp_path, "elsewhere", "trials", config.trial_id, [{**row, "science_version": SCIENCE_VERSION}])
    assert set(finished_elsewhere(tmp_path, "here", [config])) == {config.trial_id}
    assert table_path(tmp_path, "elsewhere", "trials", config.trial_id).is_file()


def test_a_science_change_sends_back_only_the_configs_it_touches():
    """Version 2 moved parity under the fixed-length layout only: a version-1 Successor
    trial still stands, a version-1 parity fixed-length trial does not, a trial with no
    version (written before versions) never does."""
    from lengthgen.config import FormatConfig, ModelConfig, TaskConfig, TrialConfig
    from lengthgen.science import CHANGES, changes_since
    from orchestrator.store.science_versions import still_valid

    successor = TrialConfig(task=TaskConfig(name="successor"))
    parity = TrialConfig(task=TaskConfig(name="parity", train_digits=(1, 4)),
                         format=FormatConfig(fixed_length=True, reverse=False),
                         model=ModelConfig(arch="encoder"))
    assert [c.version for c in CHANGES] == list(range(1, SCIENCE_VERSION + 1))
    assert still_valid({"science_version": 1}, successor)
    assert [c.version for c in changes_since(1, parity)] == [2]
    assert not still_valid({"science_version": 1}, parity)
    assert still_valid({"science_version": SCIENCE_VERSION}, parity)
    assert not still_valid({"science_version": None}, successor) and not still_valid({}, successor)
