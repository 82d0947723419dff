"""Train and evaluate one trial: `train(config, on_report=...)`.

Nothing here knows about Ray or MLflow: the caller receives
`Report`s and may save `Report.checkpoint()` to resume later with `resume_state`.

Seeds: the weight seed feeds only the initialisation
Generator (and the perturb seed only the one weight it moves by one ulp); batch `s` is drawn from a Generator seeded by (seeds.data, s) alone, so
a resumed trial sees exactly the batches an uninterrupted one would; the eval
seed only picks the evaluation questions.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import partial

import numpy as np
import torch

from lengthgen.batch_ramp import micro_range
from lengthgen.batches import training_batch
from lengthgen.calibration import mean_attention_logits
from lengthgen.config import TrialConfig, derive
from lengthgen.determinism import deterministic
from lengthgen.evaluation import LengthResult, SampleRecord, build_eval_sets, evaluate, summarize
from lengthgen.formats import answer_width
from lengthgen.grid import GridResult, build_grid, evaluate_grid
from lengthgen.model import build_model, count_parameters
from lengthgen.model.base import Architecture
from lengthgen.model.position.attention_bias import ATTENTION_BIASES
from lengthgen.model.position.samplers import build_position_sampler
from lengthgen.precision import autocast, precision_mode
from lengthgen.science import SCIENCE_VERSION
from lengthgen.tokenizer import CharTokenizer
from lengthgen.training_step import TrainingStep, learning_rate
from lengthgen.validation import validation_batch, validation_loss


@dataclass
class TrainLog:
    step: int
    loss: float
    lr: float
    #: non-padding tokens seen so far
    tokens: int
    wall_s: float


@dataclass
class Report:
    """What the trainer tells its caller at a logging or evaluation step."""

    step: int
    train: TrainLog | None = None
    eval: list[LengthResult] = field(default_factory=list)
    #: per-question records, at the final evaluation only
    samples: list[SampleRecord] = field(default_factory=list)
    #: summary of `eval` (lengthgen.evaluation.summarize), when `eval` is set
    summary: dict[str, float] = field(default_factory=dict)
    final: bool = False
    #: "running", then "done" or "diverged" on the final report
    status: str = "running"
    #: returns the state to pass back as `resume_state` (set at evaluation steps)
    checkpoint: Callable[[], dict] | None = None
    #: on the final report: TrialResult.attention_biases
    attention_biases: dict[str, np.ndarray] = field(default_factory=dict)
    #: at evaluation steps, eval.select best_long_loss: the loss on the long-length
    #: validation set (lengthgen.validation)
    long_loss: float | None = None
    #: on the final report, eval.grid: the accuracy of every cell (lengthgen.grid)
    grid: list[GridResult] = field(default_factory=list)


@dataclass
class TrialResult:
    status: str
    steps: int
    n_params: int
    device: str
    train: list[TrainLog]
    #: (step, result) for every evaluation
    eval: list[tuple[int, LengthResult]]
    samples: list[SampleRecord]
    summary: dict[str, float]
    #: for a diverged trial: the step whose loss was not finite, and the last finite loss
    diverged_at: int | None = None
    last_finite_loss: float | None = None
    #: model.attention_bias abc: "<site>/extracted", the averaged last-layer attention
    #: logits (H, m, n), and "<site>/bias", the calibrated bias at the longest test
    #: question (H, M, N), for the sites of the architecture (lengthgen.model.position.attention_bias)
    attention_biases: dict[str, np.ndarray] = field(default_factory=dict)
    #: eval.select best_long_loss: (step, validation loss) of every evaluation, and the
    #: evaluated step with the lowest loss (the earliest of equals), which a study reports
    long_loss: list[tuple[int, float]] = field(default_factory=list)
    selected_step: int | None = None
    #: eval.grid: every cell's accuracy at the final evaluation
    grid: list[GridResult] = field(default_factory=list)


def selected_step(long_loss: list[tuple[int, float]]) -> int | None:
    """The evaluated step with the lowest long-length validation loss, the earliest of
    equal ones; None without a validation set."""
    return min(long_loss, key=lambda pair: (pair[1], pair[0]))[0] if long_loss else None


def resolve_device(requested: str | None = None) -> torch.device:
    if requested:
        return torch.device(requested)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def train(
    config: TrialConfig,
    on_report: Callable[[Report], None] | None = None,
    resume_state: dict | None = None,
    device: str | None = None,
) -> TrialResult:
    """Train and evaluate one trial. With `model.attention_bias: abc` the trial has two
    phases of train.steps each (000 §5): train to interpolation (steps 1 .. S, evaluated
    at S), read and calibrate its attention, then train a fresh model from the same
    weight seed on the same batches with the calibrated bias (steps S + 1 .. 2 S).
    With train.deterministic, under torch's deterministic algorithms (lengthgen.determinism);
    in train.precision's TF32 setting (lengthgen.precision), restored after."""
    target_device = resolve_device(device)
    with deterministic(config.train.deterministic, target_device), precision_mode(config.train.precision):
        return _train(config, on_report or (lambda report: None), resume_state, target_device)


