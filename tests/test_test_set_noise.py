"""Issue 53, item 5: test-set noise apart from seed luck. A trial's accuracy is a mean of
n right-or-wrong answers, so it carries the binomial variance p(1 − p)/n (Jordan, ICLR
2024) that no seed makes. lucky_tickets.sql reports it as its own part of the residual
(sigma2_test_noise, sigma2_residual_seeds, test_noise_share_of_residual, overall and in
each by_length struct) and variance.sql beside the seed-to-seed spread (test_noise_sd,
test_noise_share): each against numpy's formulas on a small grid, and by simulation:
grids with no seed effect at all put the whole residual down to the questions, grids
with one only a small part."""

from __future__ import annotations

import itertools
import re

import numpy as np
import pytest
from analysis_rows import run
from memory_study import Study, group_config
from scipy import stats
from test_statistics import components

LENGTHS = (3, 6, 8)  # 3 digits inside the training range (1-4), 6 and 8 outside
OOD = (6, 8)


def add_trial(study: Study, cfg: dict, n: int, correct: dict[int, int], name: str = "sim") -> None:
    """One trial scoring correct[l] of n questions at each length l, in study `name`."""
    study.add(cfg, {digits: right / n for digits, right in correct.items()}, n=n, correct=correct)
    for row in (study.trials[-1], *study.evals[-len(correct):]):
        row["study"] = name


def noise(p: np.ndarray, n: np.ndarray) -> np.ndarray:
    """The unbiased estimate of a trial's binomial variance p(1 − p)/n."""
    return p * (1 - p) / (n - 1)


def small_grid(rng) -> tuple[Study, dict]:
    """3 x 4 seeds, each trial with its own number of questions; cell (0, 0) also copied
    into a second study (the same trial_id: one draw of the questions' noise), cell
    (1, 2) with a perturbation replicate (another trial_id: a second draw)."""
    study, trials = Study(), []
    for w, d in itertools.product(range(3), range(4)):
        replicates = [0, 1] if (w, d) == (1, 2) else [0]
        for p in replicates:
            cfg = group_config("fire", w, d)
            cfg["seeds"]["perturb"] = p
            n = int(rng.integers(20, 90))
            correct = {digits: int(rng.integers(0, n + 1)) for digits in LENGTHS}
            add_trial(study, cfg, n, correct)
            study.trials[-1]["perturb_seed"] = p
            trials.append((w, d, n, correct))
    w0d0 = next(t for t in trials if t[:2] == (0, 0))
    copy = group_config("fire", 0, 0)
    copy["seeds"]["perturb"] = 0
    add_trial(study, copy, w0d0[2], w0d0[3], name="copy")
    study.trials[-1]["perturb_seed"] = 0
    return study, {"trials": trials, "copied": w0d0}


def expected_lucky(trials: list, digits: tuple[int, ...]) -> dict[str, float]:
    """numpy's y per cell (the mean of its trials, the copy counted as a trial) and its
    noise (mean over the cell's trials over the distinct ones), then the grid's."""
    y, cell_noise = np.zeros((3, 4)), np.zeros((3, 4))
    for w, d in itertools.product(range(3), range(4)):
        cell = [t for t in trials if t[:2] == (w, d)]
        distinct = 2 if (w, d) == (1, 2) else 1
        accuracy = np.array([[t[3][l] / t[2] for l in digits] for t in cell])
        n = np.array([[t[2]] for t in cell])
        y[w, d] = accuracy.mean(axis=1).mean()
        cell_noise[w, d] = (noise(accuracy, n).mean(axis=1) / len(digits)).mean() / distinct
    residual = components(y)["sigma2_residual"]
    return {"sigma2_residual": residual, "sigma2_test_noise": cell_noise.mean(),
            "sigma2_residual_seeds": max(residual - cell_noise.mean(), 0),
            "test_noise_share_of_residual": min(cell_noise.mean() / residual, 1)}


