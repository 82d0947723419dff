"""One MLflow parent run per configuration group, every trial run nested under it, its
numbers those of the SQL questions: made by `lg-study sync`'s path (mlflow_tracking.sync_runs)
from rows written as a worker writes them, on a SQLite store and on a real `mlflow
server`; kept exactly one per group through re-syncs, added seeds, a study whose runs
predate parents, a duplicate parent, and `--restart`'s deletion. The runs page in a
browser: tests/test_group_runs_page.py."""

from __future__ import annotations

import dataclasses
import math
import time
from pathlib import Path

import pytest
from group_studies import BETTER_LR, STUDY, parents_study, write_trials
from mlflow import MlflowClient
from mlflow_servers import MlflowServer

from analysis import group_figures
from analysis.query import open_results, run_sql_file, sql_file
from orchestrator.commands.running import run_names_of
from orchestrator.mlflow_tracking import syncer as syncer_module
from orchestrator.mlflow_tracking.group_runs import (
    FIGURES_FOLDER,
    FIGURES_TAG,
    GROUP_KIND,
    KIND_TAG,
    PARENT_TAG,
)
from orchestrator.mlflow_tracking.handed import Handed
from orchestrator.mlflow_tracking.sync_runs import sync_runs
from orchestrator.mlflow_tracking.tracking import StudyTracker
from orchestrator.running import group_answers
from orchestrator.running.group_answers import handed, short_names
from orchestrator.studies.study import load_study
from results_contract import groups
from results_contract.experiments import default_store_uri


@pytest.fixture
def study(tmp_path: Path):
    return parents_study(tmp_path)


def numbers_only(study, root: Path) -> Handed:
    """handed() without the groups' figures and the trials' plots (a second of matplotlib a
    group, a fifth a trial), for the tests that check neither: test_parents_hold_... and
    test_numbers_are_rewritten_... check the figures, test_run_study the plots."""
    return dataclasses.replace(handed(study, root), accuracy_plot=None, group_figures=None)


def sync(uri: str, root: Path, study, figures: bool = False) -> list[str]:
    given = handed(study, root) if figures else numbers_only(study, root)
    synced = sync_runs(uri, study.experiment, root, study.name, run_names_of(study), given)
    assert not synced.lag.behind and synced.fault is None
    return synced.trials


def runs(uri: str, study) -> tuple[dict[str, object], list[object]]:
    """(group id -> its parent run, the trial runs) of the study's experiment."""
    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name(study.experiment)
    found = client.search_runs([experiment.experiment_id], max_results=1000) if experiment else []
    parents = [run for run in found if run.data.tags.get(KIND_TAG) == GROUP_KIND]
    by_group = {run.data.tags["group"]: run for run in parents}
    assert len(by_group) == len(parents), "two parents of one group"
    return by_group, [run for run in found if KIND_TAG not in run.data.tags]


def check_nested(uri: str, study, expected_groups: int) -> dict[str, object]:
    parents, children = runs(uri, study)
    assert len(parents) == expected_groups
    for child in children:
        assert child.data.tags[PARENT_TAG] == parents[child.data.tags["group"]].info.run_id
    return parents


def shown(uri: str, study, group_id: str) -> str | None:
    """How many finished trials the group's parent shows numbers of (None: no parent)."""
    parent = runs(uri, study)[0].get(group_id)
    return parent.data.tags.get("finished_trials") if parent else None


def answers(root: Path, study, question: str, params: dict[str, str] | None = None) -> dict:
    with open_results(root, study.name) as con:
        rows = run_sql_file(con, sql_file(question), params).to_pylist()
    return {(row["group_id"], row.get("digits")): row for row in rows}


