"""The GPU rows of `lg-study bench` (`--only gpu`): small trials packed on one GPU
through Ray's fractional GPUs, torch.compile and CUDA graphs, each against the same
trial alone or eager; on a machine without CUDA every row says why it was skipped."""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from lengthgen.batches import training_batch
from lengthgen.compiled_step import CompiledForward
from lengthgen.config import (
    EvalConfig,
    FormatConfig,
    ModelConfig,
    TaskConfig,
    TrainConfig,
    TrialConfig,
)
from lengthgen.determinism import deterministic
from lengthgen.distributions import DISTRIBUTIONS
from lengthgen.model import build_model
from lengthgen.tasks import build_task
from lengthgen.tokenizer import CharTokenizer
from lengthgen.training_step import TrainingStep
from orchestrator.benchmarks.measurement import Measurement, best_seconds
from orchestrator.studies.config_paths import TRIAL_CONFIG

NO_CUDA = "skipped: no CUDA device"
GPU_SIZES = ("2m", "mini")


def cuda_available() -> bool:
    return torch.cuda.is_available()


def small_trial(size: str, steps: int, log_every: int) -> TrialConfig:
    """One small trial of a robustness study: 1-10-digit addition, reversed, RoPE decoder."""
    return TrialConfig(
        task=TaskConfig(name="addition", train_digits=(1, 10)), format=FormatConfig(reverse=True),
        model=ModelConfig(size=size, pe="rope"),
        train=TrainConfig(steps=steps, batch_size=64, warmup=10, log_every=log_every),
        eval=EvalConfig(digits=(2,), samples=8, every=0),
    )


def timed_trial(config: dict, device: str, barrier: str, count: int) -> list[tuple[float, int]]:
    """Train one trial; (wall-clock time, tokens trained on so far) at each logged step,
    timed before the step's evaluation. Runs in a Ray worker (`packed_rate`): it starts
    training once all `count` workers are ready (imports done, CUDA started), each
    having left a file in the `barrier` folder, so that their start-ups do not count."""
    from lengthgen import train

    torch.set_num_threads(1)
    warm = torch.zeros(1, device=device, requires_grad=True)  # CUDA, autograd, and AdamW's
    warm.sum().backward()  # first step, which imports torch._dynamo: seconds, not the trial's
    torch.optim.AdamW([warm]).step()
    folder = Path(barrier)
    (folder / f"{os.getpid()}-{time.time_ns()}").touch()
    deadline = time.monotonic() + 600
    while len(list(folder.iterdir())) < count and time.monotonic() < deadline:
        time.sleep(0.01)
    started: list[float] = []  # the trial's start on this clock: TrainLog.wall_s counts from it

    def on_report(report) -> None:
        if report.train is not None and not started:
            started.append(time.time() - report.train.wall_s)

    logs = train(TRIAL_CONFIG.validate_python(config), on_report=on_report, device=device).train
    return [(started[0] + log.wall_s, log.tokens) for log in logs]


def rate_over_common_window(trials: list[list[tuple[float, int]]]) -> tuple[float, float] | None:
    """Tokens/s of trials run at once, summed over the time all of them were training
    past their first logged step (each trial's tokens interpolated at the window's
    ends); and that window's length. None when they never all ran at once."""
    start = max(samples[0][0] for samples in trials)
    end = min(samples[-1][0] for samples in trials)
    if end <= start:
        return None
    tokens = sum(float(np.interp(end, *zip(*samples)) - np.interp(start, *zip(*samples))) for samples in trials)
    return tokens / (end - start), end - start


def packed_rate(config: TrialConfig, trials: int, device: str, resources: dict[str, float]) -> tuple[float, float] | None:
    """Tokens/s of `trials` copies of one trial (weight seeds 0, 1, ...) started at once
    as Ray tasks that each ask for `resources` (e.g. a quarter GPU): their summed rate
    over the time they all trained (`rate_over_common_window`). Ray must be running."""
    import ray

    remote = ray.remote(**resources)(timed_trial)
    configs = [replace(config, seeds=replace(config.seeds, weight=seed)).to_dict() for seed in range(trials)]
    with tempfile.TemporaryDirectory() as barrier:
        return rate_over_common_window(ray.get([remote.remote(c, device, barrier, trials) for c in configs]))


def step_rate(config: TrialConfig, device: str, mode: str | None = None, backend: str = "inductor",
              batches: int = 8, rounds: int = 3, deterministic_algorithms: bool = False) -> float:
    """Training tokens/s (non-padding) of the trial's step (lengthgen.training_step.TrainingStep,
    its positions drawn beforehand) over its first `batches` batches: eager (`mode`
    None), or with the forward compiled by torch.compile in `mode` ("default";
    "reduce-overhead" adds CUDA graphs); under
    torch's deterministic algorithms with `deterministic_algorithms` (train.deterministic).
    Two passes over the batches first compile and record; then the best of `rounds`."""
    target = torch.device(device)
    with deterministic(deterministic_algorithms, target):
        return _step_rate(config, target, mode, backend, batches, rounds)


