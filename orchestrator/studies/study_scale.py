"""Why a study cannot run on this Ray cluster, in the user's terms: what each trial asks
for against what the cluster has, how large the study is (its training FLOPs, and the
GPU-hours they come to at a stated rate), and the study's profiles that would run here
with the wall times their authors measured (the study file's `measured` field).

Training FLOPs of a trial: steps x tokens per batch x (6·N + 12·L·T·d) per token (N the
parameters less the token embedding, L layers, T the sequence length, d the width;
a model looped R times (model.loops) counts its layers' parameters and L R times;
Kaplan et al. 2020, "Scaling laws for neural language models", arXiv 2001.08361, and
PaLM, arXiv 2204.02311, App. B), with T and the tokens per batch taken from the trial's
own first training batches. GPU-hours are that count at a sustained rate: for each trial,
the rate `lg-study bench --only gpu` measured on a GPU model for a trial of the same
shape (`shape_id`: the model, task, format, data and batch; seeds aside), when the
results folder records one (`RATES_FILE`, written by the bench); otherwise QUOTED_RATE,
which the message calls an estimate. A rate is never carried to a trial of another
shape: a study of several model sizes measured at one size says which sizes it did not
measure.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from lengthgen import TrialConfig
from lengthgen.batch_ramp import micro_range
from lengthgen.batches import training_batch
from lengthgen.config import derive
from lengthgen.distributions import DISTRIBUTIONS
from lengthgen.model import build_model, count_parameters
from lengthgen.model.sizes import SIZES
from lengthgen.tasks import TASKS
from lengthgen.tokenizer import CharTokenizer
from orchestrator.studies.study import Study, StudyError, load_study

#: the sustained training rate GPU-hours are quoted at (FLOP/s): about a third of a
#: current data-centre GPU's dense bf16 peak, a rate small models rarely beat
QUOTED_RATE = 100e12


#: the rates the GPU bench measured, under the results folder:
#: {GPU model: {study (rate_key): {trial shape (shape_id): MeasuredRate}}}
RATES_FILE = "gpu_rates.json"
#: the shape of a rate recorded before rates named their shape: the study's first trial's,
#: the one trial the bench then timed
FIRST_TRIAL_SHAPE = ""


@dataclass(frozen=True)
class MeasuredRate:
    """The training rate of a study's first trial on one GPU model, in the precision and
    compile mode the study file sets (orchestrator.benchmarks.bench_gpu_studies)."""

    #: model FLOPs per second (the formula of this module's docstring)
    flops_per_s: float
    ms_per_step: float
    precision: str
    compile: bool
    #: when, and with which torch, it was measured
    measured_at: str
    torch_version: str


Rates = dict[str, dict[str, dict[str, MeasuredRate]]]


def read_rates(results_root: Path | None) -> Rates:
    """{GPU model: {study: {trial shape: rate}}} from the results folder; {} when none was
    measured. A file written before rates named their shape holds one rate per study,
    read as its first trial's (FIRST_TRIAL_SHAPE)."""
    path = None if results_root is None else Path(results_root) / RATES_FILE
    if path is None or not path.exists():
        return {}

    def shapes(recorded: dict) -> dict[str, MeasuredRate]:
        if "flops_per_s" in recorded:
            return {FIRST_TRIAL_SHAPE: MeasuredRate(**recorded)}
        return {shape: MeasuredRate(**rate) for shape, rate in recorded.items()}

    return {gpu: {study: shapes(recorded) for study, recorded in studies.items()}
            for gpu, studies in json.loads(path.read_text()).items()}


def record_rate(results_root: Path, gpu: str, study: str, shape: str, rate: MeasuredRate) -> Path:
    """Record (or replace) the rate of one trial shape of a study on a GPU model, written
    atomically."""
    rates = read_rates(results_root)
    rates.setdefault(gpu, {}).setdefault(study, {})[shape] = rate
    path = Path(results_root) / RATES_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{RATES_FILE}.{os.getpid()}.tmp")
    temporary.write_text(json.dumps(
        {g: {s: {shape: asdict(r) for shape, r in shapes.items()} for s, shapes in studies.items()}
         for g, studies in rates.items()}, indent=1, sort_keys=True))
    os.replace(temporary, path)
    return path


@dataclass(frozen=True)
class TrialCost:
    parameters: int
    tokens_per_step: float
    flops: float


