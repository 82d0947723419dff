"""profiles.sql's performance profiles (Agarwal et al. 2021): per group, test length and
threshold τ, the share of seed pairs with accuracy >= τ and its interval over seeds. At
τ = threshold the row is success.sql's P(success) with its interval, bit for bit (both
call the table macro seed_success_interval); the share counts the seed pairs at each τ
and falls as τ rises; the report's figure draws one panel per test length.

(tests/test_profiles.py is about a study's run profiles, `--profile smoke`.)"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from analysis_rows import run
from memory_study import Study, crossed_study, group_config

from analysis import profile_plots

PNG = b"\x89PNG\r\n\x1a\n"
LENGTHS = (3, 6)  # memory_study's trials are trained to 4 digits: 6 is out of distribution
GRID = [i / 20 for i in range(21)]


def synthetic_study() -> tuple[Study, list[np.ndarray]]:
    """Crossed groups that succeed sometimes, always and never, and a one-way group with
    a hole-free column of weight seeds (independent cells)."""
    rng = np.random.default_rng(53)
    tables = [rng.uniform(0.4, 1.0, (3, 5)), np.full((2, 3), 0.95) + rng.uniform(0, 0.05, (2, 3)),
              rng.uniform(0.0, 0.5, (4, 4)), np.round(rng.uniform(0, 1, (4, 4)), 1)]
    study = crossed_study(tables, LENGTHS)
    for w, accuracy in enumerate((0.2, 0.95, 0.91, 0.5)):
        study.add(group_config("rope", w, 0, len(tables)), {n: accuracy for n in LENGTHS})
    return study, tables


@pytest.fixture(scope="module")
def con():
    study, _ = synthetic_study()
    with study.connect() as connection:
        yield connection


@pytest.mark.parametrize("params", [{}, {"threshold": 0.4, "level": 0.9}, {"threshold": 0.37}], ids=str)
def test_the_profile_at_the_threshold_is_success_sql_bit_for_bit(con, params) -> None:
    success = run(con, "success", **params)
    profile = [r for r in run(con, "profiles", **params) if r["at_threshold"]]
    assert len(profile) == len(success) == 5 * len(LENGTHS)
    by_key = {(r["group_id"], r["digits"]): r for r in profile}
    for s in success:
        p = by_key[(s["group_id"], s["digits"])]
        assert p["tau"] == s["threshold"] == params.get("threshold", 0.9)
        # .hex(): equal bits, not merely equal to a tolerance
        assert p["share"].hex() == s["p_success"].hex()
        assert p["share_low"].hex() == s["p_success_low"].hex()
        assert p["share_high"].hex() == s["p_success_high"].hex()
        assert p["share_n_effective"].hex() == s["p_success_n_effective"].hex()
        assert (p["share_method"], p["share_coverage"]) == (s["p_success_method"], s["p_success_coverage"])
        assert (p["n_trials"], p["n_seed_pairs"]) == (s["n_trials"], s["n_trials"])
    methods = {s["p_success_method"] for s in success}
    assert len(methods) == 3, methods  # crossed with successes, crossed all or none, independent


def test_the_share_counts_the_seed_pairs_and_falls_as_tau_rises(con) -> None:
    _, tables = synthetic_study()
    rows = run(con, "profiles", threshold=0.37)
    curves: dict[tuple, list[dict]] = {}
    for r in rows:
        curves.setdefault((r["group_label"], r["digits"]), []).append(r)
    assert len(curves) == 5 * len(LENGTHS)
    for (label, digits), curve in curves.items():
        taus = [r["tau"] for r in curve]
        assert taus == sorted([*GRID, 0.37])  # the grid and the threshold, in order
        shares = [r["share"] for r in curve]
        assert all(later <= earlier for earlier, later in itertools.pairwise(shares)), (label, digits)
        assert all(r["share_low"] <= r["share"] <= r["share_high"] for r in curve)
        assert {r["in_distribution"] for r in curve} == {digits <= 4}
    for g, y in enumerate(tables):  # each crossed group against numpy, in the SQL's group order
        rows_g = [r for r in rows if r["group_label"].endswith(f"train.steps={100 + g}") and r["digits"] == 6]
        assert len(rows_g) == len(GRID) + 1
        for r in rows_g:
            assert r["share"] == pytest.approx(float((y >= r["tau"]).mean()), abs=1e-15)
            assert r["n_seed_pairs"] == y.size


def test_the_figure_draws_a_panel_per_length_outside_training_first(con, tmp_path, monkeypatch) -> None:
    from analysis import figures

    rows = run(con, "profiles")
    path = profile_plots.performance_profiles(rows, tmp_path / "profiles.png")
    assert path.read_bytes().startswith(PNG) and path.with_suffix(".svg").is_file()
    assert profile_plots.performance_profiles([], tmp_path / "none.png") is None
    drawn = {}
    monkeypatch.setattr(figures, "save", lambda fig, path: drawn.setdefault("fig", fig) and path)
    profile_plots.performance_profiles(rows, tmp_path / "again.png")
    axes = [ax for ax in drawn["fig"].axes if ax.get_visible()]
    assert [ax.get_title().split(" digits")[0] for ax in axes] == ["6", "3"]
    for ax in axes:
        assert len(ax.get_lines()) == 5 + 1  # a line per group and the threshold's vertical
        assert ax.get_lines()[-1].get_xdata()[0] == 0.9
        assert len(ax.collections) == 5  # a band per group
