"""Seeds until a precision target (issue 14): the `seeds.until` block of a study file,
the seeds it adds, the stopping rule on the interval the report shows, and a real
study that stops adding seeds once the target holds and, interrupted, resumes without
training any seed twice."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import mlflow
import pytest
import ray
from typer.testing import CliRunner

from analysis.query import open_results, run_query, run_sql_file, sql_file
from orchestrator.cli import app
from orchestrator.mlflow_tracking.group_runs import TRIAL_RUNS
from orchestrator.running import seed_answers, seed_target
from orchestrator.running.dispatch import run_study
from orchestrator.running.run_context import RunContext
from orchestrator.store import seed_plan
from orchestrator.store.seed_plan import ADDING, MAX_REACHED, TARGET_HELD, GroupDesign
from orchestrator.studies.config_paths import StudyError
from orchestrator.studies.seed_spec import SeedTarget
from orchestrator.studies.study import load_study
from results_contract import groups
from results_contract.experiments import default_store_uri

Z2 = 1.959963984540054**2  # z² of success.sql's 95 % level
runner = CliRunner()

# Two groups whose stopping is decided by arithmetic, not by what the models learn:
# with threshold 0 every trial succeeds, so the Wilson interval of the success share is
# [n / (n + z²), 1] and its half width z² / (2 (n + z²)) depends on n alone: 0.397 for
# one trial, 0.281 for three, 0.217 for five, against a target of 0.24. nope runs one
# weight seed with five data seeds (n = 5: the target holds at once); alibi one weight
# seed with data seed 0 only (n = 1), so it gets two more weight seeds in one round
# (step 2) and stops at max = 3 seeds with the target still unmet (n = 3).
STUDY = """\
name: until
base:
  task: {name: successor, train_digits: [1, 2]}
  model: {arch: decoder, size: tiny, pe: nope}
  train: {steps: 10, batch_size: 8, lr: 3.0e-3, warmup: 2, log_every: 5}
  eval: {digits: [2, 3], samples: 4}
axes:
  model.pe: [nope, alibi]
  seeds.data: [0, 1, 2, 3, 4]
exclude:
  - {model.pe: alibi, seeds.data: 1}
  - {model.pe: alibi, seeds.data: 2}
  - {model.pe: alibi, seeds.data: 3}
  - {model.pe: alibi, seeds.data: 4}
seeds:
  until: {metric: success, threshold: 0.0, digits: 3, half_width: 0.24, max: 3, step: 2}
