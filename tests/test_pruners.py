"""`search.pruner` (Optuna's pruners over the mean of a point's seeds) and `lg-study
replay`, which replays one over a stored or simulated search: compute saved, and
whether the best point survived, over resamples of the seeds."""

import random
from datetime import datetime, timezone
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState
from typer.testing import CliRunner

from analysis.pruner_replay import (
    PointCurves,
    SimulatedSearch,
    bootstrap,
    replay,
    replay_over,
    simulated_resamples,
)
from orchestrator.cli import app
from orchestrator.store.results_store import write_trial_table
from orchestrator.store.search_store import TRIAL_IDS
from orchestrator.studies.pruners import PRUNERS, PrunerSpec, point_value
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


def test_a_search_prunes_nothing_unless_told_and_the_field_moves_no_trial_id():
    plain = load_study(STUDY)
    assert plain.spec.search.pruner.name == "none" and not plain.spec.search.pruner.prunes
    pruned_file = STUDY.parent / "pruned_search.yaml"
    try:
        pruned_file.write_text(STUDY.read_text().replace("  repeat:", "  pruner: {name: median}\n  repeat:"))
        pruned = load_study(pruned_file)
    finally:
        pruned_file.unlink()
    assert pruned.spec.search.pruner.name == "median"
    assert pruned.config_with({"train.lr": 0.01}).trial_id == plain.config_with({"train.lr": 0.01}).trial_id
    outcome = runner.invoke(app, ["validate", str(PAPER), "--profile", "cpu"])
    assert outcome.exit_code == 0 and "pruner" not in outcome.output


def test_a_pruner_sees_the_mean_over_the_seeds():
    assert point_value([0.2, 0.4, 0.9]) == pytest.approx(0.5)


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
    points, best = resamples[0]
    assert len(points) == 20 and all(len(p.seeds) == 3 and p.steps == steps for p in points)
    nothing = replay_over(resamples, PrunerSpec().make)
    assert nothing.saved == 1.0 and nothing.kept == 3
    eager = replay_over(resamples, PrunerSpec.model_validate({"name": "median", "n_startup_trials": 2}).make)
    assert eager.saved > 1.0


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
    assert "│ 1.200 │ 5/5 │ 0.566-1.000 │ 1 │" in text


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
