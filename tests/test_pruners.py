"""`search.pruner` (Optuna's pruners over the mean of a point's seeds, or its upper
bound) and `lg-study replay`, which replays one over a stored or simulated search:
compute saved, and whether the best point survived, over resamples of the seeds and
over simulated searches."""

import json
import random
from datetime import datetime, timezone
from pathlib import Path

import mlflow
import optuna
import pytest
from optuna.trial import TrialState
from typer.testing import CliRunner

from orchestrator.cli import app
from orchestrator.mlflow_tracking.group_runs import TRIAL_RUNS
from orchestrator.store.results_store import write_trial_table
from orchestrator.store.search_store import TRIAL_IDS, SearchStore
from orchestrator.studies.pruner_replay import (
    PointCurves,
    SimulatedSearch,
    bootstrap,
    replay,
    replay_draws,
    replay_over,
    simulated_resamples,
)
from orchestrator.studies.pruners import PRUNERS, PrunerSpec
from orchestrator.studies.study import load_study

FILES = Path(__file__).parent / "study_files"
STUDY = FILES / "good_search.yaml"
PAPER = Path(__file__).parents[1] / "studies" / "hparam_search.yaml"
runner = CliRunner()


def test_each_name_makes_its_optuna_pruner_with_its_settings():
    made = {name: PrunerSpec(name=name).make() for name in PRUNERS if name != "percentile"}
    assert type(made["none"]) is optuna.pruners.NopPruner
    assert type(made["median"]) is optuna.pruners.MedianPruner
    assert type(made["successive_halving"]) is optuna.pruners.SuccessiveHalvingPruner
    assert type(made["hyperband"]) is optuna.pruners.HyperbandPruner
    assert type(made["wilcoxon"]) is optuna.pruners.WilcoxonPruner
    median = PrunerSpec.model_validate({"name": "median", "n_warmup_steps": 1000}).make()
    assert median._n_warmup_steps == 1000 and median._n_startup_trials == 5  # the default beside it
    assert PrunerSpec.model_validate("hyperband") == PrunerSpec(name="hyperband")
    assert PrunerSpec.model_validate({"name": "percentile", "percentile": 25}).make()._percentile == 25
    with pytest.raises(ValueError, match="percentile pruner, percentile: required field is missing"):
        PrunerSpec.model_validate("percentile")


def test_a_search_prunes_nothing_unless_told_and_the_field_moves_no_trial_id(tmp_path):
    plain = load_study(STUDY)
    assert plain.spec.search.pruner.name == "none" and not plain.spec.search.pruner.prunes
    assert type(SearchStore(plain, tmp_path / "plain").optuna.pruner) is optuna.pruners.NopPruner
    pruned_file = tmp_path / "pruned_search.yaml"
    pruned_file.write_text(STUDY.read_text().replace(
        "  repeat:", "  pruner: {name: median, n_warmup_steps: 8}\n  repeat:"))
    pruned = load_study(pruned_file)
    assert pruned.spec.search.pruner.name == "median"
    # the search's Optuna study prunes with it: what `lg-study run` asks
    made = SearchStore(pruned, tmp_path / "pruned").optuna.pruner
    assert type(made) is optuna.pruners.MedianPruner and made._n_warmup_steps == 8
    assert pruned.config_with({"train.lr": 0.01}).trial_id == plain.config_with({"train.lr": 0.01}).trial_id
    outcome = runner.invoke(app, ["validate", str(PAPER), "--profile", "cpu"])
    assert outcome.exit_code == 0 and "pruner" not in outcome.output


def test_a_pruner_sees_the_mean_over_the_seeds_or_its_upper_t_bound():
    assert PrunerSpec(name="median").point_value([0.2, 0.4, 0.9]) == pytest.approx(0.5)
    bound = PrunerSpec(name="median", value="upper_bound")
    # mean + t(0.9, n - 1) s / sqrt(n): t is 3.078 with one degree of freedom, 1.886 with two
    assert bound.point_value([0.2, 0.4]) == pytest.approx(0.3 + 3.0777 * 0.1, abs=1e-4)
    assert bound.point_value([0.2, 0.4, 0.9]) == pytest.approx(0.5 + 1.8856 * 0.20817, abs=1e-4)
    assert bound.point_value([0.3, 0.3]) == pytest.approx(0.3)  # seeds that agree: nothing to doubt
    loose = PrunerSpec(name="median", value="upper_bound", confidence=0.8)
    assert 0.3 < loose.point_value([0.2, 0.4]) < bound.point_value([0.2, 0.4])
    assert "value upper_bound, confidence 0.8" in str(loose) and "80% upper t bound" in loose.sees
    with pytest.raises(ValueError, match="confidence applies to value upper_bound only"):
        PrunerSpec(name="median", confidence=0.8)


