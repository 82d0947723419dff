"""lucky_tickets.sql on the grids a cluster runs: a complete 24 x 20 grid is analysed
whole, an incomplete 50 x 40 one on a complete subgrid found without enumerating seed
sets, and the reason a group is skipped is true (issue: 24 x 20 was skipped as "no
complete 2 x 2 subgrid")."""

from __future__ import annotations

import itertools

import numpy as np
from analysis_rows import run
from memory_study import Study, group_config


def grid_study(a: int, b: int, missing: set[tuple[int, int]] = frozenset(), seed: int = 0) -> Study:
    rng = np.random.default_rng(seed)
    y = 0.5 + rng.normal(0, 0.15, (a, 1)) + rng.normal(0, 0.05, (1, b)) + rng.normal(0, 0.05, (a, b))
    study = Study()
    for w, d in itertools.product(range(a), range(b)):
        if (w, d) not in missing:
            study.add(group_config("fire", w, d), {6: float(np.clip(y[w, d], 0, 1))})
    return study


def analysed(study: Study) -> list[dict]:
    with study.connect() as con:
        return run(con, "lucky_tickets", resamples=20)


def test_a_complete_24_by_20_grid_is_analysed_whole():
    rows = analysed(grid_study(24, 20))
    assert len(rows) == 24 and all(r["skipped_reason"] is None for r in rows)
    assert (rows[0]["n_weight_seeds"], rows[0]["n_data_seeds"]) == (24, 20)
    assert rows[0]["left_out_seeds"] in (None, [])


def test_an_incomplete_50_by_40_grid_keeps_a_large_complete_subgrid():
    """Three failed trials in weight seeds 3 and 7: dropping those two weight seeds keeps
    48 x 40 = 1,920 cells, dropping their three data seeds 50 x 37 = 1,850."""
    rows = analysed(grid_study(50, 40, missing={(3, 5), (7, 5), (7, 11)}))
    kept = [r for r in rows if r["weight_seed"] is not None]
    assert {r["weight_seed"] for r in kept} == set(range(50)) - {3, 7}
    assert (kept[0]["n_weight_seeds"], kept[0]["n_data_seeds"]) == (48, 40)
    assert sorted(kept[0]["left_out_seeds"]) == ["weight seed 3", "weight seed 7"]
    assert len(kept[0]["missing_cells"]) == 3


def test_a_large_grid_with_no_complete_subgrid_says_so_truly():
    """Every weight seed and every data seed of an 18 x 18 grid misses one cell (the
    diagonal): dropping either side's incomplete seeds leaves nothing."""
    rows = analysed(grid_study(18, 18, missing={(i, i) for i in range(18)}))
    assert len(rows) == 1 and rows[0]["weight_seed"] is None
    assert rows[0]["skipped_reason"].startswith("no complete 2 x 2 subgrid left after dropping")
