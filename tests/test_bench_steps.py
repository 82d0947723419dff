"""The bench's training rows time the step trials take: every one of them trains
through lengthgen.training_step.TrainingStep (tests/test_training.py proves that `train`
takes that step and nothing else, bit for bit)."""

from __future__ import annotations

import pytest

from lengthgen import training_step
from orchestrator.benchmarks import bench, bench_cpu_trial, bench_gpu


@pytest.fixture
def updated_models(monkeypatch) -> list[str]:
    """The class name of the model of every TrainingStep.update call made during a test."""
    names, update = [], training_step.TrainingStep.update

    def recorded(step, number, parts):
        names.append(type(step.model).__name__)
        return update(step, number, parts)

    monkeypatch.setattr(training_step.TrainingStep, "update", recorded)
    return names


def test_the_throughput_rows_train_both_models_by_the_trial_step(updated_models):
    rows = bench.training_throughput(pes=("rope",), size="tiny", batch=2, length=8, steps=1)
    assert rows[0].ratio > 0
    assert {"DecoderLM", "BareDecoder"} <= set(updated_models)


def test_the_bucketing_and_flop_rows_train_by_the_trial_step(updated_models):
    assert bench.bucketing(digits=4, batch=8, buckets=2, steps=1).ratio > 0
    assert bench.flop_rate(size="tiny", batch=2, length=8, steps=1).ratio > 0
    assert set(updated_models) == {"DecoderLM"} and len(updated_models) >= 2


def test_the_gpu_step_rows_train_by_the_trial_step(updated_models):
    config = bench_gpu.small_trial("tiny", steps=10, log_every=5)
    assert bench_gpu.step_rate(config, "cpu", batches=2, rounds=1) > 0
    assert updated_models == ["DecoderLM"] * 2 * 3  # two batches, in each of three passes


def test_the_quickstart_step_rows_train_each_quickstart_model_by_the_trial_step(updated_models):
    rows = bench_cpu_trial.quickstart_step_rate(steps=2, repeat=1)
    assert len(rows) == 4 and all(row.ratio > 0 and row.target == ">= 0.5" for row in rows)
    # per model: two warm-up steps and two timed ones
    assert updated_models == ["DecoderLM"] * 4 * 4