def check_numbers(uri: str, root: Path, study) -> None:
    """Each parent shows variance.sql's, success.sql's and lucky_tickets.sql's numbers."""
    parents = check_nested(uri, study, 2)
    variance = answers(root, study, "variance.sql", {"resamples": "0"})
    success = answers(root, study, "success.sql")
    lucky = answers(root, study, "lucky_tickets.sql", {"resamples": "0"})
    for (group_id, digits), row in variance.items():
        metrics = parents[group_id].data.metrics
        assert metrics[f"mean/digits_{digits:03d}"] == row["mean"]
        assert metrics[f"mean_low/digits_{digits:03d}"] == row["mean_low"]
        assert metrics[f"mean_high/digits_{digits:03d}"] == row["mean_high"]
        assert metrics[f"trials/digits_{digits:03d}"] == row["n_trials"]
        assert metrics[f"p_success/digits_{digits:03d}"] == success[(group_id, digits)]["p_success"]
        assert metrics[f"p_success_high/digits_{digits:03d}"] == success[(group_id, digits)]["p_success_high"]
    for (group_id, _), row in lucky.items():
        [at_3] = [entry for entry in row["by_length"] if entry["digits"] == 3]
        share = parents[group_id].data.metrics["share_weight/digits_003"]
        assert share == at_3["component_share_weight"] and not math.isnan(share)


def test_parents_hold_the_sql_answers_and_stay_one_per_group(tmp_path: Path, study, write_finished_trial) -> None:
    root, uri = tmp_path / "results", default_store_uri(tmp_path / "results")
    write_trials(root, study, write_finished_trial, study.trials)
    assert len(sync(uri, root, study, figures=True)) == 8
    parents = check_nested(uri, study, 2)
    names = short_names(study)
    for group_id, parent in parents.items():
        assert parent.info.run_name == names[group_id]
        assert parent.data.tags["group_label"] == study.group_label(
            next(c for c in study.trials if groups.group_id(c) == group_id))
        assert {"weight_seeds": "2", "data_seeds": "2", "trials": "4", "finished_trials": "4"}.items() \
            <= parent.data.tags.items()
        assert "train.lr" in parent.data.params
        assert not {"seeds.weight", "seeds.data", "seeds.perturb"} & parent.data.params.keys()
        assert parent.info.status == "FINISHED"
    check_numbers(uri, root, study)

    # sorted by a length's mean, the parents rank the configurations (the runs page's sort)
    client = MlflowClient(uri)
    ranked = client.search_runs([client.get_experiment_by_name(study.experiment).experiment_id],
                                filter_string=f"tags.`{KIND_TAG}` = '{GROUP_KIND}'",
                                order_by=["metrics.`mean/digits_003` DESC"])
    variance = answers(root, study, "variance.sql", {"resamples": "0"})
    best = max((row["mean"], group_id) for (group_id, digits), row in variance.items() if digits == 3)[1]
    assert len(ranked) == 2 and ranked[0].data.tags["group"] == best
    assert ranked[0].data.params["train.lr"] == str(BETTER_LR)

    # the group's figures of the report, drawn from the numbers it shows
    for parent in parents.values():
        assert parent.data.tags[FIGURES_TAG] == "4"
        figures = {f.path for f in client.list_artifacts(parent.info.run_id, FIGURES_FOLDER)}
        # one test length outside the training range: no shares per length to draw
        expected = set(group_figures.FIGURES) - {"variance_shares_by_length.png"}
        assert {f"{FIGURES_FOLDER}/{name}" for name in expected} <= figures
        assert not [name for name in figures if not name.endswith(".png")], "PNG alone"

    # a second sync changes nothing: no new parent, no metric point twice, no figure drawn
    drawn = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(group_answers, "draw_figures", lambda *args: drawn.append(args) or {})
        assert sync(uri, root, study, figures=True) == []
    assert drawn == []
    for parent in check_nested(uri, study, 2).values():
        assert [m.step for m in client.get_metric_history(parent.info.run_id, "mean/digits_003")] == [4]