resources: {cpus_per_trial: 1}
"""


def wilson_half_width(n: int) -> float:
    """Half width of the 95 % Wilson interval when all n trials succeed."""
    return Z2 / (2 * (n + Z2))


@pytest.fixture
def study_file(tmp_path: Path) -> Path:
    path = tmp_path / "until.yaml"
    path.write_text(STUDY)
    return path


# --- the study file -----------------------------------------------------------------------


UNTIL = "  until: {metric: success, threshold: 0.0, digits: 3, half_width: 0.24, max: 3, step: 2}"


@pytest.mark.parametrize(
    ("until", "field", "words"),
    [
        (
            "{metric: median, digits: 3, half_width: 0.2, max: 3}",
            "seeds.until.metric",
            "'median' is not one of mean_accuracy, success, accuracy_difference",
        ),
        (
            "{metric: success, digits: 7, half_width: 0.2, max: 3}",
            "seeds.until.digits",
            "7 is not a tested length (eval.digits: 2, 3)",
        ),
        (
            "{metric: success, digits: 3, half_width: 0.2, max: 3, most: 4}",
            "seeds.until.most",
            "unknown field; valid fields here: metric, digits, half_width, max, step, threshold, plan",
        ),
        (
            "{metric: success, digits: 3, half_width: 0, max: 3}",
            "seeds.until.half_width",
            "0 is not > 0",
        ),
    ],
)
def test_a_bad_target_names_the_file_the_field_and_the_choices(
    study_file: Path, until: str, field: str, words: str
) -> None:
    study_file.write_text(STUDY.replace(UNTIL, f"  until: {until}"))
    with pytest.raises(StudyError) as error:
        load_study(study_file)
    assert str(error.value).startswith(str(study_file))
    assert f"{field}: {words}" in str(error.value)


def test_threshold_belongs_to_success_and_a_search_has_no_target(study_file: Path) -> None:
    study_file.write_text(STUDY.replace("metric: success", "metric: mean_accuracy"))
    with pytest.raises(StudyError, match="threshold applies to metric success only"):
        load_study(study_file)
    study_file.write_text(
        "name: searched\n"
        "base: {task: {name: successor, train_digits: [1, 2]}, eval: {digits: [2, 3]}}\n"
        "search: {points: 2, metric: acc/digits_003, params: {train.lr: {low: 0.001, high: 0.01}}}\n"
        "seeds: {until: {metric: success, digits: 3, half_width: 0.2, max: 3}}\n"
    )
    with pytest.raises(StudyError, match="seeds.until: applies to grid studies only"):
        load_study(study_file)


def test_a_profile_changes_the_target(study_file: Path) -> None:
    study_file.write_text(
        STUDY + "profiles:\n  more: {seeds.until.max: 8, seeds.until.step: 1}\n"
        "  fixed: {seeds.until: null}\n"
    )
    assert load_study(study_file).spec.seeds.until.max == 3
    more = load_study(study_file, "more").spec.seeds.until
    assert (more.max, more.step, more.metric, more.threshold) == (8, 1, "success", 0.0)
    assert load_study(study_file, "fixed").spec.seeds.until is None
    study_file.write_text(STUDY + "profiles:\n  bad: {seeds.until.most: 8}\n")
    with pytest.raises(
        StudyError, match="profiles.bad.seeds.until.most: no such field of seeds.until"
    ):
        load_study(study_file)


# --- which seeds ----------------------------------------------------------------------------


def test_added_seeds_follow_the_design_with_its_data_seeds(study_file: Path) -> None:
    study = load_study(study_file)
    crossed = [c for c in study.trials if c.model.pe == "nope"][:2]  # data seeds 0 and 1
    crossed += [
        dataclasses.replace(c, seeds=dataclasses.replace(c.seeds, weight=4)) for c in crossed
    ]
    design = GroupDesign(crossed)  # weight seeds 0 and 4 x data seeds 0 and 1
    target = SeedTarget(metric="mean_accuracy", digits=3, half_width=0.1, max=6, step=3)
    assert design.rounds(target) == [2, 5, 6]
    assert design.order(6) == [0, 4, 5, 6, 7, 8]
    added = design.configs(5)[len(crossed) :]
    assert [(c.seeds.weight, c.seeds.data) for c in added] == [
        (5, 0),
        (5, 1),
        (6, 0),
        (6, 1),
        (7, 0),
        (7, 1),
    ]
    assert {groups.group_id(c) for c in design.configs(6)} == {groups.group_id(crossed[0])}
    # a round found half done is planned whole again: the seeds with rows, rounded up
    assert design.planned(target, {0, 4}) == 2
    assert design.planned(target, {0, 4, 5}) == 5
    assert design.planned(target, {0, 4, 5, 6, 7, 8}) == 6
    assert design.next_round(target, 5) == 6 and design.next_round(target, 6) == 6
    # seed planning's count: the first round that holds it, past max the last round
    assert design.next_round(target, 2, at_least=4) == 5 and design.next_round(target, 2, at_least=40) == 6


# --- the rule, on the report's interval -------------------------------------------------------


def test_states_read_the_interval_of_the_reports_sql_file(study_file: Path, tmp_path: Path, write_finished_trial) -> None:
    """mean_accuracy: variance.sql's bootstrap interval, half width (high - low) / 2."""
    study_file.write_text(
        STUDY.replace("threshold: 0.0, ", "").replace("metric: success", "metric: mean_accuracy")
    )
    study = load_study(study_file)
    nope = [c for c in study.trials if c.model.pe == "nope"]
    for config in nope:  # five trials, all at 0.5: no spread at all, and no target held on it
        write_finished_trial(tmp_path, study, config, 0.5)
    (alibi,) = [c for c in study.trials if c.model.pe == "alibi"]
    for weight, accuracy in ((0, 0.0), (1, 1.0), (2, 0.5)):
        write_finished_trial(
            tmp_path,
            study,
            dataclasses.replace(alibi, seeds=dataclasses.replace(alibi.seeds, weight=weight)),
            accuracy,
        )
    target, states = seed_answers.seed_states(tmp_path, study.name, study)
    by_pe = {s.group_label.split("/")[1]: s for s in states}
    # no spread to estimate a variance from: Wilson's interval over the five seeds, not [0.5, 0.5]
    tied = Z2 ** 0.5 / (1 + Z2 / 5) * (0.25 / 5 + Z2 / 100) ** 0.5
    assert by_pe["nope"].state == ADDING and by_pe["nope"].half_width == pytest.approx(tied)
    assert (by_pe["nope"].seeds, by_pe["nope"].trials, by_pe["nope"].estimate) == (1, 5, 0.5)
    with open_results(tmp_path, study.name) as con:
        rows = run_sql_file(con, Path(sql_file("variance.sql"))).to_pylist()
    (row,) = [r for r in rows if r["group_id"] == by_pe["alibi"].group_id and r["digits"] == 3]
    assert by_pe["alibi"].half_width == pytest.approx(
        (row["mean_high"] - row["mean_low"]) / 2
    )
    assert by_pe["alibi"].half_width > 0.24 and by_pe["alibi"].state == MAX_REACHED  # 3 seeds = max
    assert seed_plan.state_of(target, 2, by_pe["alibi"].half_width) == ADDING
    assert seed_plan.state_of(target, 2, None) == ADDING  # one trial: no interval yet


