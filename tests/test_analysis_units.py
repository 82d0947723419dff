"""Units, definitions and coverage of the analysis SQL files (issue 17), each on
synthetic Parquet with a known answer: what one interval's unit is, what an error
position counts, which trials and groups a file leaves out and says so, and that the
same configuration in two studies is not counted twice per row."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from analysis_rows import FINAL, LENGTHS, config, run, trial_id, write_trial

from analysis.mean_interval import wilson_bounds
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
        variance = run(con, "variance")
        assert {r["n_trials"] for r in variance} == {40}  # joined on trial_id alone: 160
        assert run_query(con, "select count(*) from groups").to_pylist() == [{"count_star()": 40}]
        studies = run_query(con, "select distinct study from eval order by 1").to_pylist()
        assert [r["study"] for r in studies] == ["copy", "first"]
        row = next(r for r in variance if r["digits"] == 6)
        assert row["mean"] == pytest.approx(values.mean())
        # the bootstrap of 40 trials (160 would halve the width): numpy's from 100,000
        # replicates; 1,000 replicates put about 0.01 of Monte Carlo error on each end
        rng = np.random.default_rng(0)
        means = values[rng.integers(0, 40, size=(100_000, 40))].mean(axis=1)
        assert row["mean_boot_low"] == pytest.approx(np.quantile(means, 0.025), abs=0.02)
        assert row["mean_boot_high"] == pytest.approx(np.quantile(means, 0.975), abs=0.02)
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


def test_cascade_interval_is_over_seeds_not_questions(tmp_path: Path) -> None:
    """The quickstart case: two seeds answer the same 149 cascade-1 questions, one gets
    145 right and the other 1. Pooled, 146/298 = 0.490 with a Wilson interval of
    [0.434, 0.546]; the seeds disagree far beyond it, so the interval must be over
    seeds (two seed pairs: t with 1 degree of freedom, which spans [0, 1] here), and
    each trial keeps its own Wilson interval."""
    from scipy import stats

    for w, right in enumerate((145, 1)):
        write_trial(tmp_path, "two", config("fire", w, 0), {3: right / 149},
                    samples=cascade_samples([right], 149))
    with open_results(tmp_path, "two") as con:
        (row,) = run(con, "cascade")
        (narrow,) = run(con, "cascade", level=0.5)
    accuracies = np.array([145 / 149, 1 / 149])
    assert (row["n_trials"], row["questions"], row["correct"]) == (2, 298, 146)
    assert row["accuracy"] == pytest.approx(accuracies.mean())
    assert row["trial_accuracies"] == pytest.approx(list(accuracies))
    assert (row["mean_method"], row["mean_df"]) == ("independent cells (Wilson at effective n over seed pairs)", 1)
    for interval, level in ((row, 0.95), (narrow, 0.5)):
        low, high = wilson_bounds(accuracies.mean(), accuracies.var(ddof=1) / 2, stats.t.ppf((1 + level) / 2, 1), 2,
                                  level)
        assert (interval["mean_low"], interval["mean_high"]) == (
            pytest.approx(float(low), abs=1e-12), pytest.approx(float(high), abs=1e-12))
    for trial, right in zip(row["trials"], (145, 1)):
        assert (trial["questions"], trial["correct"]) == (149, right)
        low, high = wilson(right, 149)
        assert (trial["wilson95_low"], trial["wilson95_high"]) == (
            pytest.approx(low, abs=1e-12), pytest.approx(high, abs=1e-12))
    assert row["level"] == 0.95


def test_cascade_interval_is_variance_sqls_interval_of_the_mean(tmp_path: Path) -> None:
    """Every question of the length in one cascade, so a trial's cascade accuracy is its
    accuracy at the length: cascade.sql's interval is then variance.sql's, bit for bit,
    on a crossed 4 x 3 grid, so the coverage measured for that one
    (tests/test_mean_interval.py) holds for this one."""
    rng = np.random.default_rng(3)
    for w in range(4):
        for d in range(3):
            k = 14 + 3 * w + 2 * d + int(rng.integers(0, 3))  # inside (0, 1), seeds matter
            write_trial(tmp_path, "grid", config("fire", w, d), {3: k / 40},
                        samples=cascade_samples([k], 40))
    with open_results(tmp_path, "grid") as con:
        (cascade,) = run(con, "cascade")
        (variance,) = [r for r in run(con, "variance") if r["digits"] == 3]
    assert cascade["mean_method"] == "crossed seeds (two-way, a component at 0 dropped; Wilson at effective n)"
    keys = ("mean_low", "mean_high", "mean_method", "mean_df", "mean_coverage")
    assert {k: cascade[k] for k in keys} == {k: variance[k] for k in keys}
    assert 0 < cascade["mean_low"] < cascade["accuracy"] < cascade["mean_high"] < 1


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

    from orchestrator.store.results_store import SAMPLES_SCHEMA

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
    from analysis import error_plots, figures

    drawn = {}
    monkeypatch.setattr(figures, "save", lambda fig, path: drawn.setdefault("fig", fig) and path)
    rows = [{"group_id": "g", "group_label": "g", "digits": d, "facet": "carry",
             "bucket": bucket, "error_rate": rate, "count": 1, "total": 4}
            for d, bucket, rate in ((3, "with carry", 0.25), (3, "without carry", 0.5),
                                    (5, "with carry", 0.75))]
    error_plots.error_by_carry(rows, tmp_path / "carry.png")
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


# --- 4. no silent drops -------------------------------------------------------------------


def crossed(root: Path, study: str, pe: str, table: dict[tuple[int, int], object],
            status: dict[tuple[int, int], str] | None = None) -> None:
    """One trial per (weight seed, data seed) of `table`: a float is its accuracy at both
    out-of-distribution lengths, a dict its accuracy per length, None no results."""
    for (w, d), value in table.items():
        final = None if value is None else (
            value if isinstance(value, dict) else {6: value, 8: value})
        if final is not None:
            final = {2: 1.0, 4: 1.0, **final}
        write_trial(root, study, config(pe, w, d), final,
                    status=(status or {}).get((w, d), "done"))


def lucky_rows(root: Path, study: str, pe: str, **params) -> list[dict]:
    with open_results(root, study) as con:
        return [r for r in run(con, "lucky_tickets", **params)
                if r["group_label"].split("/")[1] == pe]


def test_a_crossed_group_with_a_missing_cell_is_analysed_on_its_largest_complete_subgrid(
        tmp_path: Path) -> None:
    """3 x 3 seeds, the trial w2 d1 failed: the statistics use weight seeds 0, 1 x all
    three data seeds (6 cells; ties with w0-2 x d0, d2 go to the first seeds) and say
    what they left out. A 2 x 2 group whose w0 d1 diverged before its first evaluation
    has no complete 2 x 2 subgrid: it is listed, with the reason."""
    y = np.array([[0.9, 0.7, 0.8], [0.2, 0.4, 0.1], [0.5, None, 0.6]], dtype=object)
    crossed(tmp_path, "gaps", "fire", {(w, d): y[w, d] for w in range(3) for d in range(3)},
            status={(2, 1): "failed"})
    crossed(tmp_path, "gaps", "rope", {(0, 0): 0.5, (0, 1): None, (1, 0): 0.2, (1, 1): 0.3},
            status={(0, 1): "diverged"})
    rows = lucky_rows(tmp_path, "gaps", "fire")
    assert [r["weight_seed"] for r in rows] == [0, 1]
    sub = y[:2].astype(float)
    expected = anova_and_w(sub)
    for row in rows:
        assert (row["n_weight_seeds"], row["n_data_seeds"]) == (2, 3)
        assert (row["grid_weight_seeds"], row["grid_data_seeds"]) == (3, 3)
        assert row["missing_cells"] == ["w2 d1: failed"]
        assert row["left_out_seeds"] == ["weight seed 2"]
        assert row["skipped_reason"] is None
        for key, value in expected.items():
            assert row[key] == pytest.approx(value)
    (skipped,) = lucky_rows(tmp_path, "gaps", "rope")
    assert skipped["weight_seed"] is None and skipped["ss_share_weight"] is None
    assert skipped["skipped_reason"] == "no complete 2 x 2 subgrid of measured trials"
    assert skipped["missing_cells"] == ["w0 d1: diverged before its first evaluation"]


def test_the_report_lists_skipped_groups_and_the_trials_each_file_leaves_out(tmp_path: Path, monkeypatch) -> None:
    crossed(tmp_path, "gaps", "rope", {(0, 0): 0.5, (0, 1): None, (1, 0): 0.2, (1, 1): 0.3},
            status={(0, 1): "diverged"})
    write_trial(tmp_path, "gaps", config("fire", 0, 0), {2: 1.0, 6: 0.5},
                samples=simple_samples(6, 5))
    write_trial(tmp_path, "gaps", config("fire", 1, 0), {2: 1.0, 6: 0.3}, status="diverged")
    html, _ = report_figures(tmp_path, "gaps", monkeypatch)
    assert "crosses weight seeds with data seeds" not in html  # no longer "no group crosses"
    assert "addition/rope/tiny/uniform_length" in html.split("id='lucky'")[1]
    assert "no complete 2 x 2 subgrid of measured trials" in html
    assert "w0 d1: diverged before its first evaluation" in html
    coverage = html.split("id='coverage'")[1]
    assert "done, or diverged" in coverage  # the one rule, said once
    assert "diverged: samples come from the final evaluation" in coverage
    with open_results(tmp_path, "gaps") as con:
        left_out = {(r["group_label"].split("/")[1], r["weight_seed"], r["data_seed"], r["missing"])
                    for r in run(con, "coverage")}
    # crossed() writes no samples; fire w0 has samples without the per-place columns
    assert left_out == {("rope", 0, 0, "samples"), ("rope", 0, 1, "accuracies"),
                        ("rope", 0, 1, "samples"), ("rope", 1, 0, "samples"),
                        ("rope", 1, 1, "samples"), ("fire", 0, 0, "per-place samples"),
                        ("fire", 1, 0, "samples")}


# --- 6. Kendall's W with Friedman's test; ties on rounded values ---------------------------


def anova_and_w(y: np.ndarray) -> dict[str, float]:
    from test_analysis_sql import anova_and_w as reference

    return reference(y)


def test_equal_means_tie_and_w_comes_with_friedmans_chi2_and_p(tmp_path: Path) -> None:
    """At data seed 0, weight seeds 0 and 1 both score 222/600 on average, from
    222/600 twice and from 10/600 and 434/600, whose float mean is 0.37000000000000005:
    they tie. W = 78/84 = 0.929 (not 1); Friedman's chi2 = b(a - 1)W and its p-value as
    scipy.stats.friedmanchisquare gives them (3.7142857, 0.1561180)."""
    crossed(tmp_path, "ties", "fire", {
        (0, 0): {6: 222 / 600, 8: 222 / 600}, (0, 1): 0.5,
        (1, 0): {6: 10 / 600, 8: 434 / 600}, (1, 1): 0.6,
        (2, 0): 0.1, (2, 1): 0.2})
    rows = lucky_rows(tmp_path, "ties", "fire")
    assert [r["kendall_w"] for r in rows] == [pytest.approx(78 / 84)] * 3
    assert rows[0]["friedman_chi2"] == pytest.approx(3.7142857142857144)
    assert rows[0]["friedman_df"] == 2
    assert rows[0]["friedman_p"] == pytest.approx(0.15611804531597104, rel=1e-6)


@pytest.mark.parametrize(("table", "w", "p"), [
    # chi-square survival for odd degrees of freedom (3, 5, 1): scipy.stats.chi2.sf
    ([[0.9, 0.8, 0.95], [0.2, 0.3, 0.1], [0.5, 0.6, 0.55], [0.52, 0.1, 0.4]],
     0.7777777777777778, 0.07189777249646509),
    ([[0.1, 0.2, 0.3], [0.4, 0.5, 0.6], [0.7, 0.8, 0.9], [0.15, 0.9, 0.35], [0.45, 0.05, 0.65],
      [0.75, 0.25, 0.95]], 0.5428571428571428, 0.14853624533090573),
    ([[0.9, 0.8, 0.7, 0.95], [0.1, 0.85, 0.2, 0.3]], 0.25, 0.31731050786291115),
])
def test_friedman_p_matches_scipy(tmp_path: Path, table, w, p) -> None:
    y = np.array(table)
    crossed(tmp_path, "friedman", "fire",
            {(i, j): float(y[i, j]) for i in range(y.shape[0]) for j in range(y.shape[1])})
    (a, b) = y.shape
    row = lucky_rows(tmp_path, "friedman", "fire")[0]
    assert row["kendall_w"] == pytest.approx(w)
    assert row["friedman_chi2"] == pytest.approx(b * (a - 1) * w)
    assert row["friedman_p"] == pytest.approx(p, rel=1e-6)


# --- 7. labels and edge cases --------------------------------------------------------------


def test_nan_accuracies_never_pick_best_of_n_nor_mark_a_seed_lucky(tmp_path: Path) -> None:
    """w0 d1 asked no question at the long lengths (accuracy NaN). DuckDB sorts NaN above
    every number: it would be the best of N, and the minimum over w0's data orders would
    pass any threshold. It is a missing measurement instead."""
    crossed(tmp_path, "nan", "fire", {(0, 0): 0.95, (0, 1): float("nan"),
                                      (1, 0): 0.2, (1, 1): 0.3})
    with open_results(tmp_path, "nan") as con:
        variance = {r["digits"]: r for r in run(con, "variance")}
        lucky = run(con, "lucky_tickets")
    assert variance[6]["best_of_n"] == 0.95
    assert variance[6]["n_trials"] == 3
    assert variance[6]["mean"] == pytest.approx((0.95 + 0.2 + 0.3) / 3)
    assert not any(r["lucky"] for r in lucky)
    assert lucky[0]["missing_cells"] == ["w0 d1: no accuracy at the measured lengths"]


def test_a_length_no_trial_measured_does_not_decide_the_best_of_n(tmp_path: Path) -> None:
    """8 digits is NaN for every trial: the best of N is the best over the lengths the
    group measured (0.9), not the smallest trial id (the bug: every mean was null)."""
    crossed(tmp_path, "allnan", "fire", {(w, 0): {6: acc, 8: float("nan")}
                                         for w, acc in enumerate((0.1, 0.9, 0.5))})
    with open_results(tmp_path, "allnan") as con:
        variance = {r["digits"]: r for r in run(con, "variance")}
    assert variance[6]["best_of_n"] == 0.9 and variance[8]["best_of_n"] is None


def test_tied_trials_tie_to_the_last_bit_whatever_the_order_of_rows(tmp_path: Path) -> None:
    """Two trials whose lengths hold the same accuracies in another order have the same
    mean: the best of N is the smaller trial id, not whichever sum rounded up."""
    # added in row order, 0.1 + 0.2 + 0.3 + 0.7 and 0.3 + 0.2 + 0.1 + 0.7 differ in the last bit
    first, second = (0.1, 0.2, 0.3, 0.7), (0.3, 0.2, 0.1, 0.7)
    for w, values in enumerate((first, second) if trial_id(config("fire", 0, 0)) > trial_id(
            config("fire", 1, 0)) else (second, first)):
        write_trial(tmp_path, "ties", config("fire", w, 0), dict(zip(LENGTHS, values, strict=True)))
    with open_results(tmp_path, "ties") as con:
        best = {r["digits"]: r["best_trial_id"] for r in run(con, "variance")}
    assert set(best.values()) == {min(trial_id(config("fire", w, 0)) for w in (0, 1))}


def test_variance_shares_per_test_length_as_001_f9(tmp_path: Path) -> None:
    """2 weight seeds x 5 data seeds at four long lengths (001 F.9: 30, 50, 70, 100
    digits): each length's own two-way table in by_length."""
    rng = np.random.default_rng(9)
    lengths = (30, 50, 70, 100)
    y = {n: rng.uniform(0, 1, size=(2, 5)).round(3) for n in lengths}
    crossed(tmp_path, "f9", "fire", {(w, d): {n: float(y[n][w, d]) for n in lengths}
                                     for w in range(2) for d in range(5)})
    rows = lucky_rows(tmp_path, "f9", "fire")
    assert rows[0]["measured_digits"] == list(lengths)
    by_length = {entry["digits"]: entry for entry in rows[0]["by_length"]}
    assert set(by_length) == set(lengths)
    for n in lengths:
        expected = anova_and_w(y[n])
        for key, value in expected.items():
            assert by_length[n][key] == pytest.approx(value), (n, key)
    mean = anova_and_w(np.mean([y[n] for n in lengths], axis=0))
    assert rows[0]["ss_share_weight"] == pytest.approx(mean["ss_share_weight"])


