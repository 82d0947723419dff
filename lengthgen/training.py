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
from itertools import pairwise
from typing import NamedTuple

import numpy as np
import torch
import torch.nn.functional as F

from lengthgen.calibration import mean_attention_logits
from lengthgen.config import TrainConfig, TrialConfig, derive
from lengthgen.determinism import deterministic
from lengthgen.distributions import Distribution
from lengthgen.evaluation import LengthResult, SampleRecord, build_eval_sets, evaluate, summarize
from lengthgen.formats import answer_width, encode_questions, leading_zeros
from lengthgen.model import build_model, count_parameters
from lengthgen.model.base import Architecture, Batch, Positions, rows_of
from lengthgen.model.position.attention_bias import ATTENTION_BIASES
from lengthgen.model.position.samplers import build_position_sampler
from lengthgen.precision import autocast
from lengthgen.science import SCIENCE_VERSION
from lengthgen.tasks import Task
from lengthgen.tokenizer import CharTokenizer


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


def learning_rate(config: TrialConfig, step: int) -> float:
    """Linear warmup to train.lr over train.warmup steps, then cosine decay to 0 (001 E.2)."""
    train = config.train
    if step < train.warmup:
        return train.lr * (step + 1) / train.warmup
    progress = (step - train.warmup) / max(1, train.steps - train.warmup)
    return train.lr * 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))


class TrainingBatch(NamedTuple):
    """One training batch; the loss is taken where `answer_mask` is True."""

    #: (B, T) token ids, rows right-padded with the pad id
    tokens: np.ndarray
    #: (B, T) True on the answer tokens (hints included) and the end token
    answer_mask: np.ndarray
    #: format.fixed_length (003 §3): (B, T) target of every position, the pad id where
    #: no loss is taken, for models with one output per position. None in the
    #: sequential layout, where position t predicts tokens[t + 1]
    targets: np.ndarray | None = None
    #: (B,) prompt length of each row (tokens through "="; the whole row when aligned)
    prompt_lengths: np.ndarray | None = None


def training_batch(
    config: TrialConfig, task: Task, distribution: Distribution, tokenizer: CharTokenizer, step: int
) -> TrainingBatch:
    """Batch number `step`, drawn (questions, hints, spaces, shifts) from a Generator
    seeded by (seeds.data, step) alone. Built per question length, with no loop
    over questions; rows of different lengths are right-padded."""
    rng = np.random.default_rng([config.seeds.data, step])
    groups = distribution.sample(
        task, rng, config.train.batch_size, config.task.train_digits, leading_zeros(config.format)
    )
    longest = config.longest_digits
    encoded = [
        encode_questions(task, operands, config.format, tokenizer, rng, training=True, width=longest)
        for operands in groups.values()
    ]
    length = max(e.tokens.shape[1] for e in encoded)
    tokens = np.full((config.train.batch_size, length), tokenizer.pad_id, dtype=np.int64)
    answer_mask = np.zeros((config.train.batch_size, length), dtype=bool)
    targets = np.full_like(tokens, tokenizer.pad_id) if config.format.fixed_length else None
    prompt_lengths = np.zeros(config.train.batch_size, dtype=np.int64)
    row = 0
    for e in encoded:
        rows, width = e.tokens.shape
        block = slice(row, row + rows)
        tokens[block, :width] = e.tokens
        column = np.arange(width)[None, :]
        prompt_lengths[block] = e.row_prompt_lengths()
        if e.aligned:
            answer_mask[block, width - e.answer.shape[1] : width] = True
            targets[block, width - e.answer.shape[1] : width] = e.answer
        else:
            start = e.row_prompt_lengths()[:, None]
            answer_mask[block, :width] = (column >= start) & (column <= start + e.row_answer_lengths()[:, None])
        row += rows
    return TrainingBatch(tokens, answer_mask, targets, prompt_lengths)