def test_the_noise_columns_are_numpys_formulas() -> None:
    """lucky_tickets overall (the mean over 6 and 8 digits: the mean noise over |L| = 2)
    and at each length; variance.sql per length, over every trial (the copy and the
    replicate are trials of their own there)."""
    study, made = small_grid(np.random.default_rng(53))
    trials = [*made["trials"], made["copied"]]
    con = study.connect()
    rows = run(con, "lucky_tickets", resamples=20)
    assert [r["weight_seed"] for r in rows] == [0, 1, 2]
    keys = ("sigma2_residual", "sigma2_test_noise", "sigma2_residual_seeds", "test_noise_share_of_residual")
    for row in rows:
        assert {k: row[k] for k in keys} == pytest.approx(expected_lucky(trials, OOD), rel=1e-12)
    for entry in rows[0]["by_length"]:
        assert {k: entry[k] for k in keys} == pytest.approx(expected_lucky(trials, (entry["digits"],)), rel=1e-12)
    for row in run(con, "variance", resamples=2):
        accuracy = np.array([t[3][row["digits"]] / t[2] for t in trials])
        mean_noise = noise(accuracy, np.array([t[2] for t in trials])).mean()
        assert row["n_trials"] == len(trials) == 14
        assert row["test_noise_sd"] == pytest.approx(np.sqrt(mean_noise), rel=1e-12)
        assert row["test_noise_share"] == pytest.approx(min(mean_noise / accuracy.var(ddof=1), 1), rel=1e-9)


def test_a_grid_that_ties_or_has_one_question_gets_no_share() -> None:
    """Every trial right on every question: no residual, so no share, and no spread, so
    variance.sql has no share either; a trial of one question has no noise estimate
    (p(1 − p)/(n − 1) is 0/0), so its grid's test noise is unknown, not 0."""
    study = Study()
    for w, d in itertools.product(range(2), range(2)):
        add_trial(study, group_config("fire", w, d, 0), 40, {6: 40})
        add_trial(study, group_config("fire", w, d, 1), 1 if (w, d) == (1, 1) else 40,
                  {6: 1 if (w, d) == (1, 1) else 20 + w + 3 * d})
    con = study.connect()

    def by_steps(rows: list[dict]) -> tuple[dict, dict]:
        """The tied group's row (train steps 100), then the other's (101)."""
        return tuple(next(r for r in rows if f"steps={steps}" in r["group_label"]) for steps in (100, 101))

    tied, unknown = by_steps(run(con, "lucky_tickets", resamples=20))
    assert tied["sigma2_residual"] == 0 and tied["sigma2_test_noise"] == 0
    assert tied["sigma2_residual_seeds"] == 0 and tied["test_noise_share_of_residual"] is None
    assert unknown["sigma2_residual"] > 0
    assert unknown["sigma2_test_noise"] is None and unknown["test_noise_share_of_residual"] is None
    tied, unknown = by_steps(run(con, "variance", resamples=2))
    assert (tied["sd"], tied["test_noise_sd"], tied["test_noise_share"]) == (0, 0, None)
    assert unknown["sd"] > 0 and unknown["test_noise_sd"] is None and unknown["test_noise_share"] is None


# --- simulation: a finite test set alone, or seeds as well ---------------------------------

GROUPS, WEIGHT_SEEDS, DATA_SEEDS, QUESTIONS = 200, 4, 3, 50


def simulated(seed_sd: float, rng, groups: int = GROUPS) -> tuple[list[dict], list[dict]]:
    """`groups` grids of 4 x 3 seeds in one store, each trial answering 50 questions at 6
    and 8 digits with chance p = 0.5 + a seed effect of sd seed_sd (each trial its own:
    the weight x data interaction the residual holds), clipped to [0.02, 0.98]: the
    groups of lucky_tickets.sql, and variance.sql's rows at 6 digits."""
    study = Study()
    for g in range(groups):
        for w, d in itertools.product(range(WEIGHT_SEEDS), range(DATA_SEEDS)):
            p = float(np.clip(0.5 + rng.normal(0, seed_sd), 0.02, 0.98)) if seed_sd else 0.5
            add_trial(study, group_config("fire", w, d, g), QUESTIONS,
                      {digits: int(rng.binomial(QUESTIONS, p)) for digits in OOD})
    con = study.connect()
    lucky = list({r["group_id"]: r for r in run(con, "lucky_tickets", resamples=2)}.values())
    variance = [r for r in run(con, "variance", resamples=2) if r["digits"] == 6]
    assert len(lucky) == len(variance) == groups
    assert all(re.search(r"steps=\d+", r["group_label"]) for r in lucky)
    return lucky, variance