def report_figures(root: Path, study: str, monkeypatch, **params) -> tuple[str, dict]:
    """Build the report; return its HTML and its figures by file name, unrendered (files left
    empty, two thirds of a report's time saved): test_output_pins checks the rendered bytes."""
    from analysis import figures as shared
    from analysis.report import build_report

    figures = {}

    def keep(fig, path: Path) -> Path:
        figures[path.name] = fig
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"")
        return path

    monkeypatch.setattr(shared, "save", keep)
    report = build_report(root, study, params={k: str(v) for k, v in params.items()})
    return report.page.read_text(), figures


def test_in_distribution_lengths_are_labelled_so(tmp_path: Path, monkeypatch) -> None:
    crossed(tmp_path, "inside", "fire", {(0, 0): 0.9, (0, 1): 0.8, (1, 0): 0.3, (1, 1): 0.2})
    html, figures = report_figures(tmp_path, "inside", monkeypatch, digits="2,4")
    lucky = html.split("id='lucky'")[1].split("id='cascade'")[0]
    lucky = re.sub(r"data:image/png;base64,[^']*", "", lucky)  # "OOD" can be base64 of a PNG
    assert "out-of-distribution" not in lucky.lower() and "OOD" not in lucky
    assert "in-distribution exact match (mean over the test lengths 2, 4, inside the training" in lucky
    colorbar = figures["seed_heatmap.png"].axes[-1]
    assert colorbar.get_ylabel() == "in-distribution exact match"
    html, figures = report_figures(tmp_path, "inside", monkeypatch)
    assert figures["seed_heatmap.png"].axes[-1].get_ylabel() == "OOD exact match"


def test_heatmap_marks_diverged_trials_and_null_shares_read_n_a(tmp_path: Path, monkeypatch) -> None:
    """fire: w1 d0 diverged after its last evaluation, with the accuracy it had reached.
    rope: every trial scored 0.5, so there is no variance to share out."""
    crossed(tmp_path, "marks", "fire", {(0, 0): 0.9, (0, 1): 0.8, (1, 0): 0.3, (1, 1): 0.2},
            status={(1, 0): "diverged"})
    crossed(tmp_path, "marks", "rope", {(w, d): 0.5 for w in range(2) for d in range(2)})
    rows = {r["group_label"].split("/")[1]: r for r in lucky_rows(tmp_path, "marks", "fire")
            if r["weight_seed"] == 1}
    assert rows["fire"]["diverged_by_data_seed"] == [True, False]
    html, figures = report_figures(tmp_path, "marks", monkeypatch)
    heatmap = figures["seed_heatmap.png"]
    texts = {t.get_text() for ax in heatmap.axes for t in ax.texts}
    assert "0.30†" in texts and "0.90" in texts
    shares = figures["variance_shares.png"].axes[0]
    assert "n/a: every trial scored the same" in [t.get_text() for t in shares.texts]
    assert "† marks a trial that diverged" in html
