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


# --- 2. carry vs no carry per answer digit ------------------------------------------------


def place_sample(idx: int, carry_in: str, wrong_places: str, digits: int, step: int = FINAL,
                 hints: bool = False, prediction: str | None = None) -> dict:
    """A question whose answer has len(carry_in) places, least significant first; with
    `hints`, each digit is written after a hint letter (so tokens = 2 x places)."""
    target = "".join(("abcdefghij"[p] if hints else "") + "1" for p in range(len(carry_in)))
    wrong = wrong_places.count("1")
    first = wrong_places.find("1")
    return {"step": step, "digits": digits, "idx": idx, "cascade": int("1" in carry_in),
            "correct": wrong == 0, "wrong_digits": 2 * wrong if hints else wrong,
            "first_wrong": None if wrong == 0 else (2 * first + 1 if hints else first),
            "target": target, "prediction": target if prediction is None else prediction,
            "carry_in": carry_in, "wrong_places": wrong_places}


def test_carry_is_classified_per_answer_digit(tmp_path: Path) -> None:
    """Every question has a carry somewhere, so a per-question split has no 'without
    carry' questions at all; per place, both kinds are there: places with a carry are
    wrong 3 times in 8, places without once in 32."""
    rng = np.random.default_rng(5)
    samples, carried, plain = [], [0, 0], [0, 0]
    for idx in range(8):
        carry = ["0"] * 5
        carry[idx % 4 + 1] = "1"
        wrong = ["0"] * 5
        if idx < 3:
            wrong[idx % 4 + 1] = "1"
        if idx == 7:
            wrong[0] = "1"
        for c, w in zip(carry, wrong):
            kind = carried if c == "1" else plain
            kind[0] += 1
            kind[1] += w == "1"
        samples.append(place_sample(idx, "".join(carry), "".join(wrong), 4))
    rng.shuffle(samples)
    write_trial(tmp_path, "carry", config("fire", 0, 0), {4: 4 / 8}, samples=samples)
    with open_results(tmp_path, "carry") as con:
        rows = {r["bucket"]: r for r in run(con, "errors") if r["facet"] == "carry"}
    assert set(rows) == {"with carry", "without carry"}
    assert (rows["with carry"]["count"], rows["with carry"]["total"]) == (carried[1], carried[0])
    assert rows["with carry"]["error_rate"] == pytest.approx(3 / 8)
    assert (rows["without carry"]["count"], rows["without carry"]["total"]) == (1, 32)
    assert rows["without carry"]["error_rate"] == pytest.approx(1 / 32)


