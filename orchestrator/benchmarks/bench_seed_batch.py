"""`lg-study bench --only seeds`: K seeds trained as one seed batch (lengthgen.seed_batch)
vs the same K trials trained one after the other, in one process, evaluation included.

The CPU row trains the quickstart's tiny model (K = 4). The GPU rows (2m and mini at
K = 4 and 15, the 25 M recipe's size at K = 4) run the same code on CUDA; on a machine
without it each says why it was skipped. Neither row counts Ray, MLflow or the worker's
start-up, which a seed batch also pays once instead of K times."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import torch

from lengthgen import train
from lengthgen.config import (
    EvalConfig,
    FormatConfig,
    ModelConfig,
    SeedConfig,
    TaskConfig,
    TrainConfig,
    TrialConfig,
)
from lengthgen.seed_batch import train_seed_batch
from orchestrator.benchmarks.bench_gpu import NO_CUDA, cuda_available
from orchestrator.benchmarks.measurement import Measurement

#: the quickstart's study file, which `quickstart_run` runs at fewer steps
QUICKSTART = Path(__file__).resolve().parents[2] / "studies" / "quickstart.yaml"
#: (size, K) of the GPU rows: 2m and mini as the small-trial rows, and the 25 M recipe's size
GPU_BATCHES = (("2m", 4), ("2m", 15), ("mini", 4), ("mini", 15), ("25m", 4))


def quickstart_trial(size: str = "tiny", steps: int = 40) -> TrialConfig:
    """The quickstart's base trial (studies/quickstart.yaml), `steps` steps, one evaluation."""
    return TrialConfig(
        task=TaskConfig(name="successor", train_digits=(1, 4)), format=FormatConfig(reverse=True, pad=True),
        model=ModelConfig(arch="decoder", size=size, pe="rope", positions="plain", max_positions=64),
        train=TrainConfig(steps=steps, batch_size=64, lr=3.0e-3, warmup=min(100, steps // 2), weight_decay=0.1,
                          log_every=max(1, steps // 4)),
        eval=EvalConfig(digits=(2, 4, 8, 16), samples=200, every=0),
    )


def seeds_of(config: TrialConfig, k: int) -> list[TrialConfig]:
    """K trials of `config` at weight seeds 0 .. K-1 and data seeds 0, 1, 0, 1, ..."""
    return [replace(config, seeds=SeedConfig(weight=w, data=w % 2)) for w in range(k)]


def batch_vs_separate(config: TrialConfig, k: int, device: str) -> tuple[float, float, int]:
    """(seconds as one seed batch, seconds as K trials one after the other, tokens trained
    in all): whole trials, evaluation included, each mode after a one-step warm-up."""
    configs = seeds_of(config, k)
    warm = [replace(c, train=replace(c.train, steps=1, warmup=1)) for c in configs]
    train_seed_batch(warm, device=device), train(warm[0], device=device)

    def timed(work) -> float:
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        started = time.perf_counter()
        work()
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        return time.perf_counter() - started

    results: list = []
    batch_s = timed(lambda: results.extend(train_seed_batch(configs, device=device)))
    separate_s = timed(lambda: [train(c, device=device) for c in configs])
    return batch_s, separate_s, sum(result.train[-1].tokens for result in results)


def _row(name: str, config: TrialConfig, k: int, device: str, threads: int) -> Measurement:
    batch_s, separate_s, tokens = batch_vs_separate(config, k, device)
    return Measurement(name, separate_s / batch_s, "report",
                       f"{tokens / batch_s:,.0f} vs {tokens / separate_s:,.0f} tokens/s ({batch_s:.1f} s vs "
                       f"{separate_s:.1f} s), {config.train.steps} steps of batch {config.train.batch_size} each "
                       f"and one evaluation, {threads} thread(s), one process, no Ray or MLflow")


def seed_batch_rows(cpu_steps: int = 40, gpu_steps: int = 200, threads: int = 1,
                    gpu_batches: tuple[tuple[str, int], ...] = GPU_BATCHES) -> list[Measurement]:
    """The CPU row (quickstart tiny, K = 4, `threads` torch threads as a trial has), then
    the GPU rows, skipped without CUDA."""
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        rows = [_row("seed batch tokens/s: 4 seeds as one batch vs 4 trials (CPU, quickstart tiny)",
                     quickstart_trial("tiny", cpu_steps), 4, "cpu", threads)]
    finally:
        torch.set_num_threads(previous)
    for size, k in gpu_batches:
        name = f"GPU seed batch tokens/s: {k} seeds as one batch vs {k} trials ({size})"
        if not cuda_available():
            rows.append(Measurement(name, None, "report", NO_CUDA))
            continue
        rows.append(_row(name, quickstart_trial(size, gpu_steps), k, "cuda", torch.get_num_threads()))
    return rows


def windowed_trial(steps: int = 2000) -> TrialConfig:
    """The quickstart's windowed NoPE trial, the model whose accuracy beyond training
    depends most on its seeds."""
    config = quickstart_trial("tiny", steps)
    return replace(config, model=replace(config.model, pe="nope", attention_bias="windowed", window=1))


def accuracy_moves(steps: int = 2000, k: int = 4) -> tuple[list[float], list[float]]:
    """Per weight seed 0 .. k-1 and test length: |accuracy batched - alone| and
    |accuracy with one initial weight moved by one ulp (seeds.perturb 1) - alone|."""
    configs = seeds_of(windowed_trial(steps), k)
    configs = [replace(c, seeds=replace(c.seeds, data=0)) for c in configs]

    def accuracies(result) -> list[float]:
        return [r.accuracy for step, r in sorted(result.eval, key=lambda pair: pair[1].digits) if step == steps]

    batched = [accuracies(r) for r in train_seed_batch(configs)]
    alone = [accuracies(train(c)) for c in configs]
    moved = [accuracies(train(replace(c, seeds=replace(c.seeds, perturb=1)))) for c in configs]
    by_batch = [abs(a - b) for seed_a, seed_b in zip(alone, batched) for a, b in zip(seed_a, seed_b)]
    by_ulp = [abs(a - m) for seed_a, seed_m in zip(alone, moved) for a, m in zip(seed_a, seed_m)]
    return by_batch, by_ulp


def batching_vs_ulp(steps: int = 2000, k: int = 4) -> Measurement:
    """`lg-study bench --only seed_numbers`: does training in a seed batch move a trial's
    accuracies more than a one-ulp perturbation of its initial weights does? The ratio is
    the mean move by one ulp over the mean move by batching (>= 1: batching moves them
    no more than floating-point noise does)."""
    torch.set_num_threads(1)
    by_batch, by_ulp = accuracy_moves(steps, k)
    mean_batch, mean_ulp = sum(by_batch) / len(by_batch), sum(by_ulp) / len(by_ulp)
    return Measurement(
        "seed batch vs one-ulp replicate: mean accuracy move by one ulp / by batching (quickstart windowed NoPE)",
        mean_ulp / mean_batch if mean_batch else None, "report",
        f"{k} weight seeds x test lengths, {steps} steps: batching moves accuracy by {mean_batch:.3f} on average "
        f"(at most {max(by_batch):.3f}), one ulp by {mean_ulp:.3f} (at most {max(by_ulp):.3f})",
    )


def quickstart_text(seeds_per_trial: int, steps: int) -> str:
    """The quickstart's study file at `steps` steps with `resources.seeds_per_trial`."""
    text = QUICKSTART.read_text().replace("train: {steps: 2000,", f"train: {{steps: {steps},")
    return text.replace("resources: {cpus_per_trial: 1, gpus_per_trial: 0}",
                        f"resources: {{cpus_per_trial: 1, gpus_per_trial: 0, seeds_per_trial: {seeds_per_trial}}}")


def quickstart_run_seconds(seeds_per_trial: int, steps: int, folder: Path) -> float:
    """Wall time of `lg-study run` on the quickstart's 16 trials at `steps` steps with
    `resources.seeds_per_trial`, Ray's start included."""
    folder.mkdir(parents=True, exist_ok=True)
    study = folder / f"quickstart_{seeds_per_trial}.yaml"
    study.write_text(quickstart_text(seeds_per_trial, steps))
    command = [sys.executable, "-m", "orchestrator.cli", "run", str(study), "--results", str(folder / str(seeds_per_trial))]
    started = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True, env={**os.environ, "RAY_ADDRESS": ""})
    return time.perf_counter() - started


def quickstart_run(steps: int = 200) -> Measurement:
    """`lg-study bench --only seeds_run`: the quickstart's 16 trials end to end (Ray,
    MLflow, Parquet, evaluation), its groups in seed batches of 4 vs one trial per Tune
    trial, each at `steps` steps. Each mode runs twice, in the order 1, 4, 4, 1, so that
    a load that grows or fades during the run (other processes on shared cores) favours
    neither mode; the ratio is of the two modes' summed times."""
    order = (1, 4, 4, 1)
    with tempfile.TemporaryDirectory() as folder:
        times = [quickstart_run_seconds(k, steps, Path(folder) / str(run)) for run, k in enumerate(order)]
    separate, batched = (sum(t for k, t in zip(order, times) if k == size) for size in (1, 4))
    each = ", ".join(f"{k}: {t:.1f} s" for k, t in zip(order, times))
    return Measurement("lg-study run of the quickstart: seeds_per_trial 4 vs 1, end to end", separate / batched,
                       ">= 1.2", f"16 trials of {steps} steps, each mode twice: {batched:.1f} s in seed batches of 4 vs "
                       f"{separate:.1f} s one trial per Tune trial (in order, seeds_per_trial: {each}), Ray start "
                       f"included")
