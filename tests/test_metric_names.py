"""Metric names: built and parsed in one module (orchestrator.studies.metric_names), and the
metrics of a trial's rows by those names."""

from __future__ import annotations

import math

import pytest

from lengthgen.config import EvalConfig, TaskConfig, TrialConfig
from lengthgen.evaluation import LengthResult, summarize
from orchestrator.studies import metric_names as names


@pytest.mark.parametrize("digits", [1, 50, 999])
def test_an_accuracy_name_parses_back_to_its_length(digits: int) -> None:
    assert names.digits_of(names.accuracy_name(digits)) == digits


def test_names_sort_by_length_and_other_names_have_none() -> None:
    assert names.accuracy_name(50) == "acc/digits_050"
    assert sorted(map(names.accuracy_name, (100, 9, 20))) == [
        "acc/digits_009", "acc/digits_020", "acc/digits_100"]
    for other in ("loss", "summary/longest_99", "acc/digits_", "acc/digits_x1"):
        assert names.digits_of(other) is None


def test_eval_metrics_of_rows_are_the_accuracies_and_their_summary() -> None:
    rows = [{"step": 9, "digits": 2, "n": 4, "correct": 4, "accuracy": 1.0, "in_distribution": True},
            {"step": 9, "digits": 5, "n": 4, "correct": 1, "accuracy": 0.25, "in_distribution": False}]
    results = names.length_results(rows)
    assert results == [LengthResult(2, 4, 4, 1.0, True), LengthResult(5, 4, 1, 0.25, False)]
    metrics = names.eval_metrics(results)
    assert metrics == {"acc/digits_002": 1.0, "acc/digits_005": 0.25,
                       **{f"summary/{k}": v for k, v in summarize(results).items()}}


def test_metric_names_of_a_config_have_values() -> None:
    inside = TrialConfig(task=TaskConfig(name="successor", train_digits=(1, 3)),
                         eval=EvalConfig(digits=(2, 3), samples=4))
    assert names.metric_names(inside) == [
        "acc/digits_002", "acc/digits_003", "summary/in_distribution_accuracy", "summary/longest_99"]
    # no length outside 1-3 digits: the out-of-distribution mean has no value
    results = [LengthResult(d, 1, 1, 1.0, True) for d in (2, 3)]
    assert math.isnan(names.eval_metrics(results)["summary/ood_accuracy_mean"])