def batch_tensors(batch: TrainingBatch, device: torch.device) -> Batch:
    """The batch as tensors on `device`, as an architecture's forward_batch takes it."""
    tokens, answer_mask, targets, prompt_lengths = (
        None if array is None else torch.from_numpy(array).to(device) for array in batch
    )
    return Batch(tokens, answer_mask, targets, prompt_lengths)


def row_lengths(answer_mask: np.ndarray) -> np.ndarray:
    """(B,) the columns each row needs: through its last supervised token (the end
    token of a sequential row, the last answer column of an aligned one)."""
    return answer_mask.shape[1] - np.argmax(answer_mask[:, ::-1], axis=1)


def length_buckets(lengths: np.ndarray, buckets: int) -> list[np.ndarray]:
    """Row indices (ascending) of at most `buckets` groups of consecutive lengths whose
    padded area, sum over groups of rows x longest row, is the least possible.

    Why: a batch of 1-40-digit questions padded to its longest row spends most of its
    compute on padding; trained group by group, each trimmed to its own longest row,
    it does the same work on far fewer tokens. The optimal split into contiguous
    length ranges is a small dynamic programme over the distinct lengths (a few
    dozen), cheap next to a training step."""
    values, counts = np.unique(lengths, return_counts=True)
    m, groups = len(values), min(buckets, len(values))
    before = np.concatenate([[0], np.cumsum(counts)])  # rows shorter than values[j]
    # area[i, j]: the group of lengths values[i:j] padded to values[j - 1] (j > i)
    i, j = np.arange(m + 1)[:, None], np.arange(m + 1)[None, :]
    area = np.where(j > i, (before[j] - before[i]) * values[np.maximum(j - 1, 0)], np.inf)
    best = np.where(np.arange(m + 1) == 0, 0.0, np.inf)  # best area of the first j lengths, 0 groups
    starts = []
    for _ in range(groups):
        total = best[:, None] + area  # (m + 1, m + 1): the last group is values[i:j]
        starts.append(total.argmin(axis=0))
        best = total.min(axis=0)
    edges, end = [m], m
    for start in reversed(starts):
        end = int(start[end])
        edges.append(end)
    edges = edges[::-1]
    return [np.flatnonzero((lengths >= values[a]) & (lengths <= values[b - 1])) for a, b in pairwise(edges)]


def split_batch(
    model: Architecture, batch: Batch, positions: Positions, groups: list[np.ndarray], lengths: np.ndarray
) -> list[tuple[Batch, Positions]]:
    """The rows of each group, trimmed to the group's longest row (`lengths` from
    `row_lengths`), with the positions they had in the whole batch (sampled once)."""
    parts = []
    for rows in groups:
        width = int(lengths[rows].max())
        index = torch.from_numpy(rows).to(batch.tokens.device)
        targets = None if batch.targets is None else batch.targets[index, :width]
        part = Batch(batch.tokens[index, :width], batch.answer_mask[index, :width], targets, batch.prompt_lengths[index])
        parts.append((part, model.trim_positions(rows_of(positions, index), part.tokens, part.prompt_lengths)))
    return parts


def batch_parts(
    model: Architecture, batch: TrainingBatch, tensors: Batch, positions: Positions, buckets: int
) -> list[tuple[Batch, Positions]]:
    """The batch as it is trained: whole, or as its length buckets (train.length_buckets)."""
    if buckets == 1:
        return [(tensors, positions)]
    lengths = row_lengths(batch.answer_mask)
    groups = length_buckets(lengths, buckets)
    return split_batch(model, tensors, positions, groups, lengths) if len(groups) > 1 else [(tensors, positions)]


