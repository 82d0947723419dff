"""Seed batches (lengthgen.seed_batch): K trials that differ only in their seeds train as
one stacked model, each still its own trial. What is promised: the initial weights and
the data of each seed are bit-identical to its solo run; the first step's losses and
gradients equal the solo run's within 1e-5 relative; no seed's trajectory depends on
another seed; a diverging seed stops alone; and what cannot be batched is refused."""

from __future__ import annotations

import hashlib
from dataclasses import replace

import numpy as np
import pytest
import torch

from lengthgen import TrialConfig, train
from lengthgen.batch_ramp import BatchRamp
from lengthgen.batches import training_batch
from lengthgen.config import (
    EvalConfig,
    FormatConfig,
    ModelConfig,
    SeedConfig,
    TaskConfig,
    TrainConfig,
    derive,
)
from lengthgen.model import build_model
from lengthgen.model.position.pe import POSITIONAL_ENCODINGS
from lengthgen.seed_batch import SeedBatchStep, StackedModels, check_seed_batch, train_seed_batch
from lengthgen.tokenizer import CharTokenizer
from lengthgen.training_step import TrainingStep, accumulate_gradients

CPU = torch.device("cpu")
# unpadded operands: each data seed's batches have widths of their own, so the batch pads
BASE = TrialConfig(
    task=TaskConfig(name="successor", train_digits=(1, 4)),
    format=FormatConfig(pad=False),
    train=TrainConfig(steps=8, batch_size=2, log_every=2, warmup=2, grad_clip=0.05, lr=3e-3),
    eval=EvalConfig(digits=(2, 5), samples=5, every=4),
)
#: the quickstart's models (the windowed bias needs padded, reversed operands: one width)
MODELS = {
    "rope": {"model": ModelConfig(pe="rope")},
    "windowed": {"model": ModelConfig(pe="nope", attention_bias="windowed", window=1),
                 "format": FormatConfig(reverse=True, pad=True)},
    "coupled": {"model": ModelConfig(pe="learned", positions="coupled", max_positions=32)},
}


def seeded(weight: int, data: int, variant: dict | None = None, perturb: int = 0) -> TrialConfig:
    return replace(BASE, **(variant or {}), seeds=SeedConfig(weight=weight, data=data, perturb=perturb))


def digest(tensors) -> str:
    sha = hashlib.sha256()
    for t in tensors:
        sha.update(t.detach().contiguous().numpy().tobytes())
    return sha.hexdigest()


def solo_parts(config: TrialConfig, step: int):
    model = build_model(config.model, len(CharTokenizer()), config.seeds.weight, derive(config).input_layout,
                        config.seeds.perturb)
    training_step = TrainingStep(config, model, CPU)
    batch = training_batch(config, derive(config).task, derive(config).distribution, CharTokenizer(), step)
    return model, training_step, training_step.parts(step, batch)


def batch_of(configs: list[TrialConfig], step: int = 0):
    solos = [solo_parts(config, step) for config in configs]
    stacked = StackedModels([model for model, _, _ in solos])
    return solos, stacked, SeedBatchStep(configs[0], stacked, CPU)


def test_each_seeds_initial_weights_and_data_are_bit_identical_to_its_solo_run():
    configs = [seeded(0, 0), seeded(1, 2), seeded(3, 1, perturb=1)]
    solos, stacked, _ = batch_of(configs, step=1)
    widths = {parts[0][0].tokens.shape[1] for _, _, parts in solos}
    assert len(widths) > 1  # the batch pads: the test covers seeds of different widths
    for k, config in enumerate(configs):
        alone, _, (alone_parts,) = solo_parts(config, 1)
        assert digest(stacked.params[name][k] for name, _ in alone.named_parameters()) == digest(alone.parameters())
        (batch, positions) = solos[k][2][0]
        assert digest([*batch[:2], batch.prompt_lengths, *positions]) == digest(
            [*alone_parts[0][:2], alone_parts[0].prompt_lengths, *alone_parts[1]]
        )


@pytest.mark.parametrize("model", sorted(MODELS))
def test_the_first_steps_losses_and_gradients_equal_each_solo_run_within_1e_5(model):
    configs = [seeded(0, 0, MODELS[model]), seeded(1, 1, MODELS[model]), seeded(2, 3, MODELS[model])]
    solos, stacked, _ = batch_of(configs)
    assert_first_step_matches_solo(solos, stacked, CPU)


