"""The end-of-run table (`lg-study run`, and `lg-study status`): grouped by what the axes
vary, only the run's own trials, lengths past the training range marked with their
ratio; a group of many seed pairs summarised by variance.sql's and success.sql's
numbers, a small one listed, every one with --all; a seeds-until study's every seed and
why each group stopped. Synthetic stores, no Ray."""

from __future__ import annotations

import dataclasses
import io
import re
from datetime import datetime, timezone
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from analysis.query import open_results, run_sql_file, sql_file
from orchestrator.cli import app
from orchestrator.console.run_table import (
    measured,
    read_summary,
    study_layout,
    summary_table,
)
from orchestrator.running.run_context import RunSummary
from orchestrator.store.results_store import write_trial_table
from orchestrator.store.trial_rows import trials_row
from orchestrator.studies.study import load_study
from results_contract.groups import group_id

STUDIES = Path(__file__).parent / "study_files"
STARTED = datetime(2025, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
runner = CliRunner()

# one group of 12 x 10 seed pairs (nope) and one of 2 x 2 (alibi), tested at 2 (in
# range), 3 and 4 digits
MANY = "\n".join([
    "name: many",
    "base:",
    "  task: {name: successor, train_digits: [1, 2]}",
    "  model: {arch: decoder, size: tiny, pe: nope}",
    "  train: {steps: 10, batch_size: 8, lr: 3.0e-3, warmup: 2, log_every: 5}",
    "  eval: {digits: [2, 3, 4], samples: 4}",
    "axes:",
    "  model.pe: [nope, alibi]",
    f"  seeds.weight: {list(range(12))}",
    f"  seeds.data: {list(range(10))}",
    "exclude:",
    *(f"  - {{model.pe: alibi, seeds.weight: {w}}}" for w in range(2, 12)),
    *(f"  - {{model.pe: alibi, seeds.data: {d}}}" for d in range(2, 10)),
    "",
])


def accuracy(config, digits: int) -> float:
    """Spread over the seeds, near 1 in range; weight seed 5 with data seed 7 the best."""
    if digits == 2:
        return 1.0
    w, d = config.seeds.weight, config.seeds.data
    if (w, d) == (5, 7):
        return 0.999
    return round(((w * 7 + d * 3) % 23) / 25 / (digits - 2), 3)


def write(root: Path, study, config, status: str = "done", value=accuracy) -> None:
    row = trials_row(study.name, config, status, "cpu", STARTED, group_label=study.group_label(config))
    write_trial_table(root, study.name, "trials", config.trial_id, [row])
    write_trial_table(root, study.name, "eval", config.trial_id, [
        {"step": 10, "digits": n, "n": 4, "correct": 0, "accuracy": value(config, n),
         "in_distribution": config.in_distribution(n)} for n in config.eval.digits])


def render(tables, width: int = 200) -> str:
    console = Console(width=width, record=True, file=io.StringIO())
    for table in tables if isinstance(tables, list) else [tables]:
        console.print(table)
    return console.export_text()


def words(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture(scope="module")
def many(tmp_path_factory: pytest.TempPathFactory):
    """The 124-trial store, written once: (results root, study file, study)."""
    folder = tmp_path_factory.mktemp("many")
    path = folder / "many.yaml"
    path.write_text(MANY)
    study = load_study(path)
    for config in study.trials:
        write(folder / "results", study, config)
    return folder / "results", path, study


def variance_rows(root: Path, name: str) -> dict:
    with open_results(root, name) as con:
        rows = run_sql_file(con, sql_file("variance.sql"), {"resamples": "0"}).to_pylist()
    return {(r["group_id"], r["digits"]): r for r in rows}


def rows_of(text: str, label: str) -> list[list[str]]:
    """The length and status cells of every table line whose seeds cell is ``label``."""
    return [cells[cells.index(label) + 1:] for line in text.splitlines()
            if label in (cells := [c.strip() for c in re.split(r"[│┃]", line)])]


def row_of(text: str, label: str) -> list[str]:
    """The cells of the first table line whose seeds cell is ``label``."""
    for line in text.splitlines():
        cells = [c.strip() for c in re.split(r"[│┃]", line)]
        if label in cells:
            return cells
    raise AssertionError(f"no row {label!r} in\n{text}")


# --- a large group summarised, a small one listed -------------------------------------------


def test_a_large_group_is_summarised_with_the_numbers_of_variance_sql(many) -> None:
    root, _, study = many
    text = render(read_summary(root, study.name, study).tables())
    assert len(text.splitlines()) < 40  # 124 trials, not 124 rows
    nope = group_id(study.trials[0])
    truth = variance_rows(root, study.name)
    assert "120 seed pairs" in text and "120 done" in text
    for label, column in (("mean", "mean"), ("95% CI low", "mean_low"), ("95% CI high", "mean_high"),
                          ("min", "min"), ("max", "max")):
        assert rows_of(text, label)[0][:3] == [f"{truth[(nope, n)][column]:.3f}" for n in (2, 3, 4)], label
    assert {truth[(nope, n)]["n_trials"] for n in (2, 3, 4)} == {120}
    # the share that reaches 0.9: 120 in range; out of range only w5 d7 (0.999)
    assert ">= 0.9" in text and "120/120" in row_of(text, ">= 0.9") and "1/120" in row_of(text, ">= 0.9")
    best = row_of(text, "best w5 d7")
    assert truth[(nope, 3)]["best_trial_id"] == next(
        c.trial_id for c in study.trials if (c.model.pe, c.seeds.weight, c.seeds.data) == ("nope", 5, 7))
    assert "0.999" in best
    # the small group lists its four seed pairs, then its mean and interval
    for label in ("w0 d0", "w0 d1", "w1 d0", "w1 d1"):
        assert "done" in row_of(text, label)
    assert "3 (1.5x)" in text and "4 (2.0x)" in text
    assert "--all lists them" in words(text)


def test_all_lists_every_seed_pair(many) -> None:
    root, _, study = many
    text = render(read_summary(root, study.name, study).tables(show_all=True))
    listed = [line for line in text.splitlines() if "done" in [c.strip() for c in line.split("│")]]
    assert len(listed) == 124
    assert "120 seed pairs" not in text and "best w5 d7" in text  # the summary below the pairs


def test_readable_in_an_80_column_pipe(many) -> None:
    root, _, study = many
    text = render(read_summary(root, study.name, study).tables(), width=80)
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "…" not in text
    truth = variance_rows(root, study.name)[(group_id(study.trials[0]), 3)]
    assert f"{truth['mean_low']:.3f}" in row_of(text, "95% CI low") and "0.999" in row_of(text, "best w5 d7")


def test_status_prints_the_same_summary_by_file_and_by_name(many, monkeypatch: pytest.MonkeyPatch) -> None:
    root, path, study = many
    expected = render(read_summary(root, study.name, study).tables(), width=160)
    by_file = runner.invoke(app, ["status", str(path), "--results", str(root)])
    assert by_file.exit_code == 0, by_file.output
    assert "124 of 124 finished" in by_file.output
    for label in ("mean", "95% CI low", "95% CI high", ">= 0.9", "best w5 d7"):
        assert rows_of(expected, label) == rows_of(by_file.output, label)
    by_name = runner.invoke(app, ["status", "many", "--results", str(root)])
    assert by_name.exit_code == 0, by_name.output
    for label in ("mean", "95% CI low", "95% CI high", ">= 0.9", "best w5 d7"):  # the groups in label order
        assert sorted(rows_of(expected, label)) == sorted(rows_of(by_name.output, label))
    assert "120 seed pairs" in by_name.output and "w1 d1" in by_name.output


def test_status_writes_the_summary_rows_as_csv(many) -> None:
    root, path, study = many
    outcome = runner.invoke(app, ["status", str(path), "--results", str(root), "--format", "json"])
    assert outcome.exit_code == 0, outcome.output
    import json

    rows = json.loads(outcome.stdout)
    truth = variance_rows(root, study.name)
    assert len(rows) == 2 * 3
    for row in rows:
        assert (row["mean_low"], row["mean_high"]) == pytest.approx(
            (truth[(row["group_id"], row["digits"])]["mean_low"], truth[(row["group_id"], row["digits"])]["mean_high"]))
    # one label everywhere: the group column is the short label the report and the MLflow run
    # names give (the settings that tell the groups apart), group_label the trials rows' full one
    labels = {study.group_label(c).split("/")[1]: study.group_label(c) for c in study.trials}
    assert {(r["group"], r["group_label"], r["seed_pairs"]) for r in rows} == {
        ("nope", labels["nope"], 120), ("alibi", labels["alibi"], 4)}
    assert {study.short_label(c) for c in study.trials} == {"nope", "alibi"}
    assert {r["best"] for r in rows if r["group"] == "nope"} == {"w5 d7 p0"}


# --- bad input ------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["csv", "json", "markdown"])
def test_all_with_a_file_format_is_refused_naming_it(many, value: str) -> None:
    root, path, _ = many
    outcome = runner.invoke(app, ["status", str(path), "--results", str(root), "--all", "--format", value])
    assert outcome.exit_code == 2
    assert f"--format {value}" in words(outcome.output) and "--all" in outcome.output


def test_a_format_status_cannot_write_is_refused_listing_the_choices(many) -> None:
    root, path, _ = many
    outcome = runner.invoke(app, ["status", str(path), "--results", str(root), "--format", "parquet"])
    assert outcome.exit_code == 2
    assert "parquet" in outcome.output and all(c in outcome.output for c in ("table", "csv", "json", "markdown"))


def test_all_for_a_search_is_refused_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "searched.yaml"
    path.write_text("name: searched\nbase: {task: {name: successor, train_digits: [1, 2]}, eval: {digits: [2, 3]}}\n"
                    "search: {points: 2, metric: acc/digits_003, params: {train.lr: {low: 0.001, high: 0.01}}}\n")
    for command in (["run", str(path), "--all"], ["status", str(path), "--all"]):
        outcome = runner.invoke(app, [*command, "--results", str(tmp_path / "results")])
        assert outcome.exit_code == 2, outcome.output
        assert "--all" in outcome.output and "searched.yaml is a search" in words(outcome.output)


# --- the run's own trials -------------------------------------------------------------------


def test_groups_seeds_and_length_ratio(tmp_path: Path) -> None:
    study = load_study(STUDIES / "good_two_trials.yaml")
    for config in study.trials:
        write(tmp_path, study, config, value=lambda c, n: 0.25 * (c.seeds.weight + 1) + 0.01 * n)
    text = render(read_summary(tmp_path, study.name, study).tables())
    assert "3 (1.5x)" in text  # trained on 1-2 digits: 3 is 1.5 times the longest
    assert "two_trials: exact-match accuracy by test length" in text  # one line, however narrow the table
    assert "0.270" in row_of(text, "w0") and "0.530" in row_of(text, "w1")  # w0 at 2 digits, w1 at 3 digits
    assert rows_of(text, "mean") == [["0.395", "0.405", "", ""]]  # (0.27 + 0.52) / 2, (0.28 + 0.53) / 2


def test_only_the_runs_trials_and_missing_ones_named(tmp_path: Path) -> None:
    study = load_study(STUDIES / "good_two_trials.yaml")
    other = load_study(STUDIES / "good_two_trials.yaml", "longer")  # in the same folder, as before profiles
    for config in other.trials:
        write(tmp_path, study, config, value=lambda c, n: 0.999)
    write(tmp_path, study, study.trials[0], value=lambda c, n: 0.5)
    text = render(read_summary(tmp_path, study.name, study).tables())
    assert "0.999" not in text  # neither listed nor in the mean, min - max or best
    assert "not run" in row_of(text, "w1") and "0.500" in row_of(text, "mean")


def test_run_prints_the_summary_and_all_lists_every_pair(many, monkeypatch: pytest.MonkeyPatch) -> None:
    """`run`'s table after its trials (run_study stands in: they are in the store)."""
    root, path, _ = many
    import orchestrator.running.dispatch

    monkeypatch.setattr(orchestrator.running.dispatch, "run_study",
                        lambda study, *args, **kwargs: RunSummary(total=len(study.trials), skipped=len(study.trials)))
    summary = runner.invoke(app, ["run", str(path), "--results", str(root), "--verbose"])
    assert summary.exit_code == 0, summary.output
    assert "120 seed pairs" in summary.output and "w0 d0" in summary.output
    every = runner.invoke(app, ["run", str(path), "--results", str(root), "--verbose", "--all"])
    assert every.exit_code == 0, every.output
    assert "120 seed pairs" not in every.output and "w11 d9" in every.output


def test_numbers_are_never_cut_in_a_narrow_terminal():
    # attention_bias's CPU profile: labels of up to 80 characters and five test lengths;
    # a pipe gives rich 80 columns, and the accuracies must still print in full
    study = load_study(Path(__file__).parent.parent / "studies" / "attention_bias.yaml", "cpu")
    listed = [{"trial_id": c.trial_id, "status": "done", "group_id": group_id(c)} for c in study.trials]
    accuracies = [{"trial_id": c.trial_id, "digits": n, "in_distribution": c.in_distribution(n),
                   "accuracy": 0.123 + 0.001 * n} for c in study.trials for n in c.eval.digits]
    text = render(summary_table(study_layout(study, study.trials), measured(listed, accuracies, [], [])), width=80)
    for n in (6, 10, 20, 30, 50):
        assert text.count(f"{0.123 + 0.001 * n:.3f}") == len(study.trials)
    assert "…" not in text


# --- seeds until a target -------------------------------------------------------------------

UNTIL = """\
name: until
base:
  task: {name: successor, train_digits: [1, 2]}
  model: {arch: decoder, size: tiny, pe: nope}
  train: {steps: 10, batch_size: 8, lr: 3.0e-3, warmup: 2, log_every: 5}
  eval: {digits: [2, 3], samples: 4}
axes:
  model.pe: [nope, alibi]
  seeds.weight: [0, 1]
seeds:
  until: {metric: mean_accuracy, digits: 3, half_width: 0.05, max: 6, step: 2}
"""


def test_a_seeds_until_study_shows_every_seed_trained_and_why_it_stopped(tmp_path: Path) -> None:
    """nope: trials at 0.500 and 0.502, the target holds with the design's two seeds; alibi
    spread out: four seeds added, stopped at max = 6 with the target unmet."""
    path = tmp_path / "until.yaml"
    path.write_text(UNTIL)
    study = load_study(path)
    root = tmp_path / "results"
    for config in study.trials:
        write(root, study, config, value=lambda c, n: 0.5 + 0.002 * c.seeds.weight if c.model.pe == "nope" else 0.1)
    (alibi,) = [c for c in study.trials if c.model.pe == "alibi" and c.seeds.weight == 0]
    for weight in range(2, 6):
        added = dataclasses.replace(alibi, seeds=dataclasses.replace(alibi.seeds, weight=weight))
        write(root, study, added, value=lambda c, n: 0.1 + 0.15 * c.seeds.weight)
    text = render(read_summary(root, study.name, study).tables())
    for weight in range(6):
        assert "done" in row_of(text, f"w{weight}")
    assert "0.850" in row_of(text, "w5")  # an added seed's accuracy at 3 digits
    said = words(text)
    assert "seeds until the interval of mean_accuracy at 3 digits" in said and "half width <= 0.05" in said
    (nope,) = [c for c in study.trials if c.model.pe == "nope" and c.seeds.weight == 0]
    held = variance_rows(root, study.name)[(group_id(nope), 3)]
    assert (held["mean_high"] - held["mean_low"]) / 2 < 0.05
    assert re.search(rf"│ nope +│ 2 +│ {held['mean_low']:.3f} - {held['mean_high']:.3f} +│ +"
                     rf"{(held['mean_high'] - held['mean_low']) / 2:.3f} │ target held: half width <= 0\.05 +│", text)
    half = variance_rows(root, study.name)[(group_id(alibi), 3)]
    half = (half["mean_high"] - half["mean_low"]) / 2
    assert re.search(rf"│ alibi +│ 6 \(4 added\) +│ [0-9. -]+ +│ +{half:.3f} │ max reached: 6 weight seeds, half width "
                     r"> 0\.05 +│", text)
    status = runner.invoke(app, ["status", "until", "--results", str(root)])  # by name: what the run left
    assert status.exit_code == 0 and "max reached" not in status.output  # no run left a target
    by_file = runner.invoke(app, ["status", str(path), "--results", str(root)])
    assert by_file.exit_code == 0, by_file.output
    assert "6 (4 added)" in by_file.output and "w5" in by_file.output and "target held" in by_file.output


def test_trials_at_a_checkpoint_chosen_on_long_lengths_are_said_so_under_the_table():
    from orchestrator.console.run_table import Layout, _caption, measured

    listed = [{"trial_id": t, "group_id": "g", "status": "done"} for t in ("a", "b")]
    rows = [{"trial_id": "a", "digits": 5, "in_distribution": False, "accuracy": 0.5, "checkpoint": "final"},
            {"trial_id": "b", "digits": 5, "in_distribution": False, "accuracy": 0.7,
             "checkpoint": "lowest long-length loss"}]
    results = measured(listed, rows, [], [])
    assert results.chosen == {"b"}
    layout = Layout("t", [], {}, {}, {(1, 3)})
    assert "1 trials show the checkpoint of their lowest long-length validation loss" in _caption(
        layout, {3}, results, [], False)
    assert "long-length" not in _caption(layout, {3}, measured(listed, rows[:1], [], []), [], False)