def test_a_comparison_target_reads_each_groups_widest_comparison(
    study_file: Path, tmp_path: Path, write_finished_trial
) -> None:
    """accuracy_difference: nope and alibi differ in model.pe alone, so compare.sql
    compares them; both groups' interval is that comparison's, and the target holds for
    both or for neither."""
    study_file.write_text(
        STUDY.replace("threshold: 0.0, ", "").replace("metric: success", "metric: accuracy_difference")
        .replace("half_width: 0.24", "half_width: 0.3")
    )
    study = load_study(study_file)
    for config, accuracy in zip([c for c in study.trials if c.model.pe == "nope"], (0.9, 0.8, 0.85, 0.95, 0.9)):
        write_finished_trial(tmp_path, study, config, accuracy)
    (alibi,) = [c for c in study.trials if c.model.pe == "alibi"]
    for weight, accuracy in ((0, 0.1), (1, 0.3), (2, 0.2)):
        write_finished_trial(
            tmp_path, study, dataclasses.replace(alibi, seeds=dataclasses.replace(alibi.seeds, weight=weight)), accuracy
        )
    target, states = seed_answers.seed_states(tmp_path, study.name, study)
    with open_results(tmp_path, study.name) as con:
        (row,) = [r for r in run_sql_file(con, Path(sql_file("compare.sql"))).to_pylist() if r["digits"] == 3]
    half = (row["accuracy_diff_high"] - row["accuracy_diff_low"]) / 2
    assert [s.half_width for s in states] == pytest.approx([half, half]) and row["design"] == "partly paired"
    assert {s.state for s in states} == {TARGET_HELD if half <= 0.3 else ADDING}
    assert {s.trials for s in states} == {5, 3}
    assert "widest of its comparisons" in target.words()


# --- a real study ---------------------------------------------------------------------------


def trials_by_group(results: Path) -> dict[str, list[dict]]:
    with open_results(results, "until") as con:
        rows = run_query(
            con,
            "select trial_id, group_label, weight_seed, data_seed, status, started_at "
            "from trials order by weight_seed, data_seed",
        ).to_pylist()
    found: dict[str, list[dict]] = {}
    for row in rows:
        found.setdefault(row["group_label"].split("/")[1], []).append(row)
    return found