def _train_step(config: TrialConfig, training_step: TrainingStep, local: int, task, distribution,
                tokenizer: CharTokenizer) -> tuple[torch.Tensor, int]:
    """Optimiser step `local` of a phase: its loss and the non-padding tokens it trained
    on; with train.batch_ramp, on the micro-batches of that step (lengthgen.batch_ramp)."""
    train = config.train
    if train.batch_ramp is None:
        batch = training_batch(config, task, distribution, tokenizer, local)
        return training_step(local, batch), int((batch.tokens != tokenizer.pad_id).sum())
    numbers = micro_range(train.batch_ramp, train.batch_size, train.steps, local)
    batches = [training_batch(config, task, distribution, tokenizer, n) for n in numbers]
    return training_step.ramped(local, batches, numbers), sum(int((b.tokens != tokenizer.pad_id).sum()) for b in batches)


def _train(
    config: TrialConfig, on_report: Callable[[Report], None], resume_state: dict | None, target_device: torch.device
) -> TrialResult:
    tokenizer = CharTokenizer()
    task, distribution = derive(config).task, derive(config).distribution  # built once, then cached
    phases = 2 if ATTENTION_BIASES[config.model.attention_bias].calibrated else 1
    state = resume_state or {}
    run = TrialRun.start(config, tokenizer, target_device, phases, state)
    step = state.get("step", 0)
    #: {site: Ā}, the averaged attention logits of the first phase (abc)
    extracted: dict[str, torch.Tensor] | None = state.get("extracted")
    for phase in range(state.get("phase", 0), phases):
        model, training_step = phase_model(config, phase, extracted, state, target_device)
        model.train()
        while step < (phase + 1) * run.phase_steps:
            local = step - phase * run.phase_steps  # each phase sees the same batches (000 §5, step 3)
            loss, tokens = _train_step(config, training_step, local, task, distribution, tokenizer)
            run.tokens_seen += tokens
            step += 1
            value = loss.item()  # the step's one host synchronisation
            if not math.isfinite(value):
                return diverged_result(config, model, target_device, run.history, step, run.last_finite_loss, on_report)
            run.after_step(model, training_step.optimizer, phase, step, local, value, extracted, on_report)
        if phase + 1 < phases:
            extracted = mean_attention_logits(model, config, task, tokenizer, run.positions, target_device)
    return run.result(model, step, extracted)


@dataclass
class TrialRun:
    """What one trial carries from step to step besides its model: its evaluation sets,
    its history and counters. `after_step` reports a step (logs, evaluation,
    checkpoint); the trainer of one trial and that of a seed batch
    (lengthgen.seed_batch) share it, so a seed reports as its solo run would."""

    config: TrialConfig
    tokenizer: CharTokenizer
    device: torch.device
    phases: int
    started: float
    history: dict[str, list]
    tokens_seen: int = 0
    last_finite_loss: float | None = None
    final_samples: list[SampleRecord] = field(default_factory=list)
    final_grid: list[GridResult] = field(default_factory=list)

    def __post_init__(self) -> None:
        config = self.config
        task = derive(config).task
        self.positions = build_position_sampler(config.model)
        self.eval_sets = build_eval_sets(config, task, self.tokenizer)
        self.validation = validation_batch(config, self.tokenizer)
        self.grid_cells = build_grid(config, self.tokenizer)
        self.phase_steps = config.train.steps

    @classmethod
    def start(cls, config, tokenizer, device, phases: int, state: dict) -> TrialRun:
        """A trial's run at its start, or where the checkpoint `state` left it."""
        history = state.get("history", {})
        return cls(
            config, tokenizer, device, phases, time.perf_counter() - state.get("wall_s", 0.0),
            {
                "train": [TrainLog(**t) for t in history.get("train", [])],
                "eval": [(s, LengthResult(**r)) for s, r in history.get("eval", [])],
                "long_loss": [tuple(pair) for pair in history.get("long_loss", [])],
            },
            tokens_seen=state.get("tokens", 0),
        )

    def after_step(self, model, optimizer, phase: int, step: int, local: int, loss: float, extracted,
                   on_report: Callable[[Report], None]) -> None:
        """Record step `step`'s finite loss; log, evaluate and offer a checkpoint where due."""
        config, history = self.config, self.history
        self.last_finite_loss = loss
        final = step == self.phases * self.phase_steps
        report = Report(step=step)
        if step % config.train.log_every == 0 or final:
            lr = learning_rate(config, local)
            report.train = TrainLog(step, loss, lr, self.tokens_seen, time.perf_counter() - self.started)
            history["train"].append(report.train)
        if self.evaluates(step):
            self._evaluate(model, report, final)
            report.checkpoint = partial(
                _checkpoint, config, phase, step, self.tokens_seen, time.perf_counter() - self.started, model,
                optimizer, history, extracted,
            )
        if final:
            report.final, report.status = True, "done"
            report.attention_biases = _attention_biases(model, extracted, self.eval_sets)
            self.final_samples, self.final_grid = report.samples, report.grid
        if report.train or report.eval:
            on_report(report)

    def evaluates(self, step: int) -> bool:
        """Whether step `step` is evaluated (and offers a checkpoint)."""
        every = self.config.eval.every
        return step % self.phase_steps == 0 or bool(every and step % every == 0)

    def _evaluate(self, model, report: Report, final: bool) -> None:
        config, device = self.config, self.device
        with autocast(device, config.train.precision):
            report.eval, report.samples = evaluate(
                model, self.eval_sets, config, self.tokenizer, self.positions, device, with_samples=final
            )
            if self.validation is not None:
                report.long_loss = validation_loss(model, self.validation, config, self.positions, device)
                self.history["long_loss"].append((report.step, report.long_loss))
            if final and self.grid_cells:
                report.grid = evaluate_grid(model, self.grid_cells, config, self.tokenizer, self.positions, device)
        report.summary = summarize(report.eval)
        self.history["eval"] += [(report.step, r) for r in report.eval]

    def result(self, model, step: int, extracted) -> TrialResult:
        """The trial's result once its last step is trained."""
        history = self.history
        final_step = max((s for s, _ in history["eval"]), default=step)
        final_eval = [r for s, r in history["eval"] if s == final_step]
        return TrialResult(
            status="done", steps=step, n_params=count_parameters(model), device=str(self.device),
            train=history["train"], eval=history["eval"], samples=self.final_samples,
            summary=summarize(final_eval) if final_eval else {},
            attention_biases=_attention_biases(model, extracted, self.eval_sets),
            long_loss=history["long_loss"], selected_step=selected_step(history["long_loss"]), grid=self.final_grid,
        )


