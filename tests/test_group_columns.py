"""Configuration groups as columns of `trials` (issue 13): one Python definition
(results_contract/groups.py) gives the row's group_id and group_label and the MLflow tags
`group` and `group_label`; views.sql selects the columns; rows written before the
columns existed are refused until `lg-study migrate` (or a run) adds the columns."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from datetime import datetime, timezone
from pathlib import Path

import mlflow
import pyarrow.parquet as pq
import pytest
import ray
from typer.testing import CliRunner

from analysis.query import MigrationNeeded, open_results, run_query
from lengthgen.config import EvalConfig, SeedConfig, TaskConfig, TrainConfig, TrialConfig
from orchestrator.cli import app
from orchestrator.mlflow_tracking.group_runs import TRIAL_RUNS
from orchestrator.mlflow_tracking.mlflow_sync import describe
from orchestrator.mlflow_tracking.tracking import StudyTracker
from orchestrator.running.dispatch import run_study
from orchestrator.running.run_context import RunContext
from orchestrator.running.tune_runner import trial_params
from orchestrator.store.results_store import write_trial_table
from orchestrator.store.trial_rows import add_group_columns, trials_row
from orchestrator.studies.study import load_study
from results_contract import groups
from results_contract.experiments import default_store_uri
from results_contract.layout import table_path

STARTED = datetime(2025, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
STUDY = """\
name: grouped
base:
  task: {name: successor, train_digits: [1, 2]}
  model: {arch: decoder, size: tiny, pe: alibi}
  train: {steps: 10, batch_size: 8, lr: 3.0e-3, warmup: 2, log_every: 5}
  eval: {digits: [2, 3], samples: 4}
axes:
  train.lr: [3.0e-3, 1.0e-3]
  seeds.weight: [0, 1]
