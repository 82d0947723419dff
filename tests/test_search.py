"""The Optuna `search` block: points x seeds counted, each point's score the mean of
its seed-trials' Parquet values, and a search stopped between a point's trials and
its score resumed without running a finished point or trial again."""

import math
import re
import statistics
from pathlib import Path

import mlflow
import optuna
import pytest
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.trial import TrialState
from typer.testing import CliRunner

from analysis.query import open_results, run_query
from lengthgen import Report
from lengthgen.evaluation import LengthResult, summarize
from orchestrator.cli import app
from orchestrator.mlflow_tracking.group_runs import TRIAL_RUNS
from orchestrator.running import search
from orchestrator.running.trainable import report_metrics
from orchestrator.store.results_store import write_trial_table
from orchestrator.store.search_store import SCORES, TRIAL_IDS, distribution
from orchestrator.studies.search_spec import SearchParam, metric_names
from orchestrator.studies.study import load_study

FILES = Path(__file__).parent / "study_files"
STUDY = FILES / "good_search.yaml"
PAPER = Path(__file__).parents[1] / "studies" / "hparam_search.yaml"
runner = CliRunner()


def test_trial_count_is_points_times_seeds():
    assert load_study(STUDY).trial_count == 2 * 2
    wide = load_study(STUDY, profile="wide")
    assert wide.trial_count == 3 * 2
    # the profile replaced the lr range and kept the dropout choices
    assert (wide.spec.search.params["train.lr"].low, wide.spec.search.params["model.dropout"].choices) == (1e-4, [0.0, 0.1])
    assert load_study(PAPER).trial_count == 16 * 3 and load_study(PAPER, profile="cpu").trial_count == 8 * 2
    for args, count in ((["validate", str(PAPER)], "48 trials (16 points x 3 seeds)"),
                        (["validate", str(PAPER), "--profile", "cpu"], "16 trials (8 points x 2 seeds)")):
        outcome = runner.invoke(app, args)
        assert outcome.exit_code == 0 and count in outcome.output, outcome.output


def test_metric_names_are_what_the_trainable_logs():
    config = load_study(STUDY).config_with({})
    results = [LengthResult(d, 16, 3, 3 / 16, config.in_distribution(d)) for d in config.eval.digits]
    logged = report_metrics(Report(step=12, eval=results, summary=summarize(results)))
    assert set(metric_names(config)) <= set(logged)
    assert {"acc/digits_001", "acc/digits_003", "summary/ood_accuracy_mean"} <= set(metric_names(config))


def test_distributions_follow_the_field_type():
    assert distribution("train.steps", SearchParam(low=10, high=20, step=5)) == IntDistribution(10, 20, step=5)
    assert distribution("train.lr", SearchParam(low=1e-4, high=1e-2, log=True)) == FloatDistribution(1e-4, 1e-2, log=True)
    assert distribution("model.pe", SearchParam(choices=["rope", "fire"])) == CategoricalDistribution(["rope", "fire"])


def test_a_diverged_seed_scores_zero_whatever_its_last_evaluation(tmp_path):
    row = {"step": 4, "digits": 1, "n": 4, "correct": 4, "accuracy": 1.0, "in_distribution": True}
    write_trial_table(tmp_path, "s", "eval", "abc", [row])
    assert search.seed_score(tmp_path, "s", "abc", "done", "acc/digits_001") == 1.0
    assert search.seed_score(tmp_path, "s", "abc", "diverged", "acc/digits_001") == search.DIVERGED_SCORE == 0.0


def optuna_trials(results: Path, name: str = "tiny_search") -> list:
    storage = f"sqlite:///{results.resolve()}/tiny_search/optuna.db"
    return optuna.load_study(study_name=name, storage=storage).get_trials()


def mlflow_runs(results: Path) -> list:
    client = mlflow.MlflowClient(f"sqlite:///{results.resolve()}/mlflow.db")
    return client.search_runs([client.get_experiment_by_name("tiny_search").experiment_id],
                              filter_string=TRIAL_RUNS)