def phase_model(
    config: TrialConfig, phase: int, extracted, state: dict, target_device: torch.device
) -> tuple[Architecture, TrainingStep]:
    """(model, its training step) of a phase: built from the weight (and perturb) seed,
    calibrated after the first phase (abc), resumed from `state` when it is this
    phase's checkpoint."""
    model = build_model(
        config.model, len(CharTokenizer()), config.seeds.weight, derive(config).input_layout, config.seeds.perturb
    )
    if phase > 0:
        model.structural_bias.calibrate(extracted)
    model.to(target_device)
    training_step = TrainingStep(config, model, target_device)
    if state.get("phase", 0) == phase and "model" in state:
        model.load_state_dict(state["model"])
        training_step.optimizer.load_state_dict(state["optimizer"])
    return model, training_step


def _checkpoint(config, phase, step, tokens, wall_s, model, optimizer, history, extracted) -> dict:
    """The state `train(resume_state=...)` continues from: plain tensors, numbers and lists."""
    return {
        "step": step,
        "phase": phase,
        "tokens": tokens,
        "wall_s": wall_s,
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "history": {
            "train": [asdict(t) for t in history["train"]],
            "eval": [(s, asdict(r)) for s, r in history["eval"]],
            "long_loss": [list(pair) for pair in history["long_loss"]],
        },
        **({"extracted": extracted} if extracted is not None else {}),
        "config": config.to_dict(),
        # a checkpoint of other science continues other numbers (lengthgen.science)
        "science_version": SCIENCE_VERSION,
    }


def _test_sizes(model, eval_sets) -> dict[str, tuple[int, int]]:
    """{site: (queries, keys)} of each attention at the longest test question."""
    longest = max(eval_sets, key=lambda e: e.questions.tokens.shape[1]).questions
    width = longest.tokens.shape[1]
    return model.site_shapes(width, width - answer_width(longest))


def _attention_biases(model, extracted, eval_sets) -> dict[str, np.ndarray]:
    """abc: per site, Ā (H, m, n) as extracted and the calibrated bias (H, M, N) at the
    size of the longest test question (-inf where closed)."""
    if extracted is None:
        return {}
    sizes = _test_sizes(model, eval_sets)
    biases = {}
    for site, averaged in extracted.items():
        biases[f"{site}/extracted"] = averaged.numpy()
        biases[f"{site}/bias"] = model.structural_bias.matrix(site, *sizes[site]).cpu().numpy()
    return biases


def diverged_result(config, model, device, history, step, last_finite_loss, on_report) -> TrialResult:
    """A non-finite loss ends the trial as `diverged`; nothing after it is trained."""
    on_report(Report(step=step, final=True, status="diverged"))
    return TrialResult(
        status="diverged",
        steps=step,
        n_params=count_parameters(model),
        device=str(device),
        train=history["train"],
        eval=history["eval"],
        samples=[],
        summary={},
        long_loss=history["long_loss"],
        diverged_at=step,
        last_finite_loss=last_finite_loss,
    )