def test_added_seeds_runs_before_parents_and_a_duplicate(tmp_path: Path, study, write_finished_trial) -> None:
    root, uri = tmp_path / "results", default_store_uri(tmp_path / "results")
    write_trials(root, study, write_finished_trial, study.trials)
    sync(uri, root, study)
    client = MlflowClient(uri)
    tracker = StudyTracker(uri, study.experiment)
    parents, _ = runs(uri, study)
    # a duplicate that a call failing after its commit left behind: the older one stays
    group_id, kept = next(iter(parents.items()))
    client.create_run(tracker.experiment_id, tags={"group": group_id, KIND_TAG: GROUP_KIND})
    sync(uri, root, study)
    assert check_nested(uri, study, 2)[group_id].info.run_id == kept.info.run_id
    # runs from before parents existed: no parent, children that name none that exists
    for parent in parents.values():
        client.delete_run(parent.info.run_id)
    sync(uri, root, study)
    check_numbers(uri, root, study)
    # seeds: until adds a weight seed to each group
    added = [c for c in study.trials if c.seeds.weight == 1]
    more = [dataclasses.replace(c, seeds=dataclasses.replace(c.seeds, weight=2)) for c in added]
    write_trials(root, study, write_finished_trial, more)
    sync(uri, root, study)
    parents = check_nested(uri, study, 2)
    for parent in parents.values():
        history = client.get_metric_history(parent.info.run_id, "mean/digits_003")
        assert [m.step for m in history] == [4, 6]
        assert parent.data.tags["weight_seeds"] == "3"
    check_numbers(uri, root, study)
    # `run --restart` deletes the parents with the trial runs
    assert StudyTracker(uri, study.experiment).delete_runs() == 12
    assert runs(uri, study) == ({}, [])


