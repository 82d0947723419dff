"""The bench's scale rows (`lg-study bench --only scale`) at a tiny size: the rows are
well formed, and the synthetic store reads like a real one (the full 1,000 and 10,000
trial stores are for the bench itself)."""

from __future__ import annotations

import numpy as np
import pyarrow.parquet as pq
import pytest

from analysis.query import open_results, run_sql_file
from analysis.report import sql_path
from orchestrator.benchmarks import bench_scale
from orchestrator.store.results_store import read_trial_statuses, write_trial_table

SHAPE = (2, 3, 3)  # groups, weight seeds, data seeds: 18 trials


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    root = tmp_path_factory.mktemp("scale")
    rows = bench_scale.measure(root, SHAPE, params={"resamples": "50"})
    return root, rows


def test_each_row_is_budget_over_measured_seconds_with_the_store_named(measured) -> None:
    _, rows = measured
    assert [r.name for r in rows] == [
        "lg-study query lucky_tickets.sql on 18 trials (budget 3 s / measured)",
        "lg-study report on 18 trials (budget 10 s / measured)",
    ]
    for row, budget in zip(rows, (3.0, 10.0)):
        assert row.target == ">= 1" and row.ratio is not None and row.ratio > 0
        assert row.detail.startswith("18 trials (2 groups x 3 weight x 3 data seeds, 6 lengths; written in ")
        seconds = float(row.detail.rsplit(": ", 1)[1].removesuffix(" s"))
        assert row.ratio == pytest.approx(budget / seconds, rel=0.2)  # seconds printed to 0.1 s


def test_the_report_reads_the_store_like_a_real_one(measured) -> None:
    root, _ = measured
    assert set(read_trial_statuses(root, bench_scale.STUDY).values()) == {"done"}
    assert len(read_trial_statuses(root, bench_scale.STUDY)) == 18
    page = (root / "report" / "index.html").read_text()
    assert "addition/nope/tiny/uniform_length" in page and "addition/rope/tiny/uniform_length" in page
    with open_results(root, bench_scale.STUDY) as con:
        def table(name):
            return run_sql_file(con, sql_path(name), {"resamples": "50"} if name == "lucky_tickets" else None
                                ).to_pylist()

        assert table("coverage") == []  # every trial has the rows every analysis reads
        assert len(table("final_accuracy")) == 18 * len(bench_scale.LENGTHS)
        lucky = table("lucky_tickets")
    assert len(lucky) == 2 * 3  # one row per group and weight seed
    assert {(r["n_weight_seeds"], r["n_data_seeds"], r["skipped_reason"]) for r in lucky} == {(3, 3, None)}
    assert all(r["measured_digits"] == [15, 20, 30, 40] and r["ss_share_weight"] is not None for r in lucky)


def test_files_written_without_fsync_are_the_files_a_trial_writes(tmp_path) -> None:
    rows = [{"step": 1, "digits": 5, "n": 10, "correct": 3, "accuracy": 0.3, "in_distribution": True}]
    durable = write_trial_table(tmp_path / "a", "s", "eval", "t1", rows)
    quick = write_trial_table(tmp_path / "b", "s", "eval", "t1", rows, durable=False)
    assert quick.relative_to(tmp_path / "b") == durable.relative_to(tmp_path / "a")
    assert pq.read_table(quick).equals(pq.read_table(durable))
    assert [p.name for p in quick.parent.iterdir()] == ["part-0.parquet"]


def test_accuracies_follow_the_two_way_random_effects_model() -> None:
    y = bench_scale.accuracies(1, 60, 60)
    outside = np.array(bench_scale.LENGTHS) > bench_scale.TRAIN_DIGITS[1]
    assert y.shape == (1, 60, 60, len(bench_scale.LENGTHS)) and y.min() >= 0 and y.max() <= 1
    y = y[0][:, :, outside]
    # the weight seed's spread (sd 0.12) is larger than the data seed's (0.05); inside
    # the training range accuracy stays near 0.97
    assert y.mean(axis=(1, 2)).std() == pytest.approx(0.12, abs=0.04)
    assert y.mean(axis=(0, 2)).std() == pytest.approx(0.05, abs=0.02)
    assert bench_scale.accuracies(1, 60, 60)[0][:, :, ~outside].mean() == pytest.approx(0.97, abs=0.02)
