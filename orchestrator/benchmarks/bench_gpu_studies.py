"""The paper-scale rows of `lg-study bench --only gpu`: what one trial of each GPU study
costs. For the first trial of each study in `PAPER_SCALE_STUDIES`, its training step
(lengthgen.training_step.TrainingStep, positions drawn beforehand) in fp32, tf32, bf16
and bf16 + train.compile: ms per step, training tokens/s and the model FLOP/s of the
study_scale formula, timed over `steps` steps after `warmup` (which also compiles),
the median of `runs` runs with their spread. The rate of the mode the study file sets
is recorded under the results folder (orchestrator.studies.study_scale.RATES_FILE), so
that `lg-study validate` and the "cannot run here" message quote GPU-hours measured on
that GPU model. Without CUDA every row says it was skipped, and why.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import torch

from lengthgen import TrialConfig
from lengthgen.batches import training_batch
from lengthgen.compiled_step import CompiledForward
from lengthgen.config import derive
from lengthgen.model import build_model
from lengthgen.precision import precision_mode
from lengthgen.tokenizer import CharTokenizer
from lengthgen.training_step import TrainingStep
from orchestrator.benchmarks.measurement import Measurement
from orchestrator.studies.study import load_study
from orchestrator.studies.study_scale import MeasuredRate, rate_key, record_rate, trial_cost

STUDIES = Path(__file__).resolve().parents[2] / "studies"
PAPER_SCALE_STUDIES = ("seed_robustness", "sota_coupling", "sota_abacus", "cascade_distribution", "model_size")
#: (row label, train.precision, train.compile)
MODES = (("fp32", "fp32", False), ("tf32", "tf32", False), ("bf16", "bf16", False), ("bf16 + compile", "bf16", True))
NO_CUDA = "skipped: no CUDA device (these rows time paper-scale trials on a GPU: run them on one)"


def mode_config(config: TrialConfig, precision: str, compile_: bool) -> TrialConfig:
    return replace(config, train=replace(config.train, precision=precision, compile=compile_, deterministic=False))


def time_steps(config: TrialConfig, device: torch.device, steps: int, warmup: int, runs: int,
               compile_backend: str = "inductor") -> tuple[list[float], float]:
    """Seconds per step of each of `runs` runs of `steps` steps, after `warmup` steps; and
    the mean training tokens (non-padding) of a step. train.compile with `compile_backend`."""
    tokenizer, derived = CharTokenizer(), derive(config)
    model = build_model(config.model, len(tokenizer), config.seeds.weight, derived.input_layout).to(device)
    forward = CompiledForward(model, compile_backend) if config.train.compile else None
    training_step = TrainingStep(config, model, device, forward)
    batches = [training_batch(config, derived.task, derived.distribution, tokenizer, s) for s in range(warmup + steps)]
    prepared = [training_step.parts(s, batch) for s, batch in enumerate(batches)]
    tokens = sum(int((b.tokens != tokenizer.pad_id).sum()) for b in batches[warmup:]) / steps

    def synchronize() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize()

    seconds = []
    with precision_mode(config.train.precision):
        for s in range(warmup):
            training_step.update(s, prepared[s])
        for _ in range(runs):
            synchronize()
            started = time.perf_counter()
            for s in range(warmup, warmup + steps):
                training_step.update(s, prepared[s])
            synchronize()
            seconds.append((time.perf_counter() - started) / steps)
    return seconds, tokens


def study_rows(name: str, config: TrialConfig, device: torch.device, steps: int, warmup: int, runs: int,
               results_root: Path | None, gpu: str, compile_backend: str = "inductor") -> list[Measurement]:
    """The rows of one study's first trial, each mode against fp32 in the same run; the
    rate of the study's own mode recorded under `results_root`."""
    flops_per_step = trial_cost(config).flops / config.train.steps
    timed = {label: time_steps(mode_config(config, precision, compile_), device, steps, warmup, runs, compile_backend)
             for label, precision, compile_ in MODES}
    baseline = statistics.median(timed["fp32"][0])
    rows = []
    for label, precision, compile_ in MODES:
        seconds, tokens = timed[label]
        median = statistics.median(seconds)
        rows.append(Measurement(
            f"GPU {name}: {label} speed vs fp32", baseline / median, "report",
            f"{median * 1e3:.1f} ms/step (runs {min(seconds) * 1e3:.1f}-{max(seconds) * 1e3:.1f}, {runs} x {steps} "
            f"steps after {warmup}), {tokens / median:,.0f} tokens/s, {flops_per_step / median / 1e12:.3g} TFLOP/s "
            f"of model FLOPs on {gpu}"))
        if results_root is not None and (precision, compile_) == (config.train.precision, config.train.compile):
            record_rate(results_root, gpu, rate_key(name, None), MeasuredRate(
                flops_per_s=flops_per_step / median, ms_per_step=median * 1e3, precision=precision, compile=compile_,
                measured_at=datetime.now(timezone.utc).strftime("%Y-%m-%d"), torch_version=str(torch.__version__)))
    return rows


def row_names(studies: tuple[str, ...] = PAPER_SCALE_STUDIES) -> list[str]:
    return [f"GPU {name}: {label} speed vs fp32" for name in studies for label, _, _ in MODES]


def paper_scale(studies: tuple[str, ...] = PAPER_SCALE_STUDIES, steps: int = 50, warmup: int = 10, runs: int = 3,
                device: str | None = None, results_root: Path | None = Path("results"),
                trials: dict[str, TrialConfig] | None = None, compile_backend: str = "inductor") -> list[Measurement]:
    """Every study's rows; only where CUDA is present, unless `device` (and `trials`, the
    configs to time in place of each study's first trial, and `compile_backend`) are
    given, as a test does on the CPU. The rates go to `results_root` (None: not recorded)."""
    if device is None:
        if not torch.cuda.is_available():
            return [Measurement(name, None, "report", NO_CUDA) for name in row_names(studies)]
        device = "cuda"
    target = torch.device(device)
    gpu = torch.cuda.get_device_name(target) if target.type == "cuda" else f"{target.type} device"
    rows = []
    for name in studies:
        config = (trials or {}).get(name) or load_study(STUDIES / f"{name}.yaml").trials[0]
        rows += study_rows(name, config, target, steps, warmup, runs, results_root, gpu, compile_backend)
    return rows