def curve(*values: float) -> dict[int, float]:
    return {100 * (k + 1): v for k, v in enumerate(values)}


def test_median_replay_prunes_a_point_below_the_earlier_ones_and_counts_seed_steps():
    good = [PointCurves(n, [curve(0.5, 0.8, 0.9), curve(0.7, 0.8, 1.0)]) for n in range(3)]
    # below the earlier points' median at step 100 on the mean of its seeds, though one seed is not
    poor = PointCurves(3, [curve(0.0, 0.0, 0.1), curve(0.9, 0.9, 0.9)])
    done = replay([*good, poor], lambda: optuna.pruners.MedianPruner(n_startup_trials=3))
    assert done.pruned == {3: 100} and done.best_kept and done.best == 0
    assert (done.full, done.spent) == (4 * 2 * 300, 3 * 2 * 300 + 2 * 100)
    assert done.saved == pytest.approx(2400 / 2000)
    # the best point arriving last and slow is lost by a pruner that judges too early
    late = PointCurves(4, [curve(0.1, 0.9, 1.0), curve(0.1, 1.0, 1.0)])
    lost = replay([*good, late], lambda: optuna.pruners.MedianPruner(n_startup_trials=3))
    assert lost.best == 4 and not lost.best_kept
    kept = replay([*good, late], lambda: optuna.pruners.MedianPruner(n_startup_trials=3, n_warmup_steps=200))
    assert kept.best_kept and kept.pruned == {}


def test_the_upper_bound_keeps_a_point_with_one_unlucky_seed_and_prunes_one_poor_in_both():
    good = [PointCurves(n, [curve(0.5, 0.8, 0.9), curve(0.7, 0.8, 1.0)]) for n in range(3)]
    unlucky = PointCurves(3, [curve(0.0, 0.1, 0.2), curve(0.9, 1.0, 1.0)])  # mean 0.45 at step 100
    poor = PointCurves(4, [curve(0.1, 0.1, 0.1), curve(0.2, 0.2, 0.2)])
    median = PrunerSpec.model_validate({"name": "median", "n_startup_trials": 3})
    bound = PrunerSpec.model_validate({"name": "median", "n_startup_trials": 3, "value": "upper_bound"})
    assert replay([*good, unlucky, poor], median.make, see=median.point_value).pruned == {3: 100, 4: 100}
    assert replay([*good, unlucky, poor], bound.make, see=bound.point_value).pruned == {4: 100}


def test_a_bootstrap_draws_each_points_own_seeds():
    points = [PointCurves(n, [curve(n + 0.1), curve(n + 0.2), curve(n + 0.3)]) for n in range(4)]
    drawn = bootstrap(points, random.Random(1))
    assert [p.number for p in drawn] == [0, 1, 2, 3]
    for before, after in zip(points, drawn):
        assert len(after.seeds) == 3 and all(seed in before.seeds for seed in after.seeds)
    assert any(len({id(s) for s in p.seeds}) < 3 for p in drawn)  # with replacement


def test_a_simulated_search_has_its_known_best_and_no_pruner_loses_it():
    steps = [1000, 2000, 3000]
    resamples = list(simulated_resamples(SimulatedSearch(points=20, seeds=3), steps, 3, seed=4))
    assert len({best for _, best in resamples}) == 1
    points, _ = resamples[0]
    assert len(points) == 20 and all(len(p.seeds) == 3 and p.steps == steps for p in points)
    nothing = replay_over(resamples, PrunerSpec().make)
    assert nothing.saved == 1.0 and nothing.kept == 3
    eager = replay_over(resamples, PrunerSpec.model_validate({"name": "median", "n_startup_trials": 2}).make)
    assert eager.saved > 1.0


