"""The bench's real-study scale rows (`lg-study bench --only scale_run`): the memory
arithmetic on made-up samples, and (slow) the rows of a real 3 x 2 study on the local
Ray; the 1,000-trial study is for the bench itself."""

from __future__ import annotations

import pytest

from orchestrator.benchmarks import bench_study_run


def test_memory_growth_is_read_from_a_tenth_of_the_trials_done_to_all_done() -> None:
    # 100 trials: 10 done at 500 MB, all 100 done at 509 MB -> 9 MB over 90 trials
    samples = [(0, 300.0), (5, 480.0), (10, 500.0), (50, 505.0), (100, 509.0), (100, 508.0)]
    assert bench_study_run.memory_per_trial(samples, 100) == pytest.approx(0.1)


def test_memory_growth_is_unknown_when_no_sample_saw_the_end() -> None:
    assert bench_study_run.memory_per_trial([(0, 300.0), (10, 310.0)], 100) is None


def test_memory_reads_this_process_on_linux() -> None:
    import os
    import sys

    memory = bench_study_run.resident_mb(os.getpid())
    if sys.platform.startswith("linux"):
        assert memory is not None and 10 < memory < 100_000
    else:
        assert memory is None


def test_the_study_crosses_every_weight_seed_with_every_data_seed() -> None:
    import yaml

    study = yaml.safe_load(bench_study_run.study_text(40, 25))
    assert study["axes"] == {"seeds.weight": list(range(40)), "seeds.data": list(range(25))}
    assert study["base"]["train"]["steps"] == 1


def test_ten_thousand_trials_are_held_to_their_own_budgets() -> None:
    """The issue's budgets at 10,000 trials: status 3 s, report 20 s, the run 30 min end
    to end; at 1,000 there is no end-to-end row."""
    samples = [(1000, 500.0), (10_000, 950.0)]
    rows = {r.name.split(" (budget")[0]: r for r in bench_study_run.rows(
        10_000, 10_000, wall=1500.0, span=1450.0, samples=samples, growth=0.05, status=2.0, lucky=2.0, report=16.0)}
    assert rows["lg-study status after 10,000 trials"].ratio == pytest.approx(1.5)
    assert rows["lg-study report after 10,000 trials"].ratio == pytest.approx(1.25)
    assert rows["lg-study run end to end, 10,000 one-step trials, 10,000 done"].ratio == pytest.approx(1.2)
    small = [r.name for r in bench_study_run.rows(1000, 1000, 300.0, 250.0, samples, 0.05, 2.0, 2.0, 8.0)]
    assert not any("end to end" in name for name in small)
    assert any("lg-study report after 1,000 trials (budget 10 s" in name for name in small)


@pytest.mark.slow
@pytest.mark.long
def test_a_real_study_gives_one_row_per_measurement() -> None:
    rows = bench_study_run.study_run_scale(trials=6, data_seeds=2)
    assert [r.name.split(" (budget")[0] for r in rows] == [
        "per-trial time of lg-study run once Ray is up, 6 one-step trials, 6 done",
        "driver memory per trial, 6 one-step trials, 6 done",
        "lg-study status after 6 trials",
        "lg-study query lucky_tickets.sql after 6 trials",
        "lg-study report after 6 trials",
        "rows after 6 trials: every trial's rows once in every table (trials complete / trials)",
    ]
    timed = [rows[0], *rows[2:5]]
    assert all(r.ratio is not None and r.ratio > 0 for r in timed)
    assert rows[5].ratio == 1.0 and "eval 6 trials x 2; samples 6 trials x 16" in rows[5].detail, rows[5].detail


def test_bench_without_options_runs_the_quick_rows_and_names_those_it_leaves_out(monkeypatch) -> None:
    from typer.testing import CliRunner

    from orchestrator.benchmarks import bench
    from orchestrator.cli import app

    ran = {}
    monkeypatch.setattr(bench, "run", lambda names, on_result, trials, **where: ran.update(names=names, trials=trials))
    result = CliRunner().invoke(app, ["bench"])
    assert result.exit_code == 0, result.output
    assert {"scale", "scale_run", "seed_numbers", "seeds_run"} <= set(bench.LONG_ROWS)
    assert ran["names"] == [n for n in bench.BENCHMARKS if n not in bench.LONG_ROWS]
    assert "left out: scale_run" in result.output and "--only scale_run" in result.output
    assert "--all" in result.output
    CliRunner().invoke(app, ["bench", "--all"])
    assert ran["names"] == list(bench.BENCHMARKS)
    CliRunner().invoke(app, ["bench", "--only", "scale_run", "--trials", "10000"])
    assert ran == {"names": ["scale_run"], "trials": 10000}
    refused = CliRunner().invoke(app, ["bench", "--trials", "10000"])
    assert refused.exit_code == 2 and "--only scale_run" in refused.output