resources: {cpus_per_trial: 1}
"""
runner = CliRunner()


def with_seeds(config: TrialConfig, weight: int, data: int, eval_seed: int = 0) -> TrialConfig:
    return dataclasses.replace(config, seeds=SeedConfig(weight=weight, data=data, eval=eval_seed))


REFERENCE = TrialConfig(
    task=TaskConfig(name="successor", train_digits=(1, 3)),
    train=TrainConfig(steps=3000, lr=3e-3),
    eval=EvalConfig(digits=(1, 2, 3, 4, 6, 8), samples=200),
)


@pytest.fixture
def study_file(tmp_path: Path) -> Path:
    path = tmp_path / "grouped.yaml"
    path.write_text(STUDY)
    return path


# --- one definition -----------------------------------------------------------------------


@pytest.mark.parametrize("config", [TrialConfig(), REFERENCE, with_seeds(REFERENCE, 3, 7, 2)])
def test_group_id_is_the_trial_id_with_weight_and_data_seeds_at_their_defaults(config) -> None:
    """The group id hashes the trial identity less two seeds, so it inherits what the
    pinned trial ids guarantee: a field added at its default changes neither."""
    seedless = with_seeds(config, 0, 0, config.seeds.eval)
    assert groups.group_id(config) == seedless.trial_id
    assert groups.group_id(TrialConfig()) == "44136fa355b3"  # pinned with the trial ids


def test_group_id_ignores_the_weight_and_data_seeds_only() -> None:
    base = groups.group_id(REFERENCE)
    assert groups.group_id(with_seeds(REFERENCE, 5, 9)) == base
    assert groups.group_id(with_seeds(REFERENCE, 0, 0, eval_seed=1)) != base
    other_pe = dataclasses.replace(REFERENCE, model=dataclasses.replace(REFERENCE.model, pe="nope"))
    assert groups.group_id(other_pe) != base
    assert groups.run_name(with_seeds(REFERENCE, 0, 3).to_dict()) == "rope-tiny-successor-w0-d3"


def test_labels_name_what_tells_groups_sharing_a_base_label_apart(
    study_file: Path, tmp_path: Path
) -> None:
    study = load_study(study_file)
    labels = {config.trial_id: study.group_label(config) for config in study.trials}
    lr = {config.trial_id: config.train.lr for config in study.trials}
    assert {labels[t] for t in labels} == {
        "successor/alibi/tiny/uniform_length train.lr=0.003",
        "successor/alibi/tiny/uniform_length train.lr=0.001",
    }
    assert all(labels[t].endswith(f"train.lr={lr[t]}") for t in labels)
    # a study of one group: the base label alone; a pe axis is in the base label already
    single = tmp_path / "single.yaml"
    single.write_text(STUDY.replace("train.lr: [3.0e-3, 1.0e-3]", "model.pe: [alibi, nope]"))
    other = load_study(single)
    assert {other.group_label(c) for c in other.trials} == {
        "successor/alibi/tiny/uniform_length",
        "successor/nope/tiny/uniform_length",
    }


QUICKSTART_LABELS = {
    "successor/rope/tiny/uniform_length": "rope",
    "successor/nope/tiny/uniform_length model.attention_bias=windowed": "nope · windowed",
    "successor/learned/tiny/uniform_length model.attention_bias=none model.max_positions=32 "
    "model.positions=coupled": "learned · none",
    "successor/learned/tiny/uniform_length model.attention_bias=windowed model.max_positions=32 "
    "model.positions=coupled": "learned · windowed",
}


def test_short_labels_keep_only_the_settings_that_tell_the_groups_apart() -> None:
    """The quickstart's four groups: max_positions (a number, and the same partition as
    positions) goes first; pe cannot go (rope's label would be empty), positions can (pe says it)."""
    quickstart = load_study(Path(__file__).parent.parent / "studies" / "quickstart.yaml")
    assert {quickstart.group_label(c) for c in quickstart.trials} == set(QUICKSTART_LABELS)
    assert groups.short_labels(QUICKSTART_LABELS) == QUICKSTART_LABELS
    assert {quickstart.short_label(c) for c in quickstart.trials} == set(QUICKSTART_LABELS.values())
    # numbers are named (a bare 0.003 says nothing), text is not; one group: its base label
    assert groups.short_labels(["a/b/c/d train.lr=0.001 train.steps=10", "a/b/c/d train.lr=0.003 train.steps=10"]) == {
        "a/b/c/d train.lr=0.001 train.steps=10": "lr=0.001", "a/b/c/d train.lr=0.003 train.steps=10": "lr=0.003"}
    assert groups.short_labels(["a/b/c/d x.y=1"]) == {"a/b/c/d x.y=1": "a/b/c/d"}
    # two kept settings that end alike are named by their whole path
    both = ["t/p/s/d a.window=1 b.window=2", "t/p/s/d a.window=2 b.window=1", "t/p/s/d a.window=1 b.window=1"]
    assert set(groups.short_labels(both).values()) == {
        "a.window=1 · b.window=2", "a.window=2 · b.window=1", "a.window=1 · b.window=1"}
    # a label's settings read back from the label, values with spaces included
    assert groups.label_settings("t/p/s/d a.b=x y c.d=[1,2]") == {
        "task.name": "t", "model.pe": "p", "model.size": "s", "data.distribution": "d", "a.b": "x y", "c.d": "[1,2]"}


def test_runs_are_named_by_their_short_label_and_seeds(study_file: Path, tmp_path: Path) -> None:
    study = load_study(study_file)
    names = {trial_params(c, study, tmp_path)["run_name"] for c in study.trials}
    assert names == {f"lr={lr} · w{w} d0" for lr in (0.003, 0.001) for w in (0, 1)}
    perturbed = dataclasses.replace(REFERENCE, seeds=SeedConfig(weight=1, data=2, perturb=3))
    assert groups.run_name(perturbed.to_dict(), "rope") == "rope · w1 d2 p3"


def test_the_row_and_the_mlflow_tags_carry_the_same_group(study_file: Path, tmp_path: Path) -> None:
    study = load_study(study_file)
    for config in study.trials:
        params = trial_params(config, study, tmp_path)
        row = trials_row(
            study.name, config, "done", "cpu", STARTED, group_label=params["group_label"]
        )
        _, tags, _ = describe(row)
        assert (tags["group"], tags["group_label"]) == (row["group_id"], row["group_label"])
        assert row["group_id"] == groups.group_id(config)


# --- views.sql ----------------------------------------------------------------------------


def test_views_select_the_written_columns(study_file: Path, tmp_path: Path, write_finished_trial) -> None:
    study = load_study(study_file)
    for i, config in enumerate(study.trials):
        write_finished_trial(tmp_path, study, config, accuracy=i / 4)
    with open_results(tmp_path, study.name) as con:
        columns = run_query(con, "select trial_id, group_id, group_label from trials").to_pylist()
        viewed = run_query(
            con, "select trial_id, group_id, group_label, trials_in_group from groups"
        ).to_pylist()
        distinct = run_query(con, "select distinct group_id from groups").num_rows
    written = {c.trial_id: (groups.group_id(c), study.group_label(c)) for c in study.trials}
    assert {r["trial_id"]: (r["group_id"], r["group_label"]) for r in columns} == written
    assert {r["trial_id"]: (r["group_id"], r["group_label"]) for r in viewed} == written
    assert {r["trials_in_group"] for r in viewed} == {2} and distinct == 2


def test_a_group_shows_the_label_of_its_latest_trial(study_file: Path, tmp_path: Path, write_finished_trial) -> None:
    study = load_study(study_file)
    first, second = [c for c in study.trials if c.train.lr == 3e-3]
    write_finished_trial(tmp_path, study, first, 0.5)
    row = trials_row(
        study.name, second, "done", "cpu", STARTED.replace(year=2026), group_label="renamed"
    )
    write_trial_table(tmp_path, study.name, "trials", second.trial_id, [row])
    with open_results(tmp_path, study.name) as con:
        labels = run_query(con, "select distinct group_label from groups").to_pylist()
    assert labels == [{"group_label": "renamed"}]


def test_legacy_rows_are_refused_until_migrate_adds_their_columns(
    study_file: Path, tmp_path: Path, write_finished_trial
) -> None:
    """Rows without the columns (the previous version's) are refused with the command
    that upgrades them; `lg-study migrate` gives them the columns a new row would have
    (add_group_columns, which `lg-study run` calls under the study lock too), and
    nothing else changes."""
    study = load_study(study_file)
    for config in study.trials:
        write_finished_trial(tmp_path, study, config, 0.25, legacy=True)
    with pytest.raises(MigrationNeeded, match=r"4 trials rows of grouped .*run `lg-study migrate --results "):
        open_results(tmp_path, study.name)
    status = runner.invoke(app, ["status", study.name, "--results", str(tmp_path)])
    assert status.exit_code == 2 and "lg-study migrate" in " ".join(status.output.split())

    before = {
        c.trial_id: pq.read_table(
            table_path(tmp_path, study.name, "trials", c.trial_id), partitioning=None
        ).to_pylist()[0]
        for c in study.trials
    }
    migrated = runner.invoke(app, ["migrate", str(study_file), "--results", str(tmp_path)])
    assert migrated.exit_code == 0, migrated.output
    assert "4 trials rows" in migrated.output
    assert add_group_columns(tmp_path, study.name, study.group_label) == {}  # once
    expected = {
        c.trial_id: {"group_id": groups.group_id(c), "group_label": study.group_label(c)}
        for c in study.trials
    }
    for config in study.trials:
        after = pq.read_table(
            table_path(tmp_path, study.name, "trials", config.trial_id), partitioning=None
        ).to_pylist()[0]
        assert after == {**before[config.trial_id], **expected[config.trial_id]}
    with open_results(tmp_path, study.name) as con:
        viewed = run_query(con, "select trial_id, group_id, group_label from groups").to_pylist()
    assert {
        r["trial_id"]: {"group_id": r["group_id"], "group_label": r["group_label"]} for r in viewed
    } == expected


def test_migrate_keeps_the_group_of_rows_whose_config_no_longer_validates(tmp_path: Path) -> None:
    """A row whose stored config is no TrialConfig any more (a field since removed)
    keeps the group id such rows always had (its config less its weight and data
    seeds, hashed), labelled among those rows; without a study file every study under
    the results folder is upgraded."""
    stale = {"task": {"name": "successor"}, "model": {"pe": "alibi", "size": "tiny", "removed": 1},
             "data": {"distribution": "uniform_length"}, "train": {"lr": 1e-05}}
    rows = {}
    for lr in (1e-05, 3e-4):
        for weight in (0, 1):
            config = {**stale, "train": {"lr": lr}, "seeds": {"weight": weight, "data": 0, "eval": 0}}
            text = json.dumps(config, sort_keys=True, separators=(",", ":"))
            trial_id = hashlib.sha256(text.encode()).hexdigest()[:12]
            write_trial_table(tmp_path, "old", "trials", trial_id, [
                {"trial_id": trial_id, "status": "done", "config_json": text, "device": "cpu", "started_at": STARTED,
                 "weight_seed": weight, "data_seed": 0}])
            seedless = {**config, "seeds": {"eval": 0}}  # as views.sql computed it before
            rows[trial_id] = hashlib.sha256(json.dumps(seedless, sort_keys=True, separators=(",", ":"))
                                            .encode()).hexdigest()[:12]
    migrated = runner.invoke(app, ["migrate", "--results", str(tmp_path)])
    assert migrated.exit_code == 0, migrated.output
    with open_results(tmp_path, "old") as con:
        viewed = run_query(con, "select trial_id, group_id, group_label from groups").to_pylist()
    assert {r["trial_id"]: r["group_id"] for r in viewed} == rows
    assert {r["group_label"] for r in viewed} == {
        "successor/alibi/tiny/uniform_length train.lr=1e-05",
        "successor/alibi/tiny/uniform_length train.lr=0.0003",
    }


def test_rows_labelled_by_an_older_rule_get_todays_label_once(tmp_path: Path) -> None:
    """The quickstart's learned groups were labelled by what told them apart from each
    other only (model.attention_bias=none / windowed), dropping the coupled positions
    both share; labels now also name what departs from the study's base, and a run
    relabels the old rows once, changing nothing else."""
    study = load_study(Path(__file__).parents[1] / "studies" / "quickstart.yaml")
    coupled = [c for c in study.trials if c.model.positions == "coupled" and c.seeds.weight == 0]
    assert {study.group_label(c) for c in coupled} == {
        "successor/learned/tiny/uniform_length model.attention_bias=none model.max_positions=32 model.positions=coupled",
        ("successor/learned/tiny/uniform_length model.attention_bias=windowed model.max_positions=32 "
         "model.positions=coupled"),
    }
    for config in coupled:
        row = trials_row(study.name, config, "done", "cpu", STARTED, group_label="old label")
        write_trial_table(tmp_path, study.name, "trials", config.trial_id, [row])
    before = {c.trial_id: pq.read_table(table_path(tmp_path, study.name, "trials", c.trial_id),
                                        partitioning=None).to_pylist()[0] for c in coupled}
    relabelled = add_group_columns(tmp_path, study.name, study.group_label)
    assert relabelled == {c.trial_id: {"group_id": groups.group_id(c), "group_label": study.group_label(c)}
                          for c in coupled}
    assert add_group_columns(tmp_path, study.name, study.group_label) == {}  # once
    for config in coupled:
        after = pq.read_table(table_path(tmp_path, study.name, "trials", config.trial_id),
                              partitioning=None).to_pylist()[0]
        assert after == {**before[config.trial_id], "group_label": study.group_label(config)}


def test_a_run_regroups_legacy_rows_and_retags_their_mlflow_runs(
    study_file: Path, tmp_path: Path, write_finished_trial
) -> None:
    """A study whose finished trials were written before the group columns: run again,
    it trains nothing (so starts no Ray) but gives the rows their columns and the MLflow
    runs the same group tags, before any new row could join them."""
    study = load_study(study_file)
    uri = default_store_uri(tmp_path)
    tracker = StudyTracker(uri, study.name)
    for config in study.trials:
        write_finished_trial(tmp_path, study, config, 0.25, legacy=True)
        trial_id, tags, params = describe(
            trials_row(study.name, config, "done", "cpu", STARTED, group_label=study.group_label(config))
        )
        old = {
            **tags,
            "group": "0123456789ab",
            "group_label": "successor/alibi/tiny/uniform_length",
        }
        tracker.finish(tracker.run_for_trial(trial_id, old, params), "FINISHED", {}, {})

    summary = run_study(study, RunContext(tmp_path, uri))
    assert (summary.ran, summary.skipped) == (0, 4)
    client = mlflow.MlflowClient(uri)
    runs = client.search_runs([client.get_experiment_by_name(study.name).experiment_id], filter_string=TRIAL_RUNS)
    assert len(runs) == 4
    by_trial = {c.trial_id: c for c in study.trials}
    # runs made before parents existed: the run nests them under one parent per group
    parents = {run.data.tags["group"]: run.info.run_id for run in client.search_runs(
        [client.get_experiment_by_name(study.name).experiment_id], filter_string="tags.`lg_study.kind` = 'group'")}
    assert set(parents) == {groups.group_id(c) for c in study.trials} and len(parents) == 2
    for run in runs:
        config = by_trial[run.data.tags["trial_id"]]
        assert run.data.tags["group"] == groups.group_id(config)
        assert run.data.tags["group_label"] == study.group_label(config)
        assert run.data.tags["mlflow.parentRunId"] == parents[groups.group_id(config)]
    with open_results(tmp_path, study.name) as con:
        rows = run_query(con, "select trial_id, group_id from trials").to_pylist()
    assert {r["trial_id"]: r["group_id"] for r in rows} == {
        t: groups.group_id(c) for t, c in by_trial.items()
    }


# --- a real study ---------------------------------------------------------------------------


@pytest.mark.slow  # a Tune run of its own: test_run_study's real run covers the columns' path
@pytest.mark.long
def test_a_real_study_writes_the_columns_its_mlflow_tags_repeat(
    study_file: Path, tmp_path: Path
) -> None:
    study_file.write_text(STUDY.replace("seeds.weight: [0, 1]", "seeds.weight: [0]"))  # 2 trials
    results = tmp_path / "results"
    try:
        outcome = runner.invoke(app, ["run", str(study_file), "--results", str(results)])
    finally:
        ray.shutdown()
    assert outcome.exit_code == 0, outcome.output
    study = load_study(study_file)
    with open_results(results, study.name) as con:
        rows = run_query(con, "select trial_id, group_id, group_label from trials").to_pylist()
    assert {r["trial_id"]: (r["group_id"], r["group_label"]) for r in rows} == {
        c.trial_id: (groups.group_id(c), study.group_label(c)) for c in study.trials
    }
    client = mlflow.MlflowClient(f"sqlite:///{results.resolve()}/mlflow.db")
    runs = client.search_runs([client.get_experiment_by_name(study.name).experiment_id], filter_string=TRIAL_RUNS)
    columns = {r["trial_id"]: r for r in rows}
    assert len(runs) == len(rows) == 2
    for run in runs:
        row = columns[run.data.tags["trial_id"]]
        assert (run.data.tags["group"], run.data.tags["group_label"]) == (
            row["group_id"],
            row["group_label"],
        )
    # named by the group's short label among the study's groups, as the run table and report show it
    assert sorted(run.info.run_name for run in runs) == ["lr=0.001 · w0 d0", "lr=0.003 · w0 d0"]
    assert sorted({r["group_label"] for r in rows}) == [
        "successor/alibi/tiny/uniform_length train.lr=0.001",
        "successor/alibi/tiny/uniform_length train.lr=0.003",
    ]