def test_draws_are_the_simulated_searches_of_successive_seeds():
    steps, search = [1000, 2000, 3000], SimulatedSearch(points=12, seeds=2)
    make = PrunerSpec.model_validate({"name": "median", "n_startup_trials": 2}).make
    draws = replay_draws(search, steps, 3, 2, 4, make)
    assert len(draws.kept_shares) == 3 and draws.saved == sorted(draws.saved)
    alone = replay_over(simulated_resamples(search, steps, 2, seed=5), make)  # what --seed 5 replays
    assert [r.pruned for r in draws.draws[1].replays] == [r.pruned for r in alone.replays]
    assert len({r.best for d in draws.draws for r in d.replays}) > 1  # each search has its own best
    assert draws.kept_at_least(0.0) == 3 and draws.kept_at_least(0.5) == sum(k >= 0.5 for k in draws.kept_shares)


def test_replay_command_over_a_stored_search(tmp_path):
    """A search stored by hand: three points of two seeds, Parquet `eval` rows and an
    Optuna storage; the replay reads them back and prunes the poor point."""
    results = tmp_path / "results"
    storage = f"sqlite:///{results / 'tiny_search'}/optuna.db"
    (results / "tiny_search").mkdir(parents=True)
    study = optuna.create_study(study_name="tiny_search", storage=storage, direction="maximize")
    now = datetime.now(timezone.utc)
    accuracy = {0: (0.5, 0.9), 1: (0.6, 1.0), 2: (0.0, 0.1)}  # per point: at step 6, at step 12
    for number, (early, last) in accuracy.items():
        trial = study.ask()
        ids = [f"p{number}s{seed}" for seed in range(2)]
        trial.set_user_attr(TRIAL_IDS, ids)
        for trial_id in ids:
            rows = [{"step": step, "digits": 1, "n": 10, "correct": round(10 * value), "accuracy": value,
                     "in_distribution": True} for step, value in ((6, early), (12, last))]
            write_trial_table(results, "tiny_search", "eval", trial_id, rows)
            write_trial_table(results, "tiny_search", "trials", trial_id,
                              [{"trial_id": trial_id, "study": "tiny_search", "status": "done",
                                "config_json": "{}", "device": "cpu", "started_at": now}])
        study.tell(trial, last)
    outcome = runner.invoke(app, ["replay", str(STUDY), "--results", str(results), "--resamples", "5",
                                  "--pruner", "{name: median, n_startup_trials: 2}"])
    assert outcome.exit_code == 0, outcome.output
    text = " ".join(outcome.output.split())
    assert "3 scored points" in text
    # point 2 stopped at step 6 of 12: 3 x 2 x 12 seed-steps / (2 x 2 x 12 + 2 x 6), in every
    # resample (each point's two seeds are alike); the best, point 1, kept in all five
    assert "│ 1.200 │ 5/5 │ 0.566-1.000 │ 1 │ 1 │ │" in text


def test_replay_command_refuses_what_it_cannot_replay(tmp_path):
    nothing = runner.invoke(app, ["replay", str(STUDY), "--results", str(tmp_path)])
    assert nothing.exit_code == 2 and "search.pruner is none" in nothing.output
    unknown = runner.invoke(app, ["replay", str(STUDY), "--pruner", "asha", "--results", str(tmp_path)])
    assert unknown.exit_code == 2 and "'asha' is not one of none, median" in " ".join(unknown.output.split())
    missing = runner.invoke(app, ["replay", str(STUDY), "--pruner", "median", "--results", str(tmp_path)])
    assert missing.exit_code == 2 and "no search stored" in " ".join(missing.output.split())
    simulated = runner.invoke(app, ["replay", str(STUDY), "--pruner", "median", "--simulate", "12x2",
                                    "--resamples", "2"])
    assert simulated.exit_code == 0 and "simulated search of 12 points x 2 seeds" in " ".join(simulated.output.split())
    stored_draws = runner.invoke(app, ["replay", str(STUDY), "--pruner", "median", "--draws", "3"])
    assert stored_draws.exit_code == 2 and "give --simulate" in " ".join(stored_draws.output.split())
    draws = runner.invoke(app, ["replay", str(STUDY), "--pruner", "{name: median, value: upper_bound}",
                                "--simulate", "12x2", "--draws", "2", "--resamples", "2"], env={"COLUMNS": "300"})
    assert draws.exit_code == 0, draws.output
    assert "2 simulated searches of 12 points x 2 seeds" in draws.output and "draws_kept_95" in draws.output


