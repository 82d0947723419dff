"""compare.sql: its intervals and tests equal analysis/compare_interval.py's (the
formulas the coverage simulation measures) on paired, partly paired and unpaired
designs, crossed and one-way, with differences that tie; the success difference's p is
below 1 − level exactly where its interval excludes 0; Holm's adjustment over every
row; which pairs are compared; and the verdict in words. The coverage itself:
tests/compare_coverage.py (slow, test_compare_coverage.py)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from analysis_rows import config, run
from memory_study import Study

from analysis import compare_interval as ci


def paired_study(y_a: np.ndarray, y_b: np.ndarray, seeds_b=None) -> Study:
    """FIRE on y_a's seeds, RoPE on y_b's (the same seeds unless seeds_b gives others)."""
    study = Study()
    for (w, d), value in np.ndenumerate(y_a):
        study.add(config("fire", w, d), {6: float(value)})
    for (w, d), value in np.ndenumerate(y_b):
        ws, ds = seeds_b(w, d) if seeds_b else (w, d)
        study.add(config("rope", ws, ds), {6: float(value)})
    return study


def grids(rng, a: int, b: int, centre: float, shift: float, spread=(0.15, 0.1, 0.05)):
    sw, sd, se = spread
    y_a = np.clip(centre + rng.normal(0, sw, (a, 1)) + rng.normal(0, sd, (1, b))
                  + rng.normal(0, se, (a, b)), 0, 1)
    y_b = np.clip(y_a - shift + rng.normal(0, 0.08, (a, b)), 0, 1)
    return np.round(y_a, 3), np.round(y_b, 3)


def assert_row_is_numpys(row: dict, y_a, y_b, paired: bool, threshold: float = 0.9,
                         level: float = 0.95) -> None:
    accuracy = ci.accuracy_difference(y_a[None], y_b[None], paired, level)
    success = ci.success_difference(y_a[None], y_b[None], threshold, paired, level)
    improvement = ci.improvement(y_a[None], y_b[None], paired, level)
    expected = {
        "accuracy_diff": accuracy.diff, "accuracy_diff_low": accuracy.low,
        "accuracy_diff_high": accuracy.high, "accuracy_p": accuracy.p,
        "success_diff": success.diff, "success_diff_low": success.low,
        "success_diff_high": success.high, "success_p": success.p,
        "p_improvement": improvement.diff, "p_improvement_low": improvement.low,
        "p_improvement_high": improvement.high}
    for name, value in expected.items():
        assert row[name] == pytest.approx(float(value[0]), rel=1e-7, abs=1e-9), name


SHAPES = ((4, 3), (3, 5), (2, 2), (6, 2), (5, 1))


@pytest.mark.parametrize("shape", SHAPES)
def test_a_paired_comparison_is_numpys(shape) -> None:
    rng = np.random.default_rng(sum(shape))
    for centre, shift, threshold in ((0.6, 0.1, 0.55), (0.9, 0.05, 0.9), (0.5, 0.0, 0.5)):
        y_a, y_b = grids(rng, *shape, centre, shift)
        (row,) = run(paired_study(y_a, y_b).connect(), "compare", threshold=threshold)
        assert (row["design"], row["n_a"], row["n_b"]) == ("paired", y_a.size, y_b.size)
        assert_row_is_numpys(row, y_a, y_b, True, threshold)


def test_an_unpaired_comparison_is_numpys_and_leaves_out_runs_sharing_a_seed() -> None:
    """Seeds apart (weight seeds 10 on), then the same seeds read as unpaired by numpy:
    the SQL's partly paired design (one seed pair missing from b) equals numpy's
    unpaired formulas only on seeds apart, so that case is checked for its design."""
    rng = np.random.default_rng(11)
    y_a, y_b = grids(rng, 4, 3, 0.6, 0.1)
    (row,) = run(paired_study(y_a, y_b, lambda w, d: (10 + w, 10 + d)).connect(), "compare",
                 threshold=0.55)
    assert row["design"] == "unpaired"
    # seeds apart: every pair of runs counts, which numpy's layout gives with b's seeds
    # shifted so that none is shared
    expected = ci.accuracy_difference(y_a[None], y_b[None], False)
    assert (row["accuracy_diff_low"], row["accuracy_p"]) == pytest.approx(
        (float(expected.low[0]), float(expected.p[0])), rel=1e-9)
    wins = ci.wins(y_a.reshape(-1, 1), y_b.reshape(1, -1)).mean()
    assert row["p_improvement"] == pytest.approx(wins, rel=1e-12)
    study = paired_study(y_a, y_b)
    study.trials = [t for t in study.trials if not (t["weight_seed"] == 0 and t["data_seed"] == 0
                                                    and "rope" in t["config_json"])]
    (partly,) = run(study.connect(), "compare", threshold=0.55)
    assert (partly["design"], partly["n_a"], partly["n_b"]) == ("partly paired", 12, 11)


def test_differences_that_all_tie_get_the_groups_intervals() -> None:
    """Both groups at 0 on every seed: no difference shown, p = 1, and an interval as wide
    as the groups' tied intervals allow (MOVER of Wilson over 8 cells each); a at 1
    and b at 0 everywhere: a above b beyond seed luck."""
    zeros, ones = np.zeros((4, 2)), np.ones((4, 2))
    (row,) = run(paired_study(zeros, zeros).connect(), "compare")
    assert (row["accuracy_p"], row["accuracy_diff"]) == (1, 0)
    assert row["accuracy_method"].startswith("every difference ties")
    assert_row_is_numpys(row, zeros, zeros, True)
    assert -0.5 < row["accuracy_diff_low"] < -0.3 and 0.3 < row["accuracy_diff_high"] < 0.5
    (row,) = run(paired_study(ones, zeros).connect(), "compare")
    assert_row_is_numpys(row, ones, zeros, True)
    assert row["accuracy_diff_low"] > 0.4 and row["verdict"] == "a above b beyond seed luck"


@pytest.mark.parametrize("level", [0.9, 0.95, 0.99])
def test_the_success_p_is_below_one_minus_level_where_the_interval_excludes_0(level) -> None:
    rng = np.random.default_rng(int(100 * level))
    disagreements = 0
    for _ in range(300):
        p_a, p_b = rng.integers(0, 9, 2) / 8
        n_a, n_b = rng.uniform(2, 40, 2)
        df_a, df_b = (rng.choice([np.nan, rng.uniform(1, 30)]) for _ in range(2))
        phi = rng.uniform(-0.5, 0.9)
        a = ci.SuccessRate(np.array([p_a]), np.array([n_a]), np.array([df_a]))
        b = ci.SuccessRate(np.array([p_b]), np.array([n_b]), np.array([df_b]))
        low, high = ci.success_bounds(a, b, phi, level)
        p = ci.success_p(p_a, n_a, df_a, p_b, n_b, df_b, phi)
        excludes = low[0] > 1e-9 or high[0] < -1e-9
        touches = abs(low[0]) < 1e-9 or abs(high[0]) < 1e-9
        disagreements += (p < 1 - level) != excludes and not touches
    assert disagreements == 0


def holm(p: list[float]) -> list[float]:
    order = np.argsort(p, kind="stable")
    m, running, out = len(p), 0.0, [0.0] * len(p)
    for j, i in enumerate(order):
        running = max(running, (m - j) * p[i])
        out[i] = min(1.0, running)
    return out


def test_holm_over_every_comparison_and_which_pairs_are_compared() -> None:
    """Four positional encodings on shared seeds at two lengths: 6 pairs differ in one
    setting (model.pe); a fifth group with another pe and lr differs from each in two
    and is left out, unless named in `groups`. Holm's adjustment of the 12 p-values of
    each kind against Python's, and the family size in the output."""
    rng = np.random.default_rng(21)
    study = Study()
    level = {"fire": 0.9, "rope": 0.7, "alibi": 0.85, "nope": 0.2}
    for pe, centre in level.items():
        for w, d in itertools.product(range(4), range(2)):
            study.add(config(pe, w, d), {n: float(np.clip(centre + rng.normal(0, 0.1), 0, 1))
                                         for n in (6, 8)})
    study.add(config("t5", 0, 0, lr=1e-3), {6: 0.5, 8: 0.5})
    study.add(config("t5", 1, 0, lr=1e-3), {6: 0.4, 8: 0.6})
    study.add(config("t5", 2, 0, lr=1e-3), {6: 0.3, 8: 0.7})
    con = study.connect()
    rows = run(con, "compare")
    assert len(rows) == 12 and {r["holm_comparisons"] for r in rows} == {12}
    assert all(len(r["differs_in"]) == 1 for r in rows)
    for kind in ("accuracy", "success"):
        expected = holm([r[f"{kind}_p"] for r in rows])
        assert [r[f"{kind}_p_holm"] for r in rows] == pytest.approx(expected, abs=1e-12)
    assert any(r["accuracy_p_holm"] > r["accuracy_p"] for r in rows)
    ids = {label.split("/")[1]: gid for label, gid in
           con.sql("select distinct group_label, group_id from groups").fetchall()}
    named = run(con, "compare", groups=f"{ids['t5']},{ids['fire']}")
    assert len(named) == 2 and {r["holm_comparisons"] for r in named} == {2}
    assert {d.split(":")[0] for d in named[0]["differs_in"]} == {"model.pe", "train.lr"}
    assert {r["design"] for r in named} == {"partly paired"}  # three shared seed pairs of 8
    at_8 = run(con, "compare", digits="8")
    assert {r["digits"] for r in at_8} == {8} and {r["holm_comparisons"] for r in at_8} == {6}
    raw_at_8 = {(r["group_a"], r["group_b"]): r["accuracy_p"] for r in rows if r["digits"] == 8}
    assert {(r["group_a"], r["group_b"]): r["accuracy_p"] for r in at_8} == raw_at_8
    assert [r["accuracy_p_holm"] for r in at_8] == pytest.approx(holm([r["accuracy_p"] for r in at_8]))