def test_numbers_are_rewritten_as_each_trial_finishes(tmp_path: Path, study, write_finished_trial,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The MLflow thread rewrites a group's numbers once a trial of it finished, at the
    step of its finished trials: the UI's chart of the mean has one point per seed."""
    monkeypatch.setattr(syncer_module, "GROUP_REFRESH_S", 0.0)
    monkeypatch.setattr(syncer_module, "GROUP_SHARE_INVERSE", 0)
    root, uri = tmp_path / "results", default_store_uri(tmp_path / "results")
    configs = [c for c in study.trials if c.train.lr == study.trials[0].train.lr]
    syncer = syncer_module.MlflowSyncer(uri, study.experiment, root, study.name, say=print,
                                        handed=handed(study, root))
    for count, config in enumerate(configs, 1):
        write_trials(root, study, write_finished_trial, [config])
        syncer.trial({"results_root": str(root), "study": study.name, "trial_id": config.trial_id}, live=False)
        deadline = time.monotonic() + 60
        while shown(uri, study, groups.group_id(config)) != str(count):
            assert time.monotonic() < deadline, f"no numbers at {count} finished trials"
            time.sleep(0.2)
        if count < len(configs):  # figures wait for the group's last trial
            assert FIGURES_TAG not in runs(uri, study)[0][groups.group_id(config)].data.tags
    # the group complete, its figures are drawn while the study runs, before its end (a
    # deadline of their own: matplotlib's first figures take seconds on a loaded machine)
    deadline = time.monotonic() + 60
    while runs(uri, study)[0][groups.group_id(configs[0])].data.tags.get(FIGURES_TAG) != str(len(configs)):
        assert time.monotonic() < deadline, "no figures once every trial of the group finished"
        time.sleep(0.2)
    assert not syncer.close().behind
    [parent] = runs(uri, study)[0].values()
    history = MlflowClient(uri).get_metric_history(parent.info.run_id, "mean/digits_003")
    assert [m.step for m in history] == [1, 2, 3, 4]
    assert history[-1].value == answers(root, study, "variance.sql", {"resamples": "0"})[
        (groups.group_id(configs[0]), 3)]["mean"]


def test_a_groups_numbers_asked_alone_are_those_of_the_whole_study(tmp_path: Path, study,
                                                                  write_finished_trial) -> None:
    """Asked for the groups of a few trials, the analysis reads those groups' files alone
    and answers what it answers over the whole study, a trial no config names (a seed
    `seeds: until` added) included."""
    root = tmp_path / "results"
    added = [dataclasses.replace(c, seeds=dataclasses.replace(c.seeds, weight=2)) for c in study.trials[:2]]
    write_trials(root, study, write_finished_trial, [*study.trials, *added])
    answers_of = group_answers.GroupAnswers(study, root)
    whole = {n.group_id: n for n in answers_of.numbers()}
    one = groups.group_id(added[0])
    [alone] = answers_of.numbers([added[0].trial_id])
    assert alone == whole[one] and alone.step == 6
    assert {n.group_id for n in answers_of.numbers([c.trial_id for c in study.trials])} == set(whole)
    assert answers_of.numbers([]) == []
    with open_results(root, study.name, [added[0].trial_id]) as con:  # that trial's files alone
        assert con.execute("select trial_id from trials").fetchall() == [(added[0].trial_id,)]


def test_a_file_replaced_under_a_read_is_read_again(tmp_path: Path, study, write_finished_trial,
                                                   monkeypatch) -> None:
    """A running trial's file replaced after the views were made over it (what DuckDB's
    threads meet when it is swapped between their opens) fails the read; the numbers
    are asked again once it is whole, and are those of an undisturbed read."""
    root = tmp_path / "results"
    write_trials(root, study, write_finished_trial, study.trials)
    answers_of = group_answers.GroupAnswers(study, root)
    undisturbed = answers_of.numbers()
    eval_file = next((root / study.name / "eval").glob("trial_id=*/part-0.parquet"))
    whole, read_once = eval_file.read_bytes(), group_figures.read_once

    def torn_under_the_views(con, **given) -> None:
        eval_file.write_bytes(whole[: len(whole) // 2])
        read_once(con, **given)

    monkeypatch.setattr(group_figures, "read_once", torn_under_the_views)
    paused = []
    monkeypatch.setattr(group_answers.time, "sleep", lambda s: paused.append(s) or eval_file.write_bytes(whole))
    monkeypatch.setattr(group_answers, "READ_TRIES", 2)
    with pytest.raises(group_answers.duckdb.Error):  # torn at every try: said, as before
        answers_of.numbers()
    eval_file.write_bytes(whole)
    monkeypatch.setattr(group_figures, "read_once", lambda con, **given: (
        monkeypatch.setattr(group_figures, "read_once", read_once), torn_under_the_views(con, **given)))
    assert answers_of.numbers() == undisturbed and paused[-1] == group_answers.READ_PAUSE_S


def test_an_analysis_that_fails_stops_no_trial_run(tmp_path: Path, study, write_finished_trial) -> None:
    """The groups' numbers failing (the SQL refused) is said once and is no MLflow
    outage: the trials' runs are made and nested, and nothing is left owed."""
    root, uri = tmp_path / "results", default_store_uri(tmp_path / "results")
    write_trials(root, study, write_finished_trial, study.trials[:2])

    def refused(trials=None) -> list:
        raise ValueError("no such column")

    said: list[str] = []
    syncer = syncer_module.MlflowSyncer(uri, study.experiment, root, study.name, say=said.append,
                                        handed=Handed(refused, short_names(study)))
    syncer.job("sync_study", [c.trial_id for c in study.trials[:2]])
    assert not syncer.close().behind and syncer.down_since is None
    assert len(said) == 1 and "no such column" in said[0]
    assert len(check_nested(uri, study, len({groups.group_id(c) for c in study.trials[:2]}))) >= 1
    assert len(runs(uri, study)[1]) == 2


def test_numbers_that_failed_are_asked_again_though_no_trial_finishes_after(
        tmp_path: Path, study, write_finished_trial, monkeypatch: pytest.MonkeyPatch) -> None:
    """A rewrite whose numbers fail (a file replaced under the read) owes them again: the
    group's parent gets its numbers though its trial was the study's last to finish."""
    monkeypatch.setattr(syncer_module, "GROUP_REFRESH_S", 0.0)
    monkeypatch.setattr(syncer_module, "GROUP_SHARE_INVERSE", 0)
    root, uri = tmp_path / "results", default_store_uri(tmp_path / "results")
    config = study.trials[0]
    write_trials(root, study, write_finished_trial, [config])
    given, asked = numbers_only(study, root), []

    def failing_once(trials=None) -> list:
        asked.append(trials)
        if len(asked) == 1:
            raise group_answers.duckdb.InvalidInputException("TProtocolException: Invalid data")
        return given.group_numbers(trials)

    said: list[str] = []
    syncer = syncer_module.MlflowSyncer(uri, study.experiment, root, study.name, say=said.append,
                                        handed=dataclasses.replace(given, group_numbers=failing_once))
    syncer.trial({"results_root": str(root), "study": study.name, "trial_id": config.trial_id}, live=False)
    deadline = time.monotonic() + 60
    while not asked:
        assert time.monotonic() < deadline, "the numbers were never asked"
        time.sleep(0.05)
    assert not syncer.close().behind
    assert shown(uri, study, groups.group_id(config)) == "1"
    assert asked[1] == [config.trial_id] and len(said) == 1


def test_a_runs_end_leaves_the_figures_beyond_its_share_to_sync(tmp_path: Path, study, write_finished_trial,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """A run's end draws the figures still owed for a share of the run's time; the groups
    left are said, keep current numbers, and get their figures at `lg-study sync`."""
    monkeypatch.setattr(syncer_module, "FIGURE_BATCH", 1)
    root, uri = tmp_path / "results", default_store_uri(tmp_path / "results")
    write_trials(root, study, write_finished_trial, study.trials)
    given, said = handed(study, root), []

    def drawn_while_the_time_runs_out(group_ids, folder):
        syncer._figures_until = time.monotonic() - 1.0  # the end's time for figures is spent
        return given.group_figures(group_ids, folder)

    syncer = syncer_module.MlflowSyncer(uri, study.experiment, root, study.name, say=said.append,
                                        handed=dataclasses.replace(given, group_figures=drawn_while_the_time_runs_out))
    syncer.job("sync_study", [c.trial_id for c in study.trials])
    assert not syncer.close(figures_share=syncer_module.END_FIGURES_SHARE).behind
    parents = check_nested(uri, study, 2)
    assert sorted(str(p.data.tags.get(FIGURES_TAG)) for p in parents.values()) == ["4", "None"]
    assert syncer.figures_left == 1 and len(said) == 1 and "figures of 1 configuration group's MLflow parent is left" in said[0]
    assert all(p.data.tags["finished_trials"] == "4" for p in parents.values())
    synced = sync_runs(uri, study.experiment, root, study.name, run_names_of(study), given)
    [left] = [g for g, p in parents.items() if FIGURES_TAG not in p.data.tags]
    assert synced.figures == {left} and synced.groups == set() and synced.trials == []  # `lg-study sync`
    assert [p.data.tags.get(FIGURES_TAG) for p in check_nested(uri, study, 2).values()] == ["4", "4"]


def test_a_profiles_parents_live_in_its_experiment_and_a_moved_store_keeps_them(
        tmp_path: Path, write_finished_trial) -> None:
    """A profile's groups get their parents in the profile's experiment `<study>/<profile>`,
    the default experiment none; the results folder moved, the next sync finds them again."""
    path = tmp_path / "parents.yaml"
    path.write_text(STUDY + "profiles:\n  smoke: {train.steps: 2}\n")
    study = load_study(path, "smoke")
    results = tmp_path / "results"
    write_trials(study.results_root(results), study, write_finished_trial, study.trials)
    sync(default_store_uri(results), study.results_root(results), study)
    assert study.experiment == "parents/smoke"
    before = check_nested(default_store_uri(results), study, 2)
    assert runs(default_store_uri(results), load_study(path)) == ({}, [])
    moved = tmp_path / "elsewhere"
    results.rename(moved)
    sync(default_store_uri(moved), study.results_root(moved), study)
    after = check_nested(default_store_uri(moved), study, 2)
    assert {g: p.info.run_id for g, p in after.items()} == {g: p.info.run_id for g, p in before.items()}
    check_numbers(default_store_uri(moved), study.results_root(moved), study)


def test_an_experiment_made_without_its_kind_opens_in_the_model_training_view(tmp_path: Path) -> None:
    """MLflow 3's UI opens an experiment without `mlflow.experimentKind` in its GenAI
    views: a study's experiment made before lg-study tagged it gets the tag."""
    uri = default_store_uri(tmp_path)
    StudyTracker(uri, "tagged")  # makes the store
    client = MlflowClient(uri)
    client.create_experiment("older")
    StudyTracker(uri, "older")
    for name in ("tagged", "older"):
        assert client.get_experiment_by_name(name).tags["mlflow.experimentKind"] == "custom_model_development"


@pytest.mark.slow  # a real `mlflow server`, started three times: about 40 s
def test_parents_on_a_tracking_server_that_goes_away(tmp_path: Path, study, write_finished_trial) -> None:
    """A server down at a sync leaves the parents owed (the sync says MLflow is behind);
    the next sync once it is back makes them, one per group, with current numbers."""
    root = tmp_path / "results"
    write_trials(root, study, write_finished_trial, study.trials)
    server = MlflowServer(tmp_path / "server")
    lag = sync_runs(server.url, study.experiment, root, study.name, run_names_of(study), handed(study, root)).lag
    assert lag.behind  # nothing listens yet
    with server:
        sync(server.url, root, study)
        check_numbers(server.url, root, study)
    # gone mid-study: a weight seed more finishes while it is down
    more = [dataclasses.replace(c, seeds=dataclasses.replace(c.seeds, weight=2)) for c in study.trials
            if c.seeds.weight == 1]
    write_trials(root, study, write_finished_trial, more)
    lag = sync_runs(server.url, study.experiment, root, study.name, run_names_of(study), handed(study, root)).lag
    assert lag.behind
    with MlflowServer(tmp_path / "server", server.port):
        sync(server.url, root, study)
        check_numbers(server.url, root, study)
        for parent in check_nested(server.url, study, 2).values():
            assert parent.data.tags["finished_trials"] == "6"
        assert len(runs(server.url, study)[1]) == 12


# --- real runs ------------------------------------------------------------------------------

REAL_STUDY = """\
name: {name}
base:
  task: {{name: successor, train_digits: [1, 2]}}
  model: {{arch: decoder, size: tiny, pe: alibi}}
  train: {{steps: 4, batch_size: 8, lr: 3.0e-3, warmup: 1, log_every: 2}}
  eval: {{digits: [2, 3], samples: 4}}
axes:
  train.lr: [3.0e-3, 1.0e-3]
  seeds.weight: [0, 1]
resources: {{cpus_per_trial: 1}}
"""


@pytest.mark.slow  # three `lg-study run`s of a 4-trial study on a local Ray: about a minute
@pytest.mark.long
def test_a_run_a_restart_and_a_reuse_leave_one_parent_per_group(tmp_path: Path) -> None:
    from orchestrator.running.dispatch import run_study
    from orchestrator.running.run_context import RunContext

    def study_named(name: str):
        path = tmp_path / f"{name}.yaml"
        path.write_text(REAL_STUDY.format(name=name))
        return load_study(path)

    uri = default_store_uri(tmp_path)
    first = study_named("parents")
    summary = run_study(first, RunContext(tmp_path, uri))
    assert summary.ran == 4
    parents = check_nested(uri, first, 2)
    for parent in parents.values():
        assert parent.data.tags["finished_trials"] == "2"
        assert parent.data.metrics["trials/digits_003"] == 2
    run_study(first, RunContext(tmp_path, uri, restart=True))
    again = check_nested(uri, first, 2)
    assert not {p.info.run_id for p in again.values()} & {p.info.run_id for p in parents.values()}
    reused = study_named("parents_again")
    summary = run_study(reused, RunContext(tmp_path, uri))
    assert len(summary.reused) == 4
    check_nested(uri, reused, 2)
    assert len(runs(uri, reused)[1]) == 4
