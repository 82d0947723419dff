"""The quickstart's training step on one CPU thread: its achieved model FLOP rate as a
share of the one-thread 1024² float32 matmul rate measured in the same run.

A quickstart trial's step is small (64 questions of 1-4 digits, d_model 64): per-call
overhead and the CPU kernels' slow paths for rows shorter than a vector register (a
softmax over 12 keys) cost more than its matmuls. This row says how far from the
machine's matmul rate the step runs, for each of the quickstart's four models.
"""

from __future__ import annotations

from pathlib import Path

import torch

from lengthgen.batches import training_batch
from lengthgen.config import derive
from lengthgen.tokenizer import CharTokenizer
from lengthgen.training import phase_model
from orchestrator.benchmarks.measurement import Measurement, best_seconds
from orchestrator.studies.study import load_study
from orchestrator.studies.study_scale import trial_cost

QUICKSTART = Path(__file__).resolve().parents[2] / "studies" / "quickstart.yaml"
#: the share of the matmul rate issue 56 asks a quickstart step to reach
GOAL = 0.5


def matmul_rate(size: int = 1024, repeat: int = 3) -> float:
    """FLOP/s of one size x size float32 matmul, best of `repeat` runs of 10."""
    a, b = torch.randn(size, size), torch.randn(size, size)
    a @ b
    return 10 * 2 * size**3 / best_seconds(lambda: [a @ b for _ in range(10)], repeat)


def step_rate(config, steps: int = 60, repeat: int = 3) -> float:
    """Model FLOP/s of the trial's training step (study_scale.trial_cost's count per step)
    over batches `steps`..2·`steps` of its stream, after `steps` warm-up steps."""
    derived, tokenizer = derive(config), CharTokenizer()
    model, training_step = phase_model(config, 0, None, {}, torch.device("cpu"))
    model.train()
    batches = [training_batch(config, derived.task, derived.distribution, tokenizer, n) for n in range(2 * steps)]
    for n in range(steps):
        training_step(n, batches[n]).item()
    seconds = best_seconds(lambda: [training_step(n, batches[n]).item() for n in range(steps, 2 * steps)], repeat)
    return trial_cost(config).flops / config.train.steps * steps / seconds


def quickstart_step_rate(steps: int = 60, repeat: int = 3) -> list[Measurement]:
    """One row per quickstart model (its first trial): step FLOP/s over matmul FLOP/s."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        study = load_study(QUICKSTART)
        firsts = {study.group_label(t): t for t in reversed(study.trials)}
        rows = []
        for label, config in sorted(firsts.items()):
            reference = matmul_rate(repeat=repeat)
            rate = step_rate(config, steps, repeat)
            rows.append(Measurement(
                f"quickstart step FLOP rate vs one-thread matmul rate: {label}", rate / reference,
                f">= {GOAL}", f"{rate / 1e9:.1f} vs {reference / 1e9:.1f} GFLOP/s (one thread; 1024² float32 "
                f"matmul measured just before)"))
        return rows
    finally:
        torch.set_num_threads(threads)