def trial_cost(config: TrialConfig, batches: int = 3) -> TrialCost:
    """The training FLOPs of one trial (the module docstring's count)."""
    tokenizer, task = CharTokenizer(), TASKS[config.task.name]()
    distribution = DISTRIBUTIONS[config.data.distribution]()
    shapes = [training_batch(config, task, distribution, tokenizer, step).tokens.shape for step in range(batches)]
    tokens = sum(b * t for b, t in shapes) / batches
    length = sum(t for _, t in shapes) / batches
    # parameters are counted, never trained: on the meta device a 268 M model is built
    # without its memory or its initialisation (0.04 s instead of 5 s)
    with torch.device("meta"):
        model = build_model(config.model, len(tokenizer), 0, derive(config).input_layout)
    embedding = model.token_embedding.weight.numel() if hasattr(model, "token_embedding") else 0
    dims = SIZES[config.model.size]
    # looped layers (model.loops) run their weights that many times per token
    loops = config.model.loops
    looped = sum(p.numel() for p in model.blocks.parameters()) if hasattr(model, "blocks") else 0
    applied = count_parameters(model) - embedding + (loops - 1) * looped
    per_token = 6 * applied + 12 * dims.n_layers * loops * length * dims.d_model
    # train.batch_ramp: every micro-batch of every optimiser step (lengthgen.batch_ramp)
    train = config.train
    batches_trained = micro_range(train.batch_ramp, train.batch_size, train.steps, train.steps - 1).stop
    return TrialCost(count_parameters(model), tokens, batches_trained * tokens * per_token)


def steps_flops(config: TrialConfig, first: int, stop: int, cost: TrialCost | None = None) -> float:
    """The training FLOPs of optimiser steps first..stop-1 of `config` (of `cost`, its
    trial_cost, when given): under train.batch_ramp an early step trains one micro-batch
    and a late one sixteen, so the trial's FLOPs over its steps is not any one step's."""
    train = config.train
    micro = train.batch_size
    trained = micro_range(train.batch_ramp, micro, train.steps, train.steps - 1).stop
    in_steps = micro_range(train.batch_ramp, micro, train.steps, stop - 1).stop - \
        micro_range(train.batch_ramp, micro, train.steps, first).start
    return (cost or trial_cost(config)).flops * in_steps / trained


def study_cost_words(trials: list[TrialConfig], rates: dict[str, dict[str, MeasuredRate]] | None = None) -> str:
    """'15 trials of 50,000 steps, 25.3 M parameters: 2.1e+17 training FLOPs, about 0.6
    GPU-hours at a sustained 100 TFLOP/s (an estimate; ...)'; with `rates` ({GPU model:
    {trial shape: the rate measured there}}), the GPU-hours at the measured rates instead,
    each trial at its own shape's, and the trials of shapes not measured there said so."""
    costs: dict[str, TrialCost] = {}
    for trial in trials:  # trials of one group differ by seeds only: one cost each
        if (shape := shape_id(trial)) not in costs:
            costs[shape] = trial_cost(trial)
    flops = sum(costs[shape_id(t)].flops for t in trials)
    steps = sorted({t.train.steps for t in trials})
    parameters = sorted({c.parameters for c in costs.values()})
    steps_text = f"{steps[0]:,}" if len(steps) == 1 else f"{steps[0]:,}-{steps[-1]:,}"
    size = f"{len(trials)} trials of {steps_text} steps, {_millions(parameters)} parameters: {flops:.1e} training FLOPs"
    shapes_of = {shape_id(t) for t in trials}
    rates = {gpu: shapes for gpu, shapes in (rates or {}).items() if shapes_of & set(shapes)}
    if rates:
        return size + "; " + "; ".join(_measured_hours(trials, costs, gpu, shapes) for gpu, shapes in sorted(rates.items()))
    return f"{size}, about {_estimated_hours(flops)}: no GPU run of it is measured here)"


def shape_id(trial: TrialConfig) -> str:
    """What a measured rate carries over to: trials of the same model, task, format, data
    and batch, whatever their seeds (a short hash of them)."""
    return hashlib.sha256(repr(_cost_key(trial)).encode()).hexdigest()[:12]


def _cost_key(trial: TrialConfig) -> tuple:
    train = trial.train
    return trial.model, trial.task, trial.format, trial.data, train.steps, train.batch_size, train.batch_ramp


def _estimated_hours(flops: float) -> str:
    return f"{flops / QUOTED_RATE / 3600:,.1f} GPU-hours at a sustained {QUOTED_RATE / 1e12:.0f} TFLOP/s (an estimate"