def optuna_points(results: Path) -> list:
    storage = f"sqlite:///{results.resolve()}/tiny_search/optuna.db"
    return optuna.load_study(study_name="tiny_search", storage=storage).get_trials()



def write_pruned_search(study_file: Path) -> None:
    """The tiny search, evaluated every 4 steps and judged by the median pruner from its
    first point."""
    study_file.write_text(STUDY.read_text()
                          .replace("eval: {digits: [1, 2, 3], samples: 16}",
                                   "eval: {digits: [1, 2, 3], samples: 16, every: 4}")
                          .replace("  repeat:", "  pruner: {name: median, n_startup_trials: 0}\n  repeat:"))

@pytest.fixture(scope="module")
def pruned_search(tmp_path_factory):
    """Two points of two seeds, evaluated at steps 4, 8 and 12, under a median pruner made
    to prune point 1 (and never point 0) whenever it is asked: the decision is Optuna's
    pruner's to make, this only makes it known in advance."""
    folder = tmp_path_factory.mktemp("pruned")
    results, study_file = folder / "results", folder / "pruned_search.yaml"
    write_pruned_search(study_file)
    asked = []

    def prune(self, study, trial):
        asked.append((trial.number, max(trial.intermediate_values)))
        return trial.number == 1

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(optuna.pruners.MedianPruner, "prune", prune)
        first = runner.invoke(app, ["run", str(study_file), "--results", str(results)])
    again = runner.invoke(app, ["run", str(study_file), "--results", str(results)])
    return {"results": results, "first": first, "again": again, "asked": asked, "file": study_file}


@pytest.mark.slow  # a search under a real local Ray, run twice (pruned_search)
@pytest.mark.long
def test_a_pruned_point_stops_all_its_seeds_at_the_step_and_keeps_their_rows(pruned_search):
    from analysis.query import open_results, run_query

    results, first = pruned_search["results"], pruned_search["first"]
    assert first.exit_code == 0, first.output
    assert "1 pruned" in " ".join(first.output.split())
    points = optuna_points(results)
    assert [t.state for t in points] == [TrialState.COMPLETE, TrialState.PRUNED]
    pruned = points[1]
    # asked once, at the first evaluation both of its seeds had reached, with their mean
    assert (1, 4) in pruned_search["asked"] and not any(n == 1 and s > 4 for n, s in pruned_search["asked"])
    assert list(pruned.intermediate_values) == [4] and pruned.user_attrs["pruned_at"] == 4
    with open_results(results, "tiny_search") as con:
        trials = {r["trial_id"]: r for r in run_query(con, "select trial_id, status, pruned_at from trials").to_pylist()}
        evals = run_query(con, "select trial_id, step, accuracy from eval where digits = 1").to_pylist()
    seeds = pruned.user_attrs[TRIAL_IDS]
    assert {trials[t]["status"] for t in seeds} == {"pruned"} and {trials[t]["pruned_at"] for t in seeds} == {4}
    assert {trials[t]["status"] for t in points[0].user_attrs[TRIAL_IDS]} == {"done"}
    # the seed whose evaluation completed step 4 was stopped there, short of the last step
    # (Tune's own record of what each reported); the other may have finished before the
    # decision (two CPUs run the four seeds in any order) and is cut back to the step below
    reported = {}
    for path in (results / "tiny_search" / "_tune").rglob("result.json"):
        lines = [json.loads(line) for line in path.read_text().splitlines()]
        reported[lines[0]["lg_trial_id"]] = max(line["step"] for line in lines)
    assert min(reported[t] for t in seeds) < 12 and {reported[t] for t in points[0].user_attrs[TRIAL_IDS]} == {12}
    # the rows up to the step stand, and the pruner saw their mean
    assert {e["step"] for e in evals if e["trial_id"] in seeds} == {4}
    assert pruned.intermediate_values[4] == pytest.approx(
        sum(e["accuracy"] for e in evals if e["trial_id"] in seeds) / 2)
    assert not list((results / "tiny_search").glob("_checkpoints/*.pt"))
    client = mlflow.MlflowClient(f"sqlite:///{results.resolve()}/mlflow.db")
    runs = client.search_runs([client.get_experiment_by_name("tiny_search").experiment_id], filter_string=TRIAL_RUNS)
    ends = {r.data.tags["trial_id"]: (r.info.status, r.data.tags.get("status")) for r in runs}
    assert {ends[t] for t in seeds} == {("KILLED", "pruned")}
    # run again: the pruned point is not run again, nor asked for
    again = pruned_search["again"]
    assert again.exit_code == 0, again.output
    assert "ran " not in again.output and len(optuna_points(results)) == 2


