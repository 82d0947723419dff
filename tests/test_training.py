"""Training loop: schedule, checkpoint resume, divergence, and the answer records."""

import itertools
import math
from dataclasses import replace

import numpy as np
import pytest
import torch

from lengthgen import TrialConfig, train
from lengthgen.batches import training_batch
from lengthgen.config import EvalConfig, TaskConfig, TrainConfig, derive
from lengthgen.evaluation import EvalSet, LengthResult, _sample_records, summarize
from lengthgen.formats import EncodedQuestions
from lengthgen.model import build_model
from lengthgen.tokenizer import CharTokenizer
from lengthgen.training_step import TrainingStep, learning_rate

CONFIG = TrialConfig(
    task=TaskConfig(name="successor", train_digits=(1, 3)),
    train=TrainConfig(steps=8, batch_size=8, log_every=2, warmup=2),
    eval=EvalConfig(digits=(2, 5), samples=5, every=4),
)


def test_learning_rate_warms_up_then_decays_to_zero():
    config = replace(CONFIG, train=replace(CONFIG.train, steps=100, warmup=10, lr=1.0))
    rates = [learning_rate(config, s) for s in range(100)]
    assert rates[0] == pytest.approx(0.1) and rates[9] == pytest.approx(1.0)
    assert rates[10] == pytest.approx(1.0)
    assert rates[55] == pytest.approx(0.5, abs=0.02)
    assert all(a >= b for a, b in itertools.pairwise(rates[10:]))
    assert learning_rate(config, 100) == pytest.approx(0.0)


def test_the_cosine_decays_to_its_floor_and_a_floor_of_zero_is_the_old_formula_bit_for_bit():
    base = replace(CONFIG, train=replace(CONFIG.train, steps=100, warmup=10, lr=3e-4))
    floored = replace(base, train=replace(base.train, min_lr_ratio=0.1))
    assert learning_rate(floored, 100) == pytest.approx(3e-5)
    assert learning_rate(floored, 55) == pytest.approx(3e-5 + 0.5 * 2.7e-4, rel=0.05)
    assert learning_rate(floored, 5) == learning_rate(base, 5)  # the warm-up is the same
    for step in range(10, 101):
        progress = min(1.0, (step - 10) / 90)
        old = 3e-4 * 0.5 * (1.0 + math.cos(math.pi * progress))
        assert learning_rate(base, step) == old  # exactly: ids and numbers unchanged
    with pytest.raises(ValueError, match=r"train.min_lr_ratio must be in \[0, 1\].*got 1.5"):
        replace(base.train, min_lr_ratio=1.5)


def test_resume_from_checkpoint_equals_uninterrupted_training():
    uninterrupted = train(CONFIG)
    saved = {}

    def stop_at_first_checkpoint(report):
        if report.checkpoint is not None and not saved:
            saved.update(report.checkpoint())
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train(CONFIG, on_report=stop_at_first_checkpoint)
    assert saved["step"] == 4
    resumed = train(CONFIG, resume_state=saved)
    assert [t.loss for t in resumed.train] == [t.loss for t in uninterrupted.train]
    assert [(s, r.correct) for s, r in resumed.eval] == [(s, r.correct) for s, r in uninterrupted.eval]
    assert [s.prediction for s in resumed.samples] == [s.prediction for s in uninterrupted.samples]


def test_reports_arrive_at_log_and_eval_steps():
    reports = []
    result = train(CONFIG, on_report=reports.append)
    assert [r.step for r in reports] == [2, 4, 6, 8]
    assert [bool(r.eval) for r in reports] == [False, True, False, True]
    assert reports[-1].final and reports[-1].status == "done" and result.status == "done"
    assert len(result.samples) == 2 * 5 and len(reports[-1].samples) == 10
    assert not reports[1].samples  # per-question records only at the final evaluation


def test_non_finite_loss_stops_the_trial_as_diverged(monkeypatch):
    real_cross_entropy = torch.nn.functional.cross_entropy
    calls = {"n": 0}

    def explode_at_third_step(*args, **kwargs):
        calls["n"] += 1
        loss = real_cross_entropy(*args, **kwargs)
        return loss * float("nan") if calls["n"] == 3 else loss

    monkeypatch.setattr("lengthgen.training_step.F.cross_entropy", explode_at_third_step)
    reports = []
    result = train(CONFIG, on_report=reports.append)
    assert result.status == "diverged" and result.diverged_at == 3
    assert result.last_finite_loss is not None and np.isfinite(result.last_finite_loss)
    assert reports[-1].status == "diverged" and reports[-1].final


def test_answer_records_count_wrong_digits_and_ends():
    tokenizer = CharTokenizer()
    digit = lambda d: tokenizer.digit_offset + d
    eos = tokenizer.eos_id
    target = np.array([[digit(1), digit(2), digit(3), eos]] * 4)
    predicted = np.array(
        [
            [digit(1), digit(2), digit(3), eos],  # right
            [digit(1), digit(9), digit(3), eos],  # one wrong digit at position 1
            [digit(1), eos, eos, eos],  # ends early: two digits missing
            [digit(1), digit(2), digit(3), digit(4)],  # right digits, does not end
        ]
    )
    mismatch = predicted != target
    correct = ~mismatch.any(axis=1)
    eval_set = EvalSet(3, EncodedQuestions(np.zeros((4, 1)), 1, target[:, :3]), np.array([0, 1, 2, 3]))
    records = _sample_records(eval_set, predicted, target, mismatch, correct, tokenizer)
    assert [r.correct for r in records] == [True, False, False, False]
    assert [r.wrong_digits for r in records] == [0, 1, 2, 0]
    assert [r.first_wrong for r in records] == [None, 1, 1, 3]
    assert [r.prediction for r in records] == ["123", "193", "1", "1234"]
    assert {r.target for r in records} == {"123"}


def test_summary_metrics():
    results = [
        LengthResult(2, 10, 10, 1.0, True),
        LengthResult(3, 10, 9, 0.9, True),
        LengthResult(5, 10, 10, 1.0, False),
        LengthResult(8, 10, 0, 0.0, False),
    ]
    assert summarize(results) == {
        "in_distribution_accuracy": pytest.approx(0.95),
        "ood_accuracy_mean": pytest.approx(0.5),
        "longest_99": 5.0,
    }


def test_a_trial_trains_by_its_training_step_alone():
    """A trial's weights after its steps are those of TrainingStep applied to its batches
    from its initial weights, bit for bit (dropout, length buckets, clipping and weight
    decay on): the step `lg-study bench` times is the step trials take."""
    trial = replace(
        CONFIG, model=replace(CONFIG.model, dropout=0.1),
        train=replace(CONFIG.train, steps=4, log_every=4, length_buckets=2), eval=replace(CONFIG.eval, every=0),
    )
    states = []
    train(trial, on_report=lambda r: r.checkpoint and states.append(r.checkpoint()))
    model = build_model(trial.model, len(CharTokenizer()), trial.seeds.weight, trial.input_layout).train()
    initial = model.token_embedding.weight.detach().clone()
    step = TrainingStep(trial, model, torch.device("cpu"))
    for s in range(trial.train.steps):
        step(s, training_batch(trial, derive(trial).task, derive(trial).distribution, CharTokenizer(), s))
    trained = states[-1]["model"]
    assert all(torch.equal(tensor, trained[name]) for name, tensor in model.state_dict().items())
    assert not torch.equal(model.token_embedding.weight, initial)