def accumulate_gradients(
    forward_batch: Callable, parts: list[tuple[Batch, Positions]], device: torch.device, precision: str
) -> torch.Tensor:
    """Forward and backward of each part of a batch. Each part's mean cross entropy is
    weighted by its share of the batch's supervised tokens, so the summed gradient is
    that of the whole batch's mean cross entropy. Returns that mean (detached). With
    one part (the whole padded batch) this is the plain training step, bit for bit."""
    total = int(sum(part.answer_mask.sum() for part, _ in parts)) if len(parts) > 1 else None
    losses, counted = [], 0
    for part, positions in parts:
        with autocast(device, precision):
            logits, targets = forward_batch(part, positions)
        loss = F.cross_entropy(logits.float(), targets)
        if total is not None:
            loss = loss * (len(targets) / total)
            counted += len(targets)
        loss.backward()
        losses.append(loss.detach())
    if total is not None and counted != total:
        raise RuntimeError(f"{counted} supervised targets from {total} answer-mask tokens")
    return sum(losses[1:], losses[0])


def _step_generator(config: TrialConfig, step: int) -> torch.Generator:
    """Torch randomness of training step `step` (position sampling), from the data seed only."""
    seed = np.random.SeedSequence([config.seeds.data, step, 1]).generate_state(1)[0]
    return torch.Generator().manual_seed(int(seed))


def resolve_device(requested: str | None = None) -> torch.device:
    if requested:
        return torch.device(requested)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def _decay_groups(model: torch.nn.Module, weight_decay: float) -> list[dict]:
    """Decay matrices only; biases and norm gains are not decayed (nanoGPT)."""
    params = [p for p in model.parameters() if p.requires_grad]
    return [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]


def build_optimizer(model: torch.nn.Module, train: TrainConfig) -> torch.optim.AdamW:
    """AdamW over the decay groups, at train.lr until the schedule sets each step's rate."""
    return torch.optim.AdamW(_decay_groups(model, train.weight_decay), lr=train.lr, betas=(0.9, 0.98))


class TrainingStep:
    """The one optimizer step of a trial: `train` takes it at every step, and `lg-study
    bench` times it, so that a benchmark measures the step trials take (decay groups,
    schedule, dropout seed, precision, clipping included).

    `parts` turns batch number `step` into what is trained (tensors, the positions
    drawn from the data seed, the length buckets); `update` trains on them. A caller
    that times the update alone prepares the parts first."""

    def __init__(
        self, config: TrialConfig, model: Architecture, device: torch.device, forward_batch: Callable | None = None
    ) -> None:
        """`forward_batch`: another form of model.forward_batch (a benchmark's compile
        mode, a reference model); by default the trial's, compiled with train.compile."""
        self.config, self.model, self.device = config, model, device
        self.optimizer = build_optimizer(model, config.train)
        if forward_batch is None:
            # the compiled step shares its parameters with `model`; evaluation runs uncompiled
            forward_batch = torch.compile(model.forward_batch) if config.train.compile else model.forward_batch
        self.forward_batch = forward_batch
        self.sampler = build_position_sampler(config.model)

    def parts(self, step: int, batch: TrainingBatch) -> list[tuple[Batch, Positions]]:
        """Batch number `step` on the device, with its positions, whole or in length buckets."""
        tensors = batch_tensors(batch, self.device)
        positions = self.model.sample_positions(
            tensors.tokens, tensors.prompt_lengths, self.sampler, _step_generator(self.config, step), training=True
        )
        return batch_parts(self.model, batch, tensors, positions, self.config.train.length_buckets)

    def update(self, step: int, parts: list[tuple[Batch, Positions]]) -> torch.Tensor:
        """Train on the parts of batch number `step` at its learning rate; the batch's mean
        loss (detached). A loss that is not finite leaves the weights as they were."""
        config = self.config
        for group in self.optimizer.param_groups:
            group["lr"] = learning_rate(config, step)
        if config.model.dropout > 0:
            # dropout draws from torch's global Generator: seeded by (data seed, step), a
            # resumed trial drops the units an uninterrupted one would
            torch.manual_seed(int(np.random.SeedSequence([config.seeds.data, step]).generate_state(1)[0]))
        self.optimizer.zero_grad(set_to_none=True)
        loss = accumulate_gradients(self.forward_batch, parts, self.device, config.train.precision)
        if torch.isfinite(loss):
            if config.train.grad_clip > 0:
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), config.train.grad_clip)
            self.optimizer.step()
        return loss

    def __call__(self, step: int, batch: TrainingBatch) -> torch.Tensor:
        """The whole step on batch number `step`: `parts`, then `update`."""
        return self.update(step, self.parts(step, batch))


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
    With train.deterministic, under torch's deterministic algorithms (lengthgen.determinism)."""
    target_device = resolve_device(device)
    with deterministic(config.train.deterministic, target_device):
        return _train(config, on_report or (lambda report: None), resume_state, target_device)


