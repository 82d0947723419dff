"""Every analysis output is a function of the rows, not of their order: the same trials
with their `trials`, `eval` and `samples` rows shuffled give every file's output bit for
bit (sums add in a fixed order; avg() over rows as they arrive changed the last bit of
variance.sql's mean, and, once this study had samples, of errors.sql's error rates and
shares). cascade.sql's mean over trials, which changed its last bit between two runs
over 1,000 trials (DuckDB's threads adding in another order), adds in a fixed order
too, though this small study did not show it. The in-memory study has no `train` rows,
so training.sql is checked here only on an empty table. No file may sum or average
floats in an order DuckDB's threads choose: the SQL's order-free aggregates are listed,
each with why its values add exactly."""

from __future__ import annotations

import random
import re

import numpy as np
import pytest
from analysis_rows import run
from memory_study import Study, group_config
from test_analysis_sql import ANALYSIS_FILES

from analysis.query import SKIPPED_OPTIMIZERS, analysis_connection
from analysis.sql_layers import sql_root


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


@pytest.fixture(scope="module")
def fully_optimized() -> dict[str, list[dict]]:
    """Every file's output planned by DuckDB's whole optimizer, the passes that
    analysis.query skips included."""
    with study(None).connect() as con:
        con.execute("reset disabled_optimizers")
        assert con.execute("select current_setting('disabled_optimizers')").fetchone() == ("",)
        return {name: run(con, name) for name in ANALYSIS_FILES}


@pytest.mark.parametrize("name", ANALYSIS_FILES)
def test_the_planning_passes_skipped_change_no_bit(outputs, fully_optimized, name):
    assert fully_optimized[name] == outputs[0][name]


def test_the_analysis_connections_skip_the_slow_passes():
    """Both kinds: a cursor of the process's shared database, and a database of its own."""
    for con in (analysis_connection(), study(None).connect()):
        with con:
            (skipped,) = con.execute("select current_setting('disabled_optimizers')").fetchone()
        assert set(skipped.split(",")) == set(SKIPPED_OPTIMIZERS)


@pytest.mark.parametrize("name", ANALYSIS_FILES)
def test_shuffled_rows_give_the_same_output_bit_for_bit(outputs, name):
    reference = outputs[0][name]
    for shuffled in outputs[1:]:
        assert shuffled[name] == reference


#: order-free aggregates: DuckDB's threads hand their partial results over in no fixed
#: order, so over floats these give last bits that vary from run to run (success.sql's
#: expected best-of-N did, in 6 of 8 runs over 10,000 trials); a sum in a fixed order is
#: list_sum(list(x order by key)), and likewise list_avg
ORDER_FREE = re.compile(r"(?<![\w.])(sum|avg|mean|fsum|favg|sumkahan|kahan_sum|product|stddev|stddev_samp|stddev_pop"
                        r"|variance|var_samp|var_pop|covar_samp|covar_pop|corr|regr_\w+)\s*\(", re.IGNORECASE)
#: the order-free aggregates the SQL keeps, by file: each adds values that add exactly
#: (integers, or integer-valued doubles; multiples of 1/2 and their squares far below 2^53)
EXACT = {
    "cascade.sql": ["questions", "correct", "cells.questions"],
    "error_checkpoints.sql": ["correct::int", "coalesce(wrong_counts.wrong, 0)"],
    "errors.sql": ["correct::int", "count(*)", "count(*)", "count(*)", "count", "share_trials.count"],
    "grid.sql": ["n"],
    "errors_carry.sql": ["bit_count(carry_bits)", "bit_count(wrong_bits & carry_bits)", "length(wrong_places)",
                         "n_wrong_places", "wrong", "places"],
    "seed_concordance.sql": ["rank", "t ^ 3 - t", "(rank_sums.rank_sum - crossed.b * (crossed.a + 1) / 2.0) ^ 2"],
}


def order_free_arguments(sql: str) -> list[str]:
    """The argument of each order-free aggregate in ``sql``, comments left out."""
    code = re.sub(r"--[^\n]*|/\*.*?\*/", "", sql, flags=re.DOTALL)
    arguments = []
    for call in ORDER_FREE.finditer(code):
        depth, start = 1, call.end()
        end = start
        while depth:
            depth += {"(": 1, ")": -1}.get(code[end], 0)
            end += 1
        arguments.append(" ".join(code[start:end - 1].split()))
    return arguments


def test_every_order_free_aggregate_adds_exact_values():
    """A float summed by sum() or avg() would give other last bits on another run; a
    new one must add in a fixed order or be listed in EXACT with why it is exact."""
    found = {path.name: arguments for path in sorted(sql_root().rglob("*.sql"))
             if (arguments := order_free_arguments(path.read_text()))}
    assert found == EXACT


def test_the_aggregate_finder_sees_calls_and_skips_comments_and_ordered_lists():
    sql = "select sum(a * (b + 1)), avg( x ), list_sum(list(y order by k)) -- sum(z)\n/* avg(w) */ from t"
    assert order_free_arguments(sql) == ["a * (b + 1)", "x"]