def assert_first_step_matches_solo(solos, stacked: StackedModels, device: torch.device) -> None:
    """Each seed's first-step loss and gradients in the stack equal its solo run's within
    1e-5 relative (`solos`: (model, training step, parts) of each seed, on `device`).
    Relative to the parameter's largest gradient, or to a 1e-2 share of the model's
    where that is smaller: a gradient that is zero but for rounding (the last bias of
    FIRE's MLP shifts every logit of a head alike, which softmax ignores) has no scale
    of its own."""
    losses = stacked.forward_losses([parts[0] for _, _, parts in solos], device, "fp32")
    sum(losses).backward()
    for k, (alone, training_step, parts) in enumerate(solos):
        solo_loss = accumulate_gradients(training_step.forward_batch, parts, device, "fp32")
        assert losses[k].item() == pytest.approx(solo_loss.item(), rel=1e-5)
        largest = max(p.grad.abs().max() for p in alone.parameters() if p.grad is not None)
        for name, parameter in alone.named_parameters():
            batched = stacked.params[name].grad[k]
            scale = torch.maximum(parameter.grad.abs().max(), 1e-2 * largest).clamp_min(1e-12)
            assert ((batched - parameter.grad).abs().max() / scale).item() < 1e-5, name


#: every positional encoding a decoder on BASE's task takes (upe needs an aligned
#: multiplication); FIRE has scalar parameters, stacked as (K,)
BATCHED_PES = sorted(set(POSITIONAL_ENCODINGS) - {"upe"})


@pytest.mark.parametrize("pe", BATCHED_PES)
def test_clipping_is_per_seed_and_matches_clip_grad_norm(pe):
    configs = [seeded(0, 0, {"model": ModelConfig(pe=pe)}), seeded(1, 1, {"model": ModelConfig(pe=pe)})]
    solos, stacked, batch_step = batch_of(configs)
    sum(stacked.forward_losses([parts[0] for _, _, parts in solos], CPU, "fp32")).backward()
    batch_step._mask_and_clip(torch.tensor([True, True]))
    for k, (alone, training_step, parts) in enumerate(solos):
        accumulate_gradients(training_step.forward_batch, parts, CPU, "fp32")
        torch.nn.utils.clip_grad_norm_(alone.parameters(), BASE.train.grad_clip)
        for name, parameter in alone.named_parameters():
            assert torch.allclose(stacked.params[name].grad[k], parameter.grad, rtol=1e-5, atol=1e-9), name


def losses_of(result) -> list[float]:
    return [log.loss for log in result.train]


def test_a_seeds_trajectory_does_not_depend_on_the_other_seeds():
    with_one = train_seed_batch([seeded(0, 0), seeded(1, 1)])
    with_other = train_seed_batch([seeded(0, 0), seeded(5, 3), seeded(2, 2)])
    np.testing.assert_allclose(losses_of(with_one[0]), losses_of(with_other[0]), rtol=1e-5)
    assert losses_of(with_one[1]) != losses_of(with_other[1])


def test_a_batched_seed_replicates_its_solo_run_with_its_reports_and_rows():
    configs = [seeded(0, 0), seeded(1, 1)]
    reports: dict[int, list] = {0: [], 1: []}
    batched = train_seed_batch(configs, on_report=lambda k, report: reports[k].append(report))
    for k, config in enumerate(configs):
        alone_reports = []
        alone = train(config, on_report=alone_reports.append)
        assert [r.step for r in reports[k]] == [r.step for r in alone_reports] == [2, 4, 6, 8]
        assert [bool(r.eval) for r in reports[k]] == [bool(r.eval) for r in alone_reports]
        assert reports[k][-1].final and reports[k][-1].status == "done"
        assert batched[k].status == "done" and batched[k].steps == 8
        assert [t.tokens for t in batched[k].train] == [t.tokens for t in alone.train]
        np.testing.assert_allclose(losses_of(batched[k]), losses_of(alone), rtol=1e-4)
        assert len(batched[k].samples) == len(alone.samples) == 2 * 5