def test_samples_written_before_the_per_place_columns_still_read(tmp_path: Path) -> None:
    """A study whose samples files lack carry_in and wrong_places (every file, then
    one old and one new file): the views read them as null and every file runs."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from orchestrator.results_store import SAMPLES_SCHEMA

    old_schema = pa.schema([f for f in SAMPLES_SCHEMA if f.name not in ("carry_in", "wrong_places")])
    old_rows = [{k: v for k, v in s.items() if k in old_schema.names}
                for s in simple_samples(6, 4)]
    tid = write_trial(tmp_path, "old", config("fire", 0, 0), {6: 0.4})
    path = tmp_path / "old" / "samples" / f"trial_id={tid}" / "part-0.parquet"
    path.parent.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist([{**r, "trial_id": tid} for r in old_rows],
                                        schema=old_schema), path)
    with open_results(tmp_path, "old") as con:
        rows = run_query(con, "select carry_in, wrong_places from samples").to_pylist()
        assert rows == [{"carry_in": None, "wrong_places": None}] * 10
        errors = run(con, "errors")
        assert {r["facet"] for r in errors} == {"ending"}  # the per-place facets need new files
        assert run(con, "error_checkpoints") == []
        assert len(run(con, "cascade")) == 2
    write_trial(tmp_path, "old", config("fire", 1, 0), {6: 0.5},
                samples=[place_sample(i, "0101000", "0000000" if i < 5 else "0100000", 6)
                         for i in range(10)])
    with open_results(tmp_path, "old") as con:
        rows = run_query(con, "select count(carry_in) as new, count(*) as all from samples").to_pylist()
        assert rows == [{"new": 10, "all": 20}]
        carry = [r for r in run(con, "errors") if r["facet"] == "carry"]
        assert {r["n_trials"] for r in carry} == {1}


def test_a_missing_carry_bucket_is_not_drawn_as_zero(tmp_path: Path, monkeypatch) -> None:
    from analysis import plots

    drawn = {}
    monkeypatch.setattr(plots, "_save", lambda fig, path: drawn.setdefault("fig", fig) and path)
    rows = [{"group_id": "g", "group_label": "g", "digits": d, "facet": "carry",
             "bucket": bucket, "error_rate": rate, "count": 1, "total": 4}
            for d, bucket, rate in ((3, "with carry", 0.25), (3, "without carry", 0.5),
                                    (5, "with carry", 0.75))]
    plots.error_by_carry(rows, tmp_path / "carry.png")
    (ax,) = [a for a in drawn["fig"].axes if a.get_visible()]
    heights = {(round(p.get_x() + p.get_width() / 2, 1)): p.get_height() for p in ax.patches}
    assert heights == {-0.2: 0.5, 0.2: 0.25, 1.2: 0.75}  # no bar at (5 digits, without carry)
    assert "n/a" in [t.get_text() for t in ax.texts]


# --- 3. error anatomy as 001 F.10-F.12 defines it -----------------------------------------


def test_error_anatomy_is_per_run_in_digits_with_near_zero_runs_left_out(tmp_path: Path) -> None:
    """Index hints: a wrong place is two wrong tokens and place k is token 2k + 1. Run A
    (accuracy 0.5) errs at places 1 and 3; run B (accuracy 0) errs at place 0 of every
    answer and at all of them in most. Positions: the mean over runs of each run's
    shares (F.10), every wrong place counted; counts: run B left out (F.11)."""
    a = [place_sample(i, "0000", "0000", 3, hints=True) for i in range(4)]
    a += [place_sample(4, "0000", "0100", 3, hints=True),
          place_sample(5, "0000", "0101", 3, hints=True),
          place_sample(6, "0000", "0001", 3, hints=True),
          place_sample(7, "0000", "0100", 3, hints=True)]
    b = [place_sample(i, "0000", "1111" if i < 6 else "1000", 3, hints=True) for i in range(8)]
    write_trial(tmp_path, "runs", config("fire", 0, 0), {3: 0.5}, samples=a)
    write_trial(tmp_path, "runs", config("fire", 1, 0), {3: 0.0}, samples=b)
    with open_results(tmp_path, "runs") as con:
        rows = run(con, "errors")
        checkpoints = run(con, "error_checkpoints")
    position = {r["bucket_value"]: r for r in rows if r["facet"] == "error_position"}
    # run A errs at places 1 | 1, 3 | 3 | 1: shares 3/5 and 2/5; run B 8 of 26 at place 0
    share_a = {1: 3 / 5, 3: 2 / 5}
    share_b = {0: 8 / 26, 1: 6 / 26, 2: 6 / 26, 3: 6 / 26}
    assert set(position) == {0, 1, 2, 3}
    for place, row in position.items():
        assert row["share_of_errors"] == pytest.approx(
            (share_a.get(place, 0) + share_b.get(place, 0)) / 2)
        assert row["n_trials"] == 2
    assert position[1]["count"] == 3 + 6
    counts = {r["bucket_value"]: r for r in rows if r["facet"] == "wrong_digits"}
    # run A alone: 3 answers with one wrong place, 1 with two; run B (accuracy 0) left out
    assert {k: r["share_of_errors"] for k, r in counts.items()} == {
        1: pytest.approx(3 / 4), 2: pytest.approx(1 / 4)}
    assert {(r["n_trials"], r["n_excluded"]) for r in counts.values()} == {(1, 1)}
    with open_results(tmp_path, "runs") as con:
        kept = {r["bucket_value"] for r in run(con, "errors", min_accuracy=0)
                if r["facet"] == "wrong_digits"}
    assert kept == {1, 2, 4}
    # per checkpoint (F.12): each run's own shares, which the average above blurs
    by_run = {}
    for r in checkpoints:
        by_run.setdefault(r["weight_seed"], {})[r["place"]] = r["share"]
    assert by_run[0] == {0: 0, 1: pytest.approx(3 / 5), 2: 0, 3: pytest.approx(2 / 5)}
    assert by_run[1] == {p: pytest.approx(s) for p, s in share_b.items()}
    assert {r["accuracy"] for r in checkpoints if r["weight_seed"] == 0} == {0.5}