def capped_share_mean(df: int) -> float:
    """E[min(1, ν/χ²_ν)]: the mean share when MS_residual (or a sample variance) on ν
    degrees of freedom is pure noise of a known variance. Not 1: 1/MS is skewed up
    (E[ν/χ²_ν] = ν/(ν − 2)) and the cap takes the grids whose MS fell below the noise
    down to 1. E[ν/X; X > ν] = ν/(ν − 2) · P(χ²_{ν−2} > ν)."""
    return stats.chi2.cdf(df, df) + df / (df - 2) * stats.chi2.sf(df, df - 2)


def test_without_seed_effects_the_residual_is_the_test_set():
    """No seed effect at all: the noise is the whole residual in expectation, so over
    the 200 grids mean sigma2_test_noise / mean sigma2_residual is 1 within 0.15 (its
    standard error is 0.041: MS_residual has 6 degrees of freedom). The mean of the
    capped share is not 1: E[min(1, 6/χ²_6)] = 0.876 at 4 x 3 seeds (checked within
    0.08; standard error 0.013), and variance.sql's over 12 trials E[min(1, 11/χ²_11)] =
    0.894. With a seed effect of sd 0.15 on each trial the share falls to about 0.14
    (0.0025 of noise in a residual of 0.0025 + 0.0225), variance.sql's to about 0.2 (at
    one length the noise is twice that of the mean over two)."""
    rng = np.random.default_rng(5)
    lucky, variance = simulated(0.0, rng)
    pooled = np.mean([r["sigma2_test_noise"] for r in lucky]) / np.mean([r["sigma2_residual"] for r in lucky])
    share = np.mean([r["test_noise_share_of_residual"] for r in lucky])
    assert pooled == pytest.approx(1, abs=0.15)
    assert share == pytest.approx(capped_share_mean(6), abs=0.08)
    spread = np.mean([r["test_noise_share"] for r in variance])
    assert spread == pytest.approx(capped_share_mean(11), abs=0.08)
    lucky, variance = simulated(0.15, rng, groups=GROUPS // 2)  # 0.136, standard error 0.013
    assert np.mean([r["test_noise_share_of_residual"] for r in lucky]) < 0.3
    assert np.mean([r["test_noise_share"] for r in variance]) < 0.3
    assert np.mean([r["sigma2_residual_seeds"] for r in lucky]) == pytest.approx(0.0225, rel=0.25)


def measure(repeats: int) -> None:
    """Print the simulation's numbers (docs/analysis.md, "Test-set noise") over `repeats`
    stores of GROUPS grids each, without and with a seed effect."""
    for seed_sd in (0.0, 0.15):
        found = []
        for repeat in range(repeats):
            lucky, variance = simulated(seed_sd, np.random.default_rng(repeat))
            found.append((np.mean([r["sigma2_test_noise"] for r in lucky])
                          / np.mean([r["sigma2_residual"] for r in lucky]),
                          np.mean([r["test_noise_share_of_residual"] for r in lucky]),
                          np.mean([r["test_noise_share"] for r in variance])))
        pooled, share, spread = np.array(found).T
        print(f"seed effect sd {seed_sd}: {repeats} x {GROUPS} grids of {WEIGHT_SEEDS} x {DATA_SEEDS} seeds, "
              f"{QUESTIONS} questions at {len(OOD)} lengths")
        for name, values in (("mean noise / mean residual", pooled), ("mean test_noise_share_of_residual", share),
                             ("mean test_noise_share (variance.sql, 6 digits)", spread)):
            print(f"  {name}: {values.mean():.3f}, sd over repeats {values.std(ddof=1):.3f} "
                  f"({values.min():.3f} to {values.max():.3f})")
    print(f"expected without seeds: share E[min(1, 6/chi2_6)] = {capped_share_mean(6):.3f}, "
          f"variance.sql's E[min(1, 11/chi2_11)] = {capped_share_mean(11):.3f}")


if __name__ == "__main__":
    import argparse
    parser = argparse.ArgumentParser(description=measure.__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=10)
    measure(parser.parse_args().repeats)