def assert_trained_once_and_tracked(results: Path, after_first: dict[str, list[dict]]) -> None:
    """The seeds each group ended with, every trial done and trained once (each row kept
    its start time), and one finished MLflow run per trial with its group's label."""
    final = trials_by_group(results)
    assert [(r["weight_seed"], r["data_seed"]) for r in final["nope"]] == [(0, d) for d in range(5)]
    assert [(r["weight_seed"], r["data_seed"]) for r in final["alibi"]] == [(0, 0), (1, 0), (2, 0)]
    assert {r["status"] for rows in final.values() for r in rows} == {"done"}
    for name, rows in after_first.items():  # trained once: each row kept its start time
        kept = {r["trial_id"]: r["started_at"] for r in final[name]}
        assert all(kept[r["trial_id"]] == r["started_at"] for r in rows)
    client = mlflow.MlflowClient(default_store_uri(results))
    runs = client.search_runs([client.get_experiment_by_name("until").experiment_id], filter_string=TRIAL_RUNS)
    assert len(runs) == 8 and len({r.data.tags["trial_id"] for r in runs}) == 8
    assert {r.info.status for r in runs} == {"FINISHED"}
    ids = {r["trial_id"]: r for rows in final.values() for r in rows}
    assert all(
        run.data.tags["group_label"] == ids[run.data.tags["trial_id"]]["group_label"]
        for run in runs
    )


