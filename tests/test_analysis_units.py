"""Units, definitions and coverage of the analysis SQL files (issue 17), each on
synthetic Parquet with a known answer: what one interval's unit is, what an error
position counts, which trials and groups a file leaves out and says so, and that the
same configuration in two studies is not counted twice per row."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from test_analysis_sql import FINAL, LENGTHS, config, run, write_trial

from analysis.query import open_results, run_query

# --- 5. no row multiplication across studies ---------------------------------------------


def simple_samples(d: int, right: int, n: int = 10) -> list[dict]:
    """n questions of length d at the final step, the first `right` of them right."""
    return [{"step": FINAL, "digits": d, "idx": i, "cascade": i % 2, "correct": i < right,
             "wrong_digits": 0 if i < right else 1, "first_wrong": None if i < right else 0,
             "target": "1" * (d + 1), "prediction": "1" * (d + 1)} for i in range(n)]


def test_the_same_trials_in_two_studies_count_once_per_study(tmp_path: Path) -> None:
    """20 trials of one configuration, their files copied into a second study: over
    every study, each (study, trial) is one trial, not one per matching row."""
    accuracy = {w: 0.05 * w for w in range(20)}
    for w, acc in accuracy.items():
        write_trial(tmp_path, "first", config("rope", w, 0), {d: acc for d in LENGTHS},
                    samples=simple_samples(6, w % 10))
    shutil.copytree(tmp_path / "first", tmp_path / "copy")
    values = np.array(list(accuracy.values()) * 2)
    with open_results(tmp_path) as con:
        assert run_query(con, "select count(*) from groups").to_pylist() == [{"count_star()": 40}]
        studies = run_query(con, "select distinct study from eval order by 1").to_pylist()
        assert [r["study"] for r in studies] == ["copy", "first"]
        variance = run(con, "variance")
        assert {r["n_trials"] for r in variance} == {40}
        row = next(r for r in variance if r["digits"] == 6)
        half = (row["ci95_t_high"] - row["ci95_t_low"]) / 2
        assert row["mean"] == pytest.approx(values.mean())
        # 39 degrees of freedom: the Cornish-Fisher series, close to t(0.975, 32) here
        assert half == pytest.approx(2.0226909 * values.std(ddof=1) / np.sqrt(40), rel=1e-5)
        assert len(run(con, "final_accuracy")) == 40 * len(LENGTHS)
        assert len(run(con, "training")) == 40 * 2 * len(LENGTHS)
        assert {r["n_trials"] for r in run(con, "cascade")} == {40}
        rows = run_query(con, "select count(*) as n from final_eval").to_pylist()
        assert rows == [{"n": 40 * len(LENGTHS)}]
    with open_results(tmp_path, "copy") as con:  # one study alone is unchanged
        assert {r["n_trials"] for r in run(con, "variance")} == {20}


# --- 1. cascade intervals: the trial is the unit ------------------------------------------


def wilson(k: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def cascade_samples(right: list[int], n: int, d: int = 3, cascade: int = 1) -> list[dict]:
    return [{"step": FINAL, "digits": d, "idx": i, "cascade": cascade, "correct": i < right_,
             "wrong_digits": 0, "first_wrong": None, "target": "1234", "prediction": "1234"}
            for right_ in right for i in range(n)]


def test_cascade_interval_resamples_trials_not_questions(tmp_path: Path) -> None:
    """The quickstart case: two seeds answer the same 149 cascade-1 questions, one gets
    145 right and the other 1. Pooled, 146/298 = 0.490 with a Wilson interval of
    [0.434, 0.546]; the seeds disagree far beyond it, so the interval must be over
    trials, and each trial keeps its own Wilson interval."""
    for w, right in enumerate((145, 1)):
        write_trial(tmp_path, "two", config("fire", w, 0), {3: right / 149},
                    samples=cascade_samples([right], 149))
    with open_results(tmp_path, "two") as con:
        (row,) = run(con, "cascade")
    assert (row["n_trials"], row["questions"], row["correct"]) == (2, 298, 146)
    assert row["accuracy"] == pytest.approx((145 / 149 + 1 / 149) / 2)
    assert row["trial_accuracies"] == pytest.approx([145 / 149, 1 / 149])
    # the bootstrap means of two trials are 1/149, 73/149, 145/149 with chances 1/4, 1/2,
    # 1/4: the 2.5 and 97.5 % points are the two trials themselves
    assert row["boot95_low"] == pytest.approx(1 / 149)
    assert row["boot95_high"] == pytest.approx(145 / 149)
    for trial, right in zip(row["trials"], (145, 1)):
        assert (trial["questions"], trial["correct"]) == (149, right)
        low, high = wilson(right, 149)
        assert (trial["wilson95_low"], trial["wilson95_high"]) == (
            pytest.approx(low, abs=1e-12), pytest.approx(high, abs=1e-12))
    assert row["resamples"] == 1000


def test_cascade_bootstrap_matches_numpy(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    right = [int(r) for r in rng.integers(0, 41, size=7)]
    for w, k in enumerate(right):
        write_trial(tmp_path, "seven", config("fire", w, 0), {3: k / 40},
                    samples=cascade_samples([k], 40))
    with open_results(tmp_path, "seven") as con:
        (row,) = run(con, "cascade", resamples=4000)
    acc = np.array(right) / 40
    means = acc[rng.integers(0, len(acc), size=(100_000, len(acc)))].mean(axis=1)
    assert row["accuracy"] == pytest.approx(acc.mean())
    assert row["boot95_low"] == pytest.approx(np.quantile(means, 0.025), abs=0.015)
    assert row["boot95_high"] == pytest.approx(np.quantile(means, 0.975), abs=0.015)
    with open_results(tmp_path, "seven") as con:
        again = run(con, "cascade", resamples=4000)[0]
    assert (again["boot95_low"], again["boot95_high"]) == (row["boot95_low"], row["boot95_high"])