@pytest.mark.slow  # two more searches under Ray: stopped after the decision, then resumed
@pytest.mark.long
def test_a_search_stopped_after_a_pruning_decision_resumes_with_that_decision(tmp_path):
    from orchestrator.running import point_pruning

    results = tmp_path / "results"
    study_file = tmp_path / "pruned_search.yaml"
    write_pruned_search(study_file)
    asked = []

    def prune(self, study, trial):
        asked.append(trial.number)
        return trial.number == 1

    def stop(self, results_root, study):
        raise KeyboardInterrupt  # the driver stops after the decision, before the seeds are marked

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(optuna.pruners.MedianPruner, "prune", prune)
        patch.setattr(point_pruning.PointPruner, "settle", stop)
        stopped = runner.invoke(app, ["run", str(study_file), "--results", str(results)])
    assert stopped.exit_code == 130, stopped.output
    point = optuna_points(results)[1]
    assert point.state == TrialState.RUNNING and point.user_attrs["pruned_at"] == 4
    asked.clear()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(optuna.pruners.MedianPruner, "prune", prune)
        resumed = runner.invoke(app, ["run", str(study_file), "--results", str(results)])
    assert resumed.exit_code == 0, resumed.output
    # the stored decision stands: no seed trains again and the pruner is not asked again
    assert asked == [] and "ran " not in resumed.output
    assert [t.state for t in optuna_points(results)] == [TrialState.COMPLETE, TrialState.PRUNED]
    from analysis.query import open_results, run_query

    with open_results(results, "tiny_search") as con:
        rows = run_query(con, "select trial_id, status, pruned_at from trials").to_pylist()
        steps = run_query(con, "select trial_id, max(step) as last from eval group by trial_id").to_pylist()
    seeds = point.user_attrs[TRIAL_IDS]
    assert {(r["status"], r["pruned_at"]) for r in rows if r["trial_id"] in seeds} == {("pruned", 4)}
    assert {s["last"] for s in steps if s["trial_id"] in seeds} == {4}
    # their MLflow runs, ended as killed by the stopped run, end as pruned
    client = mlflow.MlflowClient(f"sqlite:///{results.resolve()}/mlflow.db")
    runs = client.search_runs([client.get_experiment_by_name("tiny_search").experiment_id], filter_string=TRIAL_RUNS)
    assert {(r.info.status, r.data.tags.get("status")) for r in runs if r.data.tags["trial_id"] in seeds} == {
        ("KILLED", "pruned")}