def final_accuracy(results: Path, digits: int) -> dict[str, float]:
    """trial_id -> accuracy at `digits` at its last evaluation, by DuckDB over Parquet."""
    with open_results(results, "tiny_search") as con:
        rows = run_query(con, f"select trial_id, accuracy from final_eval where digits = {digits}").to_pylist()
    return {r["trial_id"]: r["accuracy"] for r in rows}


@pytest.fixture(scope="module")
def searched_once(tmp_path_factory):
    """Two points of two seeds, asked together."""
    results = tmp_path_factory.mktemp("search") / "results"
    first = runner.invoke(app, ["run", str(STUDY), "--results", str(results)])
    yield {"results": results, "first": first,
           "after_first": {"trials": optuna_trials(results), "runs": mlflow_runs(results), "output": first.output}}


@pytest.fixture(scope="module")
def searched(searched_once):
    """Then the file asks for a third point, one at a time, and that run is stopped after
    the point's trials ran but before its score was told; one of its trials is then made
    unfinished; then it is resumed, and run once more."""
    results = searched_once["results"]
    longer = results.parent / "longer.yaml"
    longer.write_text(STUDY.read_text().replace("points: 2\n  parallel_points: 2", "points: 3\n  parallel_points: 1"))
    with pytest.MonkeyPatch.context() as patch:
        def stop(*args, **kwargs):
            raise KeyboardInterrupt  # the driver stops between the point's trials and its score
        patch.setattr(search, "seed_score", stop)
        stopped = runner.invoke(app, ["run", str(longer), "--results", str(results)])
    after_stop = optuna_trials(results)
    open_point = next(t for t in after_stop if t.state == TrialState.RUNNING)
    unfinished = open_point.user_attrs[TRIAL_IDS][1]
    (results / "tiny_search" / "trials" / f"trial_id={unfinished}" / "part-0.parquet").unlink()
    resumed = runner.invoke(app, ["run", str(longer), "--results", str(results)])
    again = runner.invoke(app, ["run", str(longer), "--results", str(results)])
    return {
        **searched_once, "longer": longer, "stopped": stopped, "after_stop": after_stop,
        "open_point": open_point, "unfinished": unfinished, "resumed": resumed, "again": again,
    }


def test_each_point_is_told_the_mean_of_its_seeds(searched_once):
    results, first = searched_once["results"], searched_once["first"]
    assert first.exit_code == 0, first.output
    points = searched_once["after_first"]["trials"]
    assert [t.state for t in points] == [TrialState.COMPLETE] * 2
    accuracy = final_accuracy(results, digits=1)  # search.metric is acc/digits_001
    for point in points:
        trial_ids = point.user_attrs[TRIAL_IDS]
        assert len(trial_ids) == 2 and point.user_attrs[SCORES] == {t: accuracy[t] for t in trial_ids}
        assert point.value == pytest.approx(statistics.fmean(accuracy[t] for t in trial_ids))
    # the searched values are columns of `trials`: each point's trials have its values, one per weight seed
    with open_results(results, "tiny_search") as con:
        trials = run_query(con, "select trial_id, lr, model_dropout, weight_seed from trials").to_pylist()
    for point in points:
        mine = [t for t in trials if t["trial_id"] in point.user_attrs[TRIAL_IDS]]
        assert {(t["lr"], t["model_dropout"]) for t in mine} == {(point.params["train.lr"], point.params["model.dropout"])}
        assert sorted(t["weight_seed"] for t in mine) == [0, 1]
    runs = searched_once["after_first"]["runs"]
    assert sorted(r.data.tags["search_point"] for r in runs) == ["0", "0", "1", "1"]
    assert {r.data.tags["search"] for r in runs} == {"tiny_search"} and {r.info.status for r in runs} == {"FINISHED"}
    assert "best point" in first.output