def test_a_batch_checkpoint_resumes_alone_or_batched_as_the_solo_form():
    configs = [seeded(0, 0), seeded(1, 1)]
    saved: dict[int, dict] = {}

    def stop_at_first_checkpoint(k, report):
        if report.checkpoint is not None:
            saved[k] = report.checkpoint()
            if len(saved) == len(configs):
                raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train_seed_batch(configs, on_report=stop_at_first_checkpoint)
    assert {state["step"] for state in saved.values()} == {4}
    uninterrupted = train_seed_batch(configs)
    resumed = train_seed_batch(configs, resume_states=[saved[0], saved[1]])
    alone = train(configs[1], resume_state=saved[1])
    for k in range(2):
        assert losses_of(resumed[k]) == losses_of(uninterrupted[k])
        assert [(s, r.correct) for s, r in resumed[k].eval] == [(s, r.correct) for s, r in uninterrupted[k].eval]
    np.testing.assert_allclose(losses_of(alone), losses_of(uninterrupted[1]), rtol=1e-4)
    with pytest.raises(ValueError, match="resume at one step"):
        train_seed_batch(configs, resume_states=[saved[0], None])


def test_a_diverging_seed_stops_alone_and_the_others_go_on(monkeypatch):
    from lengthgen import seed_batch

    real_phase_model = seed_batch.phase_model

    def poisoned_weight_seed_1(config, *args):
        model, training_step = real_phase_model(config, *args)
        if config.seeds.weight == 1:
            with torch.no_grad():
                model.lm_head.weight.fill_(float("inf"))
        return model, training_step

    monkeypatch.setattr(seed_batch, "phase_model", poisoned_weight_seed_1)
    reports: dict[int, list] = {0: [], 1: [], 2: []}
    results = train_seed_batch([seeded(0, 0), seeded(1, 1), seeded(2, 2)],
                               on_report=lambda k, report: reports[k].append(report))
    assert results[1].status == "diverged" and results[1].diverged_at == 1
    assert reports[1][-1].status == "diverged" and len(reports[1]) == 1
    monkeypatch.undo()
    healthy = train_seed_batch([seeded(0, 0), seeded(2, 2)])
    for k, other in ((0, 0), (2, 1)):
        assert results[k].status == "done"
        np.testing.assert_allclose(losses_of(results[k]), losses_of(healthy[other]), rtol=1e-5)


@pytest.mark.parametrize(
    ("change", "field_name"),
    [
        ({"model": ModelConfig(dropout=0.1)}, "model.dropout"),
        ({"model": ModelConfig(arch="encoder_decoder")}, "model.arch"),
        ({"train": replace(BASE.train, length_buckets=2)}, "train.length_buckets"),
        ({"train": replace(BASE.train, batch_ramp=BatchRamp(to=4, over=0.5))}, "train.batch_ramp"),
        ({"model": ModelConfig(state_init="noise")}, "model.state_init"),
    ],
)
def test_what_cannot_be_batched_is_refused_naming_the_field(change, field_name):
    config = replace(BASE, **change)
    with pytest.raises(ValueError, match=field_name.replace(".", r"\.")):
        check_seed_batch([config, replace(config, seeds=SeedConfig(weight=1))])


def test_a_batch_of_trials_differing_in_more_than_seeds_is_refused():
    other = replace(BASE, train=replace(BASE.train, lr=1e-3), seeds=SeedConfig(weight=1))
    with pytest.raises(ValueError, match=r"differ in train\.lr"):
        check_seed_batch([BASE, other])
    check_seed_batch([BASE, replace(BASE, seeds=SeedConfig(weight=1, data=2, eval=3, perturb=1))])


def test_the_bench_row_times_both_modes_and_skips_gpu_rows_without_cuda(monkeypatch):
    from orchestrator.benchmarks import bench_seed_batch

    monkeypatch.setattr(bench_seed_batch, "cuda_available", lambda: False)
    config = replace(bench_seed_batch.quickstart_trial("tiny", steps=2), eval=EvalConfig(digits=(2,), samples=4))
    batch_s, separate_s, tokens = bench_seed_batch.batch_vs_separate(config, 2, "cpu")
    assert batch_s > 0 and separate_s > 0
    assert tokens == sum(train(c).train[-1].tokens for c in bench_seed_batch.seeds_of(config, 2))
    monkeypatch.setattr(bench_seed_batch, "quickstart_trial", lambda size, steps: config)
    rows = bench_seed_batch.seed_batch_rows(gpu_batches=(("2m", 4),))
    assert rows[0].ratio > 0 and "tokens/s" in rows[0].detail
    assert rows[1].ratio is None and rows[1].detail == bench_seed_batch.NO_CUDA