def test_the_verdict_says_what_the_seeds_can_decide() -> None:
    """A clear difference on 8 x 4 seeds holds beyond seed luck; the same groups on 2 x 2
    seeds are too few to decide; two seeds of one kind a side cannot be compared."""
    rng = np.random.default_rng(5)
    y_a, y_b = grids(rng, 8, 4, 0.7, 0.3)
    (row,) = run(paired_study(y_a, y_b).connect(), "compare")
    assert row["verdict"] == "a above b beyond seed luck" and row["accuracy_p_holm"] < 0.05
    (small,) = run(paired_study(y_a[:2, :2], y_b[:2, :2] * 0 + 0.5).connect(), "compare")
    assert small["verdict"].startswith("too few seeds to decide")
    (two,) = run(paired_study(np.zeros((2, 1)), np.ones((2, 1))).connect(), "compare")
    assert two["verdict"].startswith("too few seeds to compare")
    assert (two["accuracy_p"], two["accuracy_p_holm"], two["success_diff_low"]) == (None, None, None)


def test_the_report_says_which_comparisons_hold_which_are_undecided_and_which_cannot_be_made() -> None:
    from analysis.question_rows import comparison_words

    def row(verdict: str, warning: str | None = None) -> dict:
        return {"label_a": "fire", "label_b": "rope", "digits": 8, "verdict": verdict, "level": 0.95,
                "accuracy_diff": 0.3, "accuracy_diff_low": 0.1, "accuracy_diff_high": 0.5,
                "warning": warning, "coverage": "measured 0.92-0.95 (below 0.93)"}

    words = comparison_words({"compare": [
        row("a above b beyond seed luck", warning="below"),
        row("too few seeds to decide: a difference of 0.1 either way fits"),
        row("too few seeds to compare: a group has fewer than 3 seeds (or a crossed 2 x 2)"),
        row("no difference shown")]})
    assert "Of 4 comparisons, 1 hold beyond seed luck" in words and "+0.300 [+0.100, +0.500]" in words
    assert "too few to decide 1:" in words and "1 cannot be compared" in words
    assert "The other 1 show no difference" in words and "<b>Warning</b>" in words
    assert "No two groups" in comparison_words({"compare": []})
