"""Every analysis output is a function of the rows, not of their order: the same trials
with their `trials`, `eval` and `samples` rows shuffled give every file's output bit for
bit (sums add in a fixed order; avg() over rows as they arrive changed the last bit of
variance.sql's mean, and, once this study had samples, of errors.sql's error rates and
shares). cascade.sql's mean over trials, which changed its last bit between two runs
over 1,000 trials (DuckDB's threads adding in another order), adds in a fixed order
too, though this small study did not show it. The in-memory study has no `train` rows,
so training.sql is checked here only on an empty table."""

from __future__ import annotations

import random

import numpy as np
import pytest
from analysis_rows import run
from memory_study import Study, group_config
from test_analysis_sql import ANALYSIS_FILES


def study(shuffle: int | None) -> Study:
    rng = np.random.default_rng(0)
    built = Study()
    for g, w, d in ((g, w, d) for g in range(3) for w in range(4) for d in range(3)):
        built.add(group_config("fire", w, d, g),
                  {n: float(np.clip(0.5 + rng.normal(0, 0.3), 0, 1)) for n in (2, 4, 6, 8)})
        built.samples += samples(built.trials[-1]["trial_id"], rng)
    if shuffle is not None:
        order = random.Random(shuffle)
        order.shuffle(built.trials)
        order.shuffle(built.evals)
        order.shuffle(built.samples)
    return built


def samples(trial_id: str, rng: np.random.Generator, questions: int = 12) -> list[dict]:
    """The trial's answers at its final step: 12 questions each at 2 and 8 digits, in
    three carry cascades, right at random, wrong answers with one wrong place."""
    rows = []
    for digits in (2, 8):
        for idx in range(questions):
            right = bool(rng.random() < 0.6)
            wrong = "0" * (digits + 1) if right else "0" * (idx % (digits + 1)) + "1" + "0" * (digits - idx % (digits + 1))
            rows.append({"study": "sim", "trial_id": trial_id, "step": 100, "digits": digits, "idx": idx,
                         "cascade": idx % 3, "correct": right, "wrong_digits": 0 if right else 1,
                         "first_wrong": None if right else idx % (digits + 1), "target": "1" * (digits + 1),
                         "prediction": "1" * (digits + 1), "carry_in": "01" * (digits // 2) + "0" * (digits % 2 + 1),
                         "wrong_places": wrong})
    return rows


@pytest.fixture(scope="module")
def outputs() -> list[dict[str, list[dict]]]:
    results = []
    for shuffle in (None, 1, 2):
        with study(shuffle).connect() as con:
            results.append({name: run(con, name) for name in ANALYSIS_FILES})
    return results


@pytest.mark.parametrize("name", ANALYSIS_FILES)
def test_shuffled_rows_give_the_same_output_bit_for_bit(outputs, name):
    reference = outputs[0][name]
    for shuffled in outputs[1:]:
        assert shuffled[name] == reference
