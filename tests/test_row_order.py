"""Every analysis output is a function of the rows, not of their order: the same trials
with their `trials` and `eval` rows shuffled give every file's output bit for bit
(sums add in a fixed order; avg() over rows as they arrive changed the last bit of
variance.sql's mean). The in-memory study has no `train` or `samples` rows, so the files
that read them (training, cascade, errors, error_checkpoints) are checked here only on
an empty table."""

from __future__ import annotations

import random

import numpy as np
import pytest
from test_analysis_sql import ANALYSIS_FILES
from test_statistics import Study, group_config, run


def study(shuffle: int | None) -> Study:
    rng = np.random.default_rng(0)
    built = Study()
    for g, w, d in ((g, w, d) for g in range(3) for w in range(4) for d in range(3)):
        built.add(group_config("fire", w, d, g),
                  {n: float(np.clip(0.5 + rng.normal(0, 0.3), 0, 1)) for n in (2, 4, 6, 8)})
    if shuffle is not None:
        order = random.Random(shuffle)
        order.shuffle(built.trials)
        order.shuffle(built.evals)
    return built


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