def test_the_stopper_reports_a_point_once_all_its_seeds_reached_a_step_and_stops_them_all():
    from orchestrator.running.point_pruning import PRUNED_AT, PointPruner

    study = optuna.create_study(direction="maximize", pruner=optuna.pruners.MedianPruner(n_startup_trials=1))
    ahead = study.ask()  # point 0, scored 0.9 at step 4
    ahead.report(0.9, 4)
    study.tell(ahead, 0.9)
    study.ask()  # point 1: seeds a and b
    stopper = PointPruner(study, {1: ["a", "b"]}, "acc/digits_001", {1: 12}, PrunerSpec(name="median"))
    metric = "acc/digits_001"
    assert stopper("tune-a", {"lg_trial_id": "a", "step": 4, metric: 0.1}) is False
    assert study.trials[1].intermediate_values == {}  # b has not reached step 4 yet
    assert stopper("tune-x", {"lg_trial_id": "other", "step": 4, metric: 0.0}) is False  # not a point's
    assert stopper("tune-b", {"lg_trial_id": "b", "step": 4, metric: 0.3}) is True
    assert study.trials[1].intermediate_values == {4: pytest.approx(0.2)}  # the mean, below point 0's 0.9
    assert study.trials[1].user_attrs[PRUNED_AT] == 4 and stopper.pruned == {1: 4}
    # a seed ahead is stopped at its next report, whatever it reports
    assert stopper("tune-a", {"lg_trial_id": "a", "step": 6}) is True
    # seeing the upper bound, a point whose seeds disagree is judged by what it could be
    study.ask()
    bound = PointPruner(study, {2: ["c", "d"]}, metric, {2: 12}, PrunerSpec(name="median", value="upper_bound"))
    assert bound("tune-c", {"lg_trial_id": "c", "step": 4, metric: 0.0}) is False
    assert bound("tune-d", {"lg_trial_id": "d", "step": 4, metric: 0.8}) is False
    assert study.trials[2].intermediate_values == {4: pytest.approx(0.4 + 3.0777 * 0.4, abs=1e-4)}


def test_the_stopper_judges_a_resumed_point_on_its_stored_steps_and_never_the_last():
    from orchestrator.running.point_pruning import PointPruner

    study = optuna.create_study(direction="maximize", pruner=optuna.pruners.MedianPruner(n_startup_trials=1))
    best = study.ask()
    best.report(0.9, 4)
    best.report(0.9, 8)
    study.tell(best, 0.9)
    study.ask()
    stopper = PointPruner(study, {1: ["a", "b"]}, "acc/digits_001", {1: 8}, PrunerSpec(name="median"))
    # both seeds had stored step 4 before a stop; b reaches step 8, the last, only now
    stopper.values[(1, 4)].update(a=0.8, b=1.0)
    stopper.values[(1, 8)].update(a=0.0)
    stopper.judge_stored()
    assert study.trials[1].intermediate_values == {4: pytest.approx(0.9)} and stopper.pruned == {}
    assert stopper("tune-b", {"lg_trial_id": "b", "step": 8, "acc/digits_001": 0.0}) is False
    assert 8 not in study.trials[1].intermediate_values  # the point is scored there instead


@pytest.mark.slow  # a search under a real local Ray (pruned_search), then its queries and report
@pytest.mark.long
def test_the_analysis_leaves_pruned_trials_out_and_says_how_many(pruned_search):
    results = pruned_search["results"]
    for question in ("variance.sql", "lucky_tickets.sql"):
        outcome = runner.invoke(app, ["query", "--study", "tiny_search", "--file", question,
                                      "--results", str(results), "--format", "csv"])
        assert outcome.exit_code == 0, outcome.output
        assert "2 trials stopped early by a search's pruner (status pruned) are left out" in " ".join(outcome.output.split())
    variance = runner.invoke(app, ["query", "--study", "tiny_search", "--file", "variance.sql",
                                   "--results", str(results), "--format", "json"])
    assert {row["n_trials"] for row in json.loads(variance.stdout[variance.stdout.index("["):])} == {2}  # point 0's
    counts = runner.invoke(app, ["query", "--study", "tiny_search", "--file", "status_counts.sql",
                                 "--results", str(results), "--format", "csv"])
    assert "left out" not in counts.output and "pruned,2" in counts.output
    status = runner.invoke(app, ["status", str(pruned_search["file"]), "--results", str(results)])
    assert status.exit_code == 0 and "2 of 4 finished, 2 pruned" in status.output
    assert "1 pruned" in " ".join(status.output.split())  # of the points
    report = runner.invoke(app, ["report", "tiny_search", "--results", str(results),
                                 "--out", str(results.parent / "report")])
    assert report.exit_code == 0, report.output
    page = (results.parent / "report" / "index.html").read_text()
    assert "pruned 2" in page and "The 2 pruned trials (stopped early by the search's pruner) are left out" in page
