"""The names of a trial's metrics, and the metrics of its rows by those names.

The names are those of the MLflow runs and of a search's `search.metric`:

- `loss`, `lr`: from a `train` row;
- `acc/digits_NNN`: the accuracy (0..1) at NNN digits in an `eval` row, three digits
  wide so that the names sort by length;
- `summary/KEY`: lengthgen.evaluation.summarize over the `eval` rows of one step
  (`summary/in_distribution_accuracy`, `summary/ood_accuracy_mean`, `summary/longest_99`);
- `long_loss`: the loss on the long-length validation set of eval.select best_long_loss,
  at each evaluation.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import fields
from typing import Any

from lengthgen import TrialConfig
from lengthgen.evaluation import LengthResult, summarize

LOSS, LR, LONG_LOSS = "loss", "lr", "long_loss"
ACCURACY_PREFIX = "acc/digits_"
SUMMARY_PREFIX = "summary/"


def accuracy_name(digits: int) -> str:
    """``acc/digits_050`` for 50 digits."""
    return f"{ACCURACY_PREFIX}{digits:03d}"


def length_metric(name: str, digits: int) -> str:
    """``mean/digits_050``: a configuration group's number ``name`` at 50 digits, on its
    MLflow parent run (orchestrator.running.group_answers), as wide as accuracy_name."""
    return f"{name}/digits_{digits:03d}"


def summary_name(key: str) -> str:
    return f"{SUMMARY_PREFIX}{key}"


def digits_of(name: str) -> int | None:
    """The length an accuracy metric is of (50 for ``acc/digits_050``); None for
    any other name."""
    number = name.removeprefix(ACCURACY_PREFIX)
    return int(number) if number != name and number.isdigit() else None


def train_metrics(row: Mapping[str, Any]) -> dict[str, float]:
    """The metrics of one `train` row (or lengthgen TrainLog as a dict)."""
    return {LOSS: row["loss"], LR: row["lr"]}


def eval_metrics(results: Iterable[LengthResult]) -> dict[str, float]:
    """The metrics of one evaluation: the accuracy at each length, then its summary."""
    results = list(results)
    metrics = {accuracy_name(r.digits): r.accuracy for r in results}
    metrics.update({summary_name(k): v for k, v in summarize(results).items()})
    return metrics


def length_results(rows: Iterable[Mapping[str, Any]]) -> list[LengthResult]:
    """`eval` rows (of one step) as lengthgen's LengthResult."""
    names = [f.name for f in fields(LengthResult)]
    return [LengthResult(**{name: row[name] for name in names}) for row in rows]


def metric_names(config: TrialConfig) -> list[str]:
    """The metrics a trial of ``config`` has at its final evaluation that have a value:
    the accuracy at each test length, and the summary metrics (the out-of-distribution
    mean needs a length outside the training range, the in-distribution one a length
    inside it)."""
    results = [LengthResult(d, 1, 1, 1.0, config.in_distribution(d)) for d in config.eval.digits]
    return [name for name, value in eval_metrics(results).items() if not math.isnan(value)]