@pytest.mark.slow  # about 2 minutes on 2 shared cores: three Tune runs of 8 trials, a report
@pytest.mark.long
def test_a_real_study_stops_adding_seeds_and_resumes_without_training_twice(
    study_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    results = tmp_path / "results"
    study = load_study(study_file)
    real_round = seed_target.run_trials
    rounds: list[list[str]] = []

    def interrupted_in_round_two(round_study, *args, **kwargs):
        """The second round trains one of its two new trials, then stops as an
        interrupted Tune run does (the other never started: it has no row)."""
        rounds.append([t.trial_id for t in round_study.trials])
        if len(rounds) < 2:
            return real_round(round_study, *args, **kwargs)
        new = [t for t in round_study.trials if t.trial_id not in rounds[0]]
        kept = [t for t in round_study.trials if t.trial_id in rounds[0]] + new[:1]
        summary = real_round(dataclasses.replace(round_study, trials=kept), *args, **kwargs)
        summary.interrupted = [t.trial_id for t in new[1:]]
        return summary

    try:
        monkeypatch.setattr(seed_target, "run_trials", interrupted_in_round_two)
        first = run_study(study, RunContext(results, default_store_uri(results)))
        monkeypatch.undo()
        after_first = trials_by_group(results)
        # the nope group met its target with its design: no seed added, ever
        assert len(rounds) == 2 and len(rounds[0]) == 6 and len(rounds[1]) == 8
        assert [(r["weight_seed"], r["data_seed"]) for r in after_first["nope"]] == [
            (0, d) for d in range(5)
        ]
        assert [(r["weight_seed"], r["status"]) for r in after_first["alibi"]] == [
            (0, "done"),
            (1, "done"),
        ]
        assert len(first.interrupted) == 1 and first.ran == 7

        again = runner.invoke(app, ["run", str(study_file), "--results", str(results)])
        assert again.exit_code == 0, again.output
        words = " ".join(again.output.split())
        assert "7 of 8 trials had already finished" in words and "ran 1 trials" in words
    finally:
        ray.shutdown()

    assert_trained_once_and_tracked(results, after_first)
    target, states = seed_answers.seed_states(results, "until")  # what the run left
    by_pe = {s.group_label.split("/")[1]: s for s in states}
    assert (by_pe["nope"].state, by_pe["nope"].seeds, by_pe["nope"].trials) == (TARGET_HELD, 1, 5)
    assert by_pe["nope"].half_width == pytest.approx(wilson_half_width(5))
    assert (by_pe["alibi"].state, by_pe["alibi"].seeds, by_pe["alibi"].trials) == (
        MAX_REACHED,
        3,
        3,
    )
    assert by_pe["alibi"].half_width == pytest.approx(wilson_half_width(3))
    assert by_pe["alibi"].half_width > target.half_width

    status = runner.invoke(app, ["status", str(study_file), "--results", str(results)])
    assert status.exit_code == 0, status.output
    assert "8 of 8 finished, 0 not started" in status.output
    assert "target held" in status.output and "max reached" in status.output
    assert (
        f"{wilson_half_width(5):.3f}" in status.output
        and f"{wilson_half_width(3):.3f}" in status.output
    )
    report = runner.invoke(app, ["report", "until", "--results", str(results)])
    assert report.exit_code == 0, report.output
    page = (results / "until" / "report" / "index.html").read_text()
    assert "Seeds until a precision target" in page
    assert page.count("target held") >= 1 and page.count("max reached") >= 1


def test_with_plan_a_fitted_group_jumps_to_the_round_seed_planning_asks_for(
    study_file: Path, tmp_path: Path, write_finished_trial
) -> None:
    """A 3 x 5 pilot of nope whose weight seeds differ: planning at its 5 data seeds asks
    for more weight seeds than the next round has, and the rule grows to the first round
    that holds them; a group that cannot be fitted (alibi: one data seed) grows by step."""
    import numpy as np

    from analysis.seed_planning import PilotFit, plan

    study_file.write_text(STUDY.replace("threshold: 0.0, ", "").replace("metric: success", "metric: mean_accuracy")
                          .replace("half_width: 0.24, max: 3, step: 2", "half_width: 0.1, max: 40, step: 2, plan: true"))
    study = load_study(study_file)
    rng = np.random.default_rng(0)
    nope = [c for c in study.trials if c.model.pe == "nope"]
    for weight in range(3):
        effect = rng.normal(0, 0.15)
        for config in nope:
            moved = dataclasses.replace(config, seeds=dataclasses.replace(config.seeds, weight=weight))
            write_finished_trial(tmp_path, study, moved, float(np.clip(0.5 + effect + rng.normal(0, 0.05), 0, 1)))
    designs = seed_plan.design_groups(study.trials)
    target, states = seed_answers.seed_states(tmp_path, study.name, study)
    wanted = seed_target.planned_seeds(tmp_path, study.name, target, designs, states)
    (nope_id,) = [s.group_id for s in states if "/nope/" in s.group_label]
    assert set(wanted) == {nope_id}
    with open_results(tmp_path, study.name) as con:
        (row,) = {r["group_id"]: r for r in run_sql_file(con, Path(sql_file("lucky_tickets.sql")),
                                                           {"resamples": "2"}).to_pylist()}.values()
    expected = plan(PilotFit.from_lucky_row(row, 3), "mean_accuracy", 0.1, 5, max_weight_seeds=40)
    assert wanted[nope_id] == (expected.weight_seeds or 40) > 5
    grown = designs[nope_id].next_round(target, 3, wanted[nope_id])
    assert grown >= wanted[nope_id] and grown - 2 < max(wanted[nope_id], 5)


def test_with_plan_a_group_of_one_data_seed_is_planned_as_a_one_way_pilot(
    study_file: Path, tmp_path: Path, write_finished_trial
) -> None:
    """alibi's design holds one data seed: with 4 weight seeds measured it is a one-way
    pilot, and grows to the weight seeds one-way planning asks for at that data order."""

    from analysis.one_way_planning import OneWayFit, plan_one_way

    study_file.write_text(STUDY.replace("threshold: 0.0, ", "").replace("metric: success", "metric: mean_accuracy")
                          .replace("half_width: 0.24, max: 3, step: 2", "half_width: 0.05, max: 40, step: 2, plan: true"))
    study = load_study(study_file)
    (alibi,) = [c for c in study.trials if c.model.pe == "alibi"]
    for weight, value in enumerate((0.35, 0.6, 0.5, 0.8)):
        moved = dataclasses.replace(alibi, seeds=dataclasses.replace(alibi.seeds, weight=weight))
        write_finished_trial(tmp_path, study, moved, value)
    designs = seed_plan.design_groups(study.trials)
    target, states = seed_answers.seed_states(tmp_path, study.name, study)
    wanted = seed_target.planned_seeds(tmp_path, study.name, target, designs, states)
    (alibi_id,) = [s.group_id for s in states if "/alibi/" in s.group_label]
    with open_results(tmp_path, study.name) as con:
        (row,) = [r for r in run_sql_file(con, Path(sql_file("one_way_pilots.sql")), {"digits": "3"}).to_pylist()
                  if r["group_id"] == alibi_id and r["at_digits"] == 3]
    assert (row["varied"], row["seeds"]) == ("weight", 4)
    expected = plan_one_way(OneWayFit.from_row(row), "mean_accuracy", 0.05, max_seeds=40)
    assert wanted == {alibi_id: expected.seeds or 40}
    assert wanted[alibi_id] > 4