@pytest.mark.slow  # three more Tune runs: stopped, resumed, and once more
@pytest.mark.long
def test_a_stopped_search_resumes_without_running_finished_work_again(searched):
    results = searched["results"]
    assert searched["stopped"].exit_code == 130, searched["stopped"].output
    assert [t.state for t in searched["after_stop"]] == [TrialState.COMPLETE] * 2 + [TrialState.RUNNING]

    resumed = searched["resumed"]
    assert resumed.exit_code == 0, resumed.output
    text = " ".join(resumed.output.split())
    # the open point ran again with its stored values, and only its unfinished trial trained
    assert "ran 1 trials" in text and "5 of 6 trials had already finished" in text
    points = optuna_trials(results)
    assert [t.state for t in points] == [TrialState.COMPLETE] * 3  # no point asked twice
    # a resumed run draws new points (its sampler is not re-seeded to repeat the first ones)
    assert len({tuple(sorted(t.params.items())) for t in points}) == 3
    open_point = searched["open_point"]
    assert points[2].params == open_point.params and points[2].user_attrs[TRIAL_IDS] == open_point.user_attrs[TRIAL_IDS]
    accuracy = final_accuracy(results, digits=1)
    assert points[2].value == pytest.approx(statistics.fmean(accuracy[t] for t in open_point.user_attrs[TRIAL_IDS]))

    with open_results(results, "tiny_search") as con:
        rows = run_query(con, "select count(*) as n, count(distinct trial_id) as ids from trials").to_pylist()[0]
        train_rows = run_query(con, "select count(*) as n from train").to_pylist()[0]["n"]
    assert rows == {"n": 6, "ids": 6} and train_rows == 6 * 2  # log_every 6 of 12 steps
    runs = mlflow_runs(results)
    assert len(runs) == 6 and len({r.data.tags["trial_id"] for r in runs}) == 6
    assert {r.info.status for r in runs} == {"FINISHED"}
    assert sorted(r.data.tags["search_point"] for r in runs) == ["0", "0", "1", "1", "2", "2"]

    again = searched["again"]
    assert again.exit_code == 0 and "6 of 6 trials had already finished" in " ".join(again.output.split())
    assert "ran " not in again.output and len(optuna_trials(results)) == 3


@pytest.mark.slow  # three more Tune runs: stopped, resumed, and once more
@pytest.mark.long
def test_status_lists_the_best_point_with_mean_and_spread(searched):
    results = searched["results"]
    outcome = runner.invoke(app, ["status", str(searched["longer"]), "--results", str(results)])
    assert outcome.exit_code == 0, outcome.output
    best = max(optuna_trials(results), key=lambda t: (t.value, -t.number))
    scores = list(best.user_attrs[SCORES].values())
    spread = statistics.stdev(scores)
    row = next(line for line in outcome.output.splitlines() if re.match(r"\W*1\s*\W", line))
    cells = [c.strip() for c in re.split(r"[│┃|]", row) if c.strip()]
    assert cells[:2] == ["1", str(best.number)]
    assert cells[-5:] == [f"{best.value:.3f}", "nan" if math.isnan(spread) else f"{spread:.3f}",
                          f"{min(scores):.3f}", f"{max(scores):.3f}", "2"]
    assert "3 of 3 points scored" in outcome.output


@pytest.mark.slow  # three more Tune runs: stopped, resumed, and once more
@pytest.mark.long
def test_a_changed_search_is_refused(searched):
    results, longer = searched["results"], searched["longer"]
    changed = longer.parent / "changed.yaml"
    changed.write_text(longer.read_text().replace("metric: acc/digits_001", "metric: acc/digits_002"))
    outcome = runner.invoke(app, ["run", str(changed), "--results", str(results)])
    assert outcome.exit_code == 2, outcome.output
    assert "was started with a different metric" in " ".join(outcome.output.split())
    assert len(optuna_trials(results)) == 3