def _train(
    config: TrialConfig, on_report: Callable[[Report], None], resume_state: dict | None, target_device: torch.device
) -> TrialResult:
    tokenizer = CharTokenizer()
    task, distribution = derive(config).task, derive(config).distribution  # built once, then cached
    positions = build_position_sampler(config.model)
    eval_sets = build_eval_sets(config, task, tokenizer)
    phase_steps = config.train.steps
    phases = 2 if ATTENTION_BIASES[config.model.attention_bias].calibrated else 1

    state = resume_state or {}
    step, tokens_seen = state.get("step", 0), state.get("tokens", 0)
    started = time.perf_counter() - state.get("wall_s", 0.0)
    history: dict[str, list] = {
        "train": [TrainLog(**t) for t in state.get("history", {}).get("train", [])],
        "eval": [(s, LengthResult(**r)) for s, r in state.get("history", {}).get("eval", [])],
    }
    #: {site: Ā}, the averaged attention logits of the first phase (abc)
    extracted: dict[str, torch.Tensor] | None = state.get("extracted")
    last_finite_loss, final_samples = None, []  # float | None, list[SampleRecord]
    for phase in range(state.get("phase", 0), phases):
        model, training_step = _phase_model(config, phase, extracted, state, target_device)
        model.train()
        while step < (phase + 1) * phase_steps:
            local = step - phase * phase_steps  # each phase sees the same batches (000 §5, step 3)
            batch = training_batch(config, task, distribution, tokenizer, local)
            tokens_seen += int((batch.tokens != tokenizer.pad_id).sum())
            loss = training_step(local, batch)
            step += 1
            if not torch.isfinite(loss):
                return _diverged(config, model, target_device, history, step, last_finite_loss, on_report)
            last_finite_loss = loss.item()

            final = step == phases * phase_steps
            report = Report(step=step)
            if step % config.train.log_every == 0 or final:
                lr = learning_rate(config, local)
                report.train = TrainLog(step, last_finite_loss, lr, tokens_seen, time.perf_counter() - started)
                history["train"].append(report.train)
            if step % phase_steps == 0 or (config.eval.every and step % config.eval.every == 0):
                with autocast(target_device, config.train.precision):
                    report.eval, report.samples = evaluate(
                        model, eval_sets, config, tokenizer, positions, target_device, with_samples=final
                    )
                report.summary = summarize(report.eval)
                history["eval"] += [(step, r) for r in report.eval]
                report.checkpoint = partial(
                    _checkpoint, config, phase, step, tokens_seen, time.perf_counter() - started, model,
                    training_step.optimizer, history, extracted,
                )
            if final:
                report.final, report.status = True, "done"
                report.attention_biases = _attention_biases(model, extracted, eval_sets)
                final_samples = report.samples
            if report.train or report.eval:
                on_report(report)
        if phase + 1 < phases:
            extracted = mean_attention_logits(model, config, task, tokenizer, positions, target_device)

    final_step = max((s for s, _ in history["eval"]), default=step)
    final_eval = [r for s, r in history["eval"] if s == final_step]
    return TrialResult(
        status="done", steps=step, n_params=count_parameters(model), device=str(target_device),
        train=history["train"], eval=history["eval"], samples=final_samples,
        summary=summarize(final_eval) if final_eval else {},
        attention_biases=_attention_biases(model, extracted, eval_sets),
    )


def _phase_model(
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


def _diverged(config, model, device, history, step, last_finite_loss, on_report) -> TrialResult:
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
        diverged_at=step,
        last_finite_loss=last_finite_loss,
    )
