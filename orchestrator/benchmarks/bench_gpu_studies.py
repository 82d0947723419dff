"""The paper-scale rows of `lg-study bench --only gpu`: what the trials of each GPU study
cost. For the first trial of each study in `PAPER_SCALE_STUDIES`, its training step
(lengthgen.training_step.TrainingStep, positions drawn beforehand) in fp32, tf32, bf16
and bf16 + train.compile: ms per step, training tokens/s and the model FLOP/s of the
study_scale formula, timed over `steps` steps after `warmup` (which also compiles),
the median of `runs` runs with their spread. Every other trial shape of the study (a
model size, a training length: orchestrator.studies.study_scale.shape_id) is timed once
more in the mode the study file sets, one run, since a rate measured at one size says
nothing of another. The rate of the study's own mode is recorded for each shape under
the results folder (orchestrator.studies.study_scale.RATES_FILE), so that `lg-study
validate` and the "cannot run here" message quote GPU-hours measured on that GPU model.
Without CUDA every row says it was skipped, and why.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import torch
import yaml

from lengthgen import TrialConfig
from lengthgen.batches import training_batch
from lengthgen.config import derive
from lengthgen.model import build_model
from lengthgen.precision import precision_mode
from lengthgen.tokenizer import CharTokenizer
from lengthgen.training_step import TrainingStep, compiled_forward_batch
from orchestrator.benchmarks.measurement import Measurement
from orchestrator.studies.study import load_study
from orchestrator.studies.study_scale import (
    MeasuredRate,
    rate_key,
    record_rate,
    shape_id,
    steps_flops,
)

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
    forward = compiled_forward_batch(config.train, model, device, compile_backend)
    training_step = TrainingStep(config, model, device, forward)

    def batch(step: int):
        return training_batch(config, derived.task, derived.distribution, tokenizer, step)

    batches = [batch(s) for s in range(warmup + steps)]
    prepared = [training_step.parts(s, b) for s, b in enumerate(batches)]
    tokens = sum(int((b.tokens != tokenizer.pad_id).sum()) for b in batches[warmup:]) / steps
    extra_warm = second_width_steps(batch, batches[:warmup], warmup + steps) if config.train.compile else []

    def synchronize() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize()

    seconds = []
    with precision_mode(config.train.precision):
        for s in range(warmup):
            training_step.update(s, prepared[s])
        for s in extra_warm:
            training_step.update(s, training_step.parts(s, batch(s)))
        for _ in range(runs):
            synchronize()
            started = time.perf_counter()
            for s in range(warmup, warmup + steps):
                training_step.update(s, prepared[s])
            synchronize()
            seconds.append((time.perf_counter() - started) / steps)
    return seconds, tokens


def second_width_steps(batch, warm_batches: list, first: int, tries: int = 200) -> list[int]:
    """A step after `first` whose batch width the warm-up has not seen, when it saw one
    width only: a compiled forward makes its symbolic-width graph at the second width
    (lengthgen.compiled_step), which would otherwise compile inside the timed steps.
    sota_abacus's batches of 512 questions of 1-20 digits are nearly all 62 wide."""
    widths = {b.tokens.shape[1] for b in warm_batches}
    if len(widths) > 1:
        return []
    return next(([s] for s in range(first, first + tries) if batch(s).tokens.shape[1] not in widths), [])


def study_rows(name: str, config: TrialConfig, device: torch.device, steps: int, warmup: int, runs: int,
               results_root: Path | None, gpu: str, compile_backend: str = "inductor") -> tuple[list[Measurement], float]:
    """The rows of one study's first trial, each mode against fp32 in the same run, and its
    seconds per step in the study's own mode, whose rate is recorded under `results_root`."""
    flops_per_step = steps_flops(config, warmup, warmup + steps) / steps
    timed = {label: time_steps(mode_config(config, precision, compile_), device, steps, warmup, runs, compile_backend)
             for label, precision, compile_ in MODES}
    baseline = statistics.median(timed["fp32"][0])
    if results_root is not None:
        record_profiles(results_root, gpu, name, config, flops_per_step,
                        {(precision, compile_): statistics.median(timed[label][0]) for label, precision, compile_ in MODES})
    rows = []
    for label, precision, compile_ in MODES:
        seconds, tokens = timed[label]
        median = statistics.median(seconds)
        rows.append(Measurement(
            f"GPU {name}: {label} speed vs fp32", baseline / median, "report",
            f"{median * 1e3:.1f} ms/step (runs {min(seconds) * 1e3:.1f}-{max(seconds) * 1e3:.1f}, {runs} x {steps} "
            f"steps after {warmup}), {tokens / median:,.0f} tokens/s, {flops_per_step / median / 1e12:.3g} TFLOP/s "
            f"of model FLOPs on {gpu}"))
        if (precision, compile_) == (config.train.precision, config.train.compile):
            own = median
            if results_root is not None:
                record(results_root, gpu, name, config, median, flops_per_step)
    return rows, own


def record_profiles(results_root: Path, gpu: str, name: str, config: TrialConfig, flops_per_step: float,
                    seconds: dict[tuple[str, bool], float]) -> None:
    """The rates of study `name`'s profiles that train `config`'s shape in a mode timed
    here (`seconds` per step of each (precision, compile)), e.g. seed_robustness's `bf16`
    profile: so `lg-study validate --profile` quotes a measured rate too."""
    path = STUDIES / f"{name}.yaml"
    if not path.exists():
        return
    for profile in (yaml.safe_load(path.read_text()) or {}).get("profiles") or {}:
        first = load_study(path, profile).trials[0]
        mode = (first.train.precision, first.train.compile)
        if shape_id(first) == shape_id(config) and mode in seconds:
            record(results_root, gpu, name, first, seconds[mode], flops_per_step, profile)