def _measured_hours(trials: list[TrialConfig], costs: dict[str, TrialCost], gpu: str,
                    shapes: dict[str, MeasuredRate]) -> str:
    measured = [t for t in trials if shape_id(t) in shapes]
    others = [t for t in trials if shape_id(t) not in shapes]
    hours = sum(costs[shape_id(t)].flops / shapes[shape_id(t)].flops_per_s for t in measured) / 3600
    used = [shapes[s] for s in dict.fromkeys(shape_id(t) for t in measured)]
    modes = ", ".join(sorted({r.precision + (" + compile" if r.compile else "") for r in used}))
    latest = max(used, key=lambda r: r.measured_at)
    source = f"lg-study bench --only gpu, {latest.measured_at}, torch {latest.torch_version}"
    if len(used) == 1:
        at = (f"at the {used[0].flops_per_s / 1e12:.0f} TFLOP/s measured there "
              f"({modes}, {used[0].ms_per_step:.0f} ms/step; {source})")
    else:
        low, high = (f(r.flops_per_s for r in used) / 1e12 for f in (min, max))
        at = f"at the rates measured there for its {len(used)} trial shapes ({low:.0f}-{high:.0f} TFLOP/s, {modes}; {source})"
    words = f"{hours:,.1f} GPU-hours on an {gpu} {at}"
    if not others:
        return words
    unmeasured = list(dict.fromkeys(_shape_words(t) for t in others))
    named = ", ".join(unmeasured[:4]) + (f" and {len(unmeasured) - 4} more" if len(unmeasured) > 4 else "")
    flops = sum(costs[shape_id(t)].flops for t in others)
    return (f"{words} for its {len(measured)} trials of the shapes measured there, plus about "
            f"{_estimated_hours(flops)}) for its other {len(others)} trials, whose shapes ({named}) were not "
            f"measured on it")


def _shape_words(trial: TrialConfig) -> str:
    low, high = trial.task.train_digits
    return f"{trial.model.size} on {low}-{high} digits"


def _millions(counts: list[int]) -> str:
    low, high = (f"{c / 1e6:,.{1 if c < 1e8 else 0}f} M" for c in (min(counts), max(counts)))
    return low if low == high else f"{low} to {high}"


def _asks(cpus: float, gpus: float) -> str:
    return f"{cpus:g} CPU{'s' if cpus != 1 else ''} and {f'{gpus:g} GPU' if gpus else 'no GPU'}"


def _trials(study: Study) -> list[TrialConfig]:
    """A grid's trials; for a search, its base config once per trial it will run."""
    return study.trials or [study.config_with({})] * study.trial_count


def study_rates(study: Study, results_root: Path | None) -> dict[str, dict[str, MeasuredRate]]:
    """{GPU model: {trial shape: the rate measured there}} for `study` as loaded (its
    name, and its profile if any: `rate_key`), from the results folder."""
    key, first = rate_key(study.name, study.profile), shape_id(_trials(study)[0])
    return {gpu: {shape or first: rate for shape, rate in studies[key].items()}
            for gpu, studies in read_rates(results_root).items() if key in studies}


def rate_key(study: str, profile: str | None) -> str:
    """Where a study's rate is recorded: its name, or name/profile for a profile."""
    return study if profile is None else f"{study}/{profile}"


def study_size_words(study: Study, results_root: Path | None = None) -> str:
    """The study's size in training FLOPs and GPU-hours (measured rates where recorded)."""
    return study_cost_words(_trials(study), study_rates(study, results_root))


def cannot_run_words(study: Study, available: dict[str, float], results_root: Path | None = None) -> str:
    """The refusal of a study whose trials need more than the cluster ``available``
    (ray.cluster_resources()) has: the resources against the cluster, the study's
    size (in GPU-hours at the rates measured under `results_root`, if any), and its
    profiles that fit, with their measured times."""
    asked = study.spec.resources
    lines = [
        (f"resources: each trial asks for {_asks(asked.cpus_per_trial, asked.gpus_per_trial)} "
         f"(resources.cpus_per_trial, resources.gpus_per_trial), but this Ray cluster has "
         f"{_asks(available.get('CPU', 0), available.get('GPU', 0))}."),
        f"{'This profile' if study.profile else 'The study'} at this scale: {study_size_words(study, results_root)}.",
    ]
    measured = study.spec.measured
    if (study.profile or "default") in measured:
        lines.append(f"Measured: {measured[study.profile or 'default']}.")
    fitting = []
    for name in study.spec.profiles:
        try:
            profile = load_study(study.file, name)
        except StudyError:
            continue
        needs = profile.spec.resources
        if needs.cpus_per_trial <= available.get("CPU", 0) and needs.gpus_per_trial <= available.get("GPU", 0):
            time = f"; measured: {measured[name]}" if name in measured else "; no time measured"
            fitting.append(f"  --profile {name}: {len(profile.trials)} trials, {_asks(needs.cpus_per_trial, needs.gpus_per_trial)} "
                           f"each{time}")
    if fitting:
        lines += ["Profiles of this study that run here:", *fitting,
                  f"e.g. lg-study run {study.file} --profile {fitting[0].split()[1].rstrip(':')}"]
    else:
        lines.append(f"None of its profiles ({', '.join(study.spec.profiles) or 'it has none'}) runs on this "
                     "cluster: add one that asks for fewer resources (resources.* keys), or run it on a Ray "
                     "cluster that has them (--address).")
    return "\n".join(lines)
