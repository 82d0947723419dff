"""The end-of-run table: grouped by what the axes vary, only the run's own trials,
lengths past the training range marked with their ratio."""

from pathlib import Path

import pyarrow as pa
from rich.console import Console

from orchestrator.run_table import axis_label, run_table
from orchestrator.study import load_study

STUDIES = Path(__file__).parent / "study_files"


def _render(table) -> str:
    console = Console(width=200, record=True)
    console.print(table)
    return console.export_text()


def _row(trial_id, digits, accuracy, in_distribution=True):
    return {"trial_id": trial_id, "status": "done", "digits": digits, "in_distribution": in_distribution,
            "accuracy": accuracy}


def _rows(study, accuracy):
    return pa.Table.from_pylist([
        _row(c.trial_id, n, accuracy(c, n), c.in_distribution(n)) for c in study.trials for n in c.eval.digits
    ])


def test_groups_seeds_and_length_ratio():
    study = load_study(STUDIES / "good_two_trials.yaml")
    text = _render(run_table(study, _rows(study, lambda c, n: 0.25 * (c.seeds.weight + 1) + 0.01 * n)))
    assert "3 (1.5x)" in text  # trained on 1-2 digits: 3 is 1.5 times the longest
    assert "two_trials: exact-match accuracy by test length" in text  # one line, however narrow the table
    lines = [line for line in text.splitlines() if "done" in line]
    assert len(lines) == 2 and "w0" in lines[0] and "w1" in lines[1]
    assert "0.270" in lines[0] and "0.530" in lines[1]  # w0 at 2 digits, w1 at 3 digits


def test_only_the_runs_trials_and_missing_ones_named():
    study = load_study(STUDIES / "good_two_trials.yaml")
    other = load_study(STUDIES / "good_two_trials.yaml", "longer")  # same results folder, other profile
    stray = [_row(c.trial_id, 2, 0.999) for c in other.trials]
    first = study.trials[0]
    only_first = [_row(first.trial_id, n, 0.5) for n in first.eval.digits]
    text = _render(run_table(study, pa.Table.from_pylist([*only_first, *stray])))
    assert "0.999" not in text
    assert "not run" in text


def test_block_axis_labels():
    assert axis_label({"pe": "nope", "attention_bias": "windowed", "window": 1}) == "nope, attention_bias=windowed, window=1"
    assert axis_label([1, 4]) == "1-4" and axis_label(True) == "yes" and axis_label("rope") == "rope"


def test_numbers_are_never_cut_in_a_narrow_terminal():
    # attention_bias's CPU profile: labels of up to 80 characters and five test lengths;
    # a pipe gives rich 80 columns, and the accuracies must still print in full
    study = load_study(Path(__file__).parent.parent / "studies" / "attention_bias.yaml", "cpu")
    rows = _rows(study, lambda c, n: 0.123 + 0.001 * n)
    console = Console(width=80, record=True)
    console.print(run_table(study, rows))
    text = console.export_text()
    for n in (6, 10, 20, 30, 50):
        assert text.count(f"{0.123 + 0.001 * n:.3f}") == len(study.trials)
    assert "…" not in text