def record(results_root: Path, gpu: str, name: str, config: TrialConfig, seconds_per_step: float,
           flops_per_step: float, profile: str | None = None) -> None:
    """The rate of `config`'s shape, in the mode it sets, recorded for study `name` (or
    its `profile`; `flops_per_step`: of the steps timed, whose micro-batches a batch ramp
    sets)."""
    record_rate(results_root, gpu, rate_key(name, profile), shape_id(config), MeasuredRate(
        flops_per_s=flops_per_step / seconds_per_step, ms_per_step=seconds_per_step * 1e3,
        precision=config.train.precision, compile=config.train.compile,
        measured_at=datetime.now(timezone.utc).strftime("%Y-%m-%d"), torch_version=str(torch.__version__)))


def other_shape_rows(name: str, trials: list[TrialConfig], reference: float, device: torch.device, steps: int,
                     warmup: int, results_root: Path | None, gpu: str, compile_backend: str = "inductor") -> list[Measurement]:
    """Each trial shape of the study after its first trial's, timed in the study's own mode
    (one run), as a speed against the first trial's `reference` seconds per step in that
    mode; its rate recorded."""
    _, *others = list({shape_id(t): t for t in trials}.values())
    rows = []
    for config in others:
        (seconds,), tokens = time_steps(config, device, steps, warmup, 1, compile_backend)
        flops_per_step = steps_flops(config, warmup, warmup + steps) / steps
        low, high = config.task.train_digits
        rows.append(Measurement(
            f"GPU {name}: {config.model.size} on {low}-{high} digits vs its first trial", reference / seconds, "report",
            f"{seconds * 1e3:.1f} ms/step ({steps} steps after {warmup}), {tokens / seconds:,.0f} tokens/s, "
            f"{flops_per_step / seconds / 1e12:.3g} TFLOP/s of model FLOPs on {gpu}"))
        if results_root is not None:
            record(results_root, gpu, name, config, seconds, flops_per_step)
    return rows


def own_mode_rows(name: str, steps: int = 5, warmup: int = 2, results_root: Path | None = Path("results"),
                  device: str = "cuda", trials: list[TrialConfig] | None = None) -> list[Measurement]:
    """Every trial shape of study `name` (or of `trials`) in the mode its study file sets,
    one run each, its rate recorded: what the study's GPU-hours are computed from. Rows
    print as they are measured, since a GPU session is bounded."""
    target = torch.device(device)
    gpu = torch.cuda.get_device_name(target) if target.type == "cuda" else f"{target.type} device"
    rows = []
    for config in {shape_id(t): t for t in trials or load_study(STUDIES / f"{name}.yaml").trials}.values():
        (seconds,), tokens = time_steps(config, target, steps, warmup, 1)
        flops_per_step = steps_flops(config, warmup, warmup + steps) / steps
        low, high = config.task.train_digits
        rows.append(Measurement(
            f"GPU {name}: {config.model.size} on {low}-{high} digits, {shape_id(config)}", None, "report",
            f"{seconds * 1e3:.1f} ms/step ({steps} steps after {warmup}, {config.train.precision}"
            f"{' + compile' if config.train.compile else ''}), {tokens / seconds:,.0f} tokens/s, "
            f"{flops_per_step / seconds / 1e12:.3g} TFLOP/s of model FLOPs on {gpu}"))
        print(f"{rows[-1].name} | {rows[-1].detail}", flush=True)
        if results_root is not None:
            record(results_root, gpu, name, config, seconds, flops_per_step)
    return rows


def row_names(studies: tuple[str, ...] = PAPER_SCALE_STUDIES) -> list[str]:
    return [f"GPU {name}: {label} speed vs fp32" for name in studies for label, _, _ in MODES]


def paper_scale(studies: tuple[str, ...] = PAPER_SCALE_STUDIES, steps: int = 50, warmup: int = 10, runs: int = 3,
                device: str | None = None, results_root: Path | None = Path("results"),
                trials: dict[str, list[TrialConfig]] | None = None, compile_backend: str = "inductor") -> list[Measurement]:
    """Every study's rows; only where CUDA is present, unless `device` (and `trials`, the
    configs to time in place of each study's trials, and `compile_backend`) are given, as
    a test does on the CPU. The rates go to `results_root` (None: not recorded)."""
    if device is None:
        if not torch.cuda.is_available():
            return [Measurement(name, None, "report", NO_CUDA) for name in row_names(studies)]
        device = "cuda"
    target = torch.device(device)
    gpu = torch.cuda.get_device_name(target) if target.type == "cuda" else f"{target.type} device"
    rows = []
    for name in studies:
        study_trials = (trials or {}).get(name) or load_study(STUDIES / f"{name}.yaml").trials
        first, reference = study_rows(name, study_trials[0], target, steps, warmup, runs, results_root, gpu,
                                      compile_backend)
        rows += first + other_shape_rows(name, study_trials, reference, target, steps, warmup, results_root, gpu,
                                         compile_backend)
    return rows