def _step_rate(config: TrialConfig, target: torch.device, mode: str | None, backend: str,
               batches: int, rounds: int) -> float:
    tokenizer, task = CharTokenizer(), build_task(config.task)
    distribution = DISTRIBUTIONS[config.data.distribution]()
    model = build_model(config.model, len(tokenizer), 0, config.input_layout).to(target)
    forward = model.forward_batch if mode is None else CompiledForward(model, backend, mode)
    step = TrainingStep(config, model, target, forward)
    prepared, real = [], 0
    for s in range(batches):
        batch = training_batch(config, task, distribution, tokenizer, s)
        prepared.append((s, step.parts(s, batch)))
        real += int((batch.tokens != tokenizer.pad_id).sum())

    def one_pass() -> None:
        for s, parts in prepared:
            step.update(s, parts)
        if target.type == "cuda":
            torch.cuda.synchronize()

    one_pass(), one_pass()
    return real / best_seconds(one_pass, rounds)


def gpu(sizes: tuple[str, ...] = GPU_SIZES, trials: int = 4, steps: int = 500, device: str | None = None,
        resources: dict[str, float] | None = None, compile_backend: str = "inductor",
        step_batches: int = 8) -> list[Measurement]:
    """Small trials on a GPU, each size: `trials` trials sharing the GPU through Ray's
    fractional GPUs (gpus_per_trial 1/trials) vs one alone, and the training step with
    torch.compile and with CUDA graphs vs eager. Only where CUDA is present, unless
    `device` (and Ray `resources` per trial) are given, as a test does on the CPU."""
    names = [name for size in sizes for name in (
        f"GPU packing: {trials} trials at gpus_per_trial {1 / trials:g} vs 1 alone ({size})",
        f"GPU training tokens/s: torch.compile vs eager ({size})",
        f"GPU training tokens/s: CUDA graphs (compile reduce-overhead) vs eager ({size})",
        f"GPU training tokens/s: train.deterministic vs default ({size})",
    )]
    if device is None:
        if not cuda_available():
            return [Measurement(name, None, "report", NO_CUDA) for name in names]
        device = "cuda"
    import ray

    from orchestrator.running.tune_runner import start_ray

    resources = resources or {"num_cpus": 1, "num_gpus": 1 / trials}
    alone_resources = {**resources, **({"num_gpus": 1} if "num_gpus" in resources else {})}
    started_here = not ray.is_initialized()
    start_ray(None, num_gpus=1 if "num_gpus" in resources else None)
    rows = []
    try:
        for size in sizes:
            config = small_trial(size, steps, log_every=max(1, steps // 20))
            alone = packed_rate(config, 1, device, alone_resources)
            packed = packed_rate(config, trials, device, resources)
            if alone is None or packed is None:
                packing = Measurement(names[len(rows)], None, "report", "the trials never all trained at once")
            else:
                packing = Measurement(names[len(rows)], packed[0] / alone[0], "report",
                                      f"{packed[0]:,.0f} tokens/s in all from {trials} trials at once (over "
                                      f"{packed[1]:.1f} s) vs {alone[0]:,.0f} tokens/s alone; batch 64, "
                                      f"1-10-digit addition")
            eager = step_rate(config, device, batches=step_batches)
            compiled = step_rate(config, device, "default", compile_backend, step_batches)
            skipped = _cudagraph_skips()
            graphs = step_rate(config, device, "reduce-overhead", compile_backend, step_batches)
            skipped = _cudagraph_skips() - skipped
            exact = step_rate(config, device, batches=step_batches, deterministic_algorithms=True)
            rows += [
                packing,
                Measurement(names[len(rows) + 1], compiled / eager, "report",
                            f"{compiled:,.0f} vs {eager:,.0f} tokens/s, {step_batches} batches of 64 after compiling"),
                Measurement(names[len(rows) + 2], graphs / eager, "report",
                            f"{graphs:,.0f} vs {eager:,.0f} tokens/s, {step_batches} batches of 64 after recording"
                            + (f"; torch.compile skipped CUDA graphs {skipped} times" if skipped else "")),
                Measurement(names[len(rows) + 3], exact / eager, "report",
                            f"{exact:,.0f} vs {eager:,.0f} tokens/s eager, {step_batches} batches of 64, "
                            f"torch's deterministic algorithms on vs off"),
            ]
    finally:
        if started_here:
            ray.shutdown()
    return rows


def _cudagraph_skips() -> int:
    """How often torch.compile fell back from CUDA graphs so far (its counters)."""
    from torch._dynamo.utils import counters

    return int(counters["inductor"]["cudagraph_skips"])


def gpu_rows(results_root: Path = Path("results")) -> list[Measurement]:
    """`lg-study bench --only gpu`: the small-trial rows, then the paper-scale studies'
    (orchestrator.benchmarks.bench_gpu_studies), which record their rates under
    ``results_root`` (`--results`), where `validate --results` reads them."""
    from orchestrator.benchmarks.bench_gpu_studies import paper_scale

    return gpu() + paper_scale(results_root=results_root)
