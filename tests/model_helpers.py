"""What the model tests (Abacus, coupling, encoder-decoder, decoding, length bucketing)
share: one tokenizer, the CPU, the encodings that read positions in sequence, numbers
as a task holds them, questions as a format writes them, a config with other seeds
(test_seeds, test_perturbation too), a trial's batches and the
positions the trainer draws for them, its test questions as the evaluator reads them,
a trained model, and the padded batch's gradient against its length buckets'."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import numpy as np
import torch
import torch.nn.functional as F

from lengthgen import TrialConfig, train
from lengthgen.batches import (
    TrainingBatch,
    batch_tensors,
    length_buckets,
    row_lengths,
    split_batch,
    training_batch,
)
from lengthgen.config import derive
from lengthgen.digits import DIGIT_DTYPE
from lengthgen.evaluation import (
    build_eval_sets,
    eval_generator,
    greedy_decode,
    teacher_forced_argmax,
)
from lengthgen.formats import EncodedQuestions, encode_questions
from lengthgen.model import build_model
from lengthgen.model.position.pe import POSITIONAL_ENCODINGS
from lengthgen.model.position.samplers import build_position_sampler
from lengthgen.tasks import build_task
from lengthgen.tokenizer import CharTokenizer
from lengthgen.training_step import TrainingStep, accumulate_gradients

tokenizer = CharTokenizer()
CPU = torch.device("cpu")
#: encodings that read positions in sequence (not those that need every row's columns aligned)
SEQUENTIAL_PES = sorted(pe for pe, encoding in POSITIONAL_ENCODINGS.items() if not encoding.needs_uniform_columns)


def number(text: str) -> np.ndarray:
    """"085" -> the digits least significant first, as a task holds them."""
    return np.array([[int(d) for d in reversed(text)]], dtype=DIGIT_DTYPE)


def written(trial: TrialConfig, *operands: str):
    """The token rows and prompt length of the question on ``operands``, as the trial's
    format writes it."""
    questions = encode_questions(build_task(trial.task), tuple(number(o) for o in operands), trial.format, tokenizer,
                                 np.random.default_rng(0), width=trial.longest_digits)
    return questions.tokens, questions.prompt_length


def with_seeds(config: TrialConfig, **seeds) -> TrialConfig:
    """The config with the named seeds changed and the others kept."""
    return replace(config, seeds=replace(config.seeds, **seeds))


def batch_of(trial: TrialConfig, step: int = 0) -> TrainingBatch:
    """Training batch number `step` of the trial, as the trainer draws it."""
    return training_batch(trial, derive(trial).task, derive(trial).distribution, tokenizer, step)


def training_positions(trial: TrialConfig, step: int) -> tuple[torch.Tensor, ...]:
    """The positions the trainer draws for batch `step` of the trial (lengthgen.training.
    TrainingStep.parts: the data seed's Generator of that step), its model built from
    the weight seed."""
    model = build_model(trial.model, len(tokenizer), trial.seeds.weight, trial.input_layout)
    ((_, positions),) = TrainingStep(trial, model, CPU).parts(step, batch_of(trial, step))
    return positions


def trained_model(trial: TrialConfig) -> torch.nn.Module:
    """The trial's model after training, from its last checkpoint, in eval mode."""
    states = []
    train(trial, on_report=lambda r: r.checkpoint and states.append(r.checkpoint()))
    model = build_model(trial.model, len(tokenizer), trial.seeds.weight, trial.input_layout)
    model.load_state_dict(states[-1]["model"])
    return model.eval()


def eval_questions(trial: TrialConfig, model) -> Iterator[tuple[EncodedQuestions, torch.Tensor, int, tuple]]:
    """Each test set of the trial as the evaluator reads it: its questions, their token
    rows, prompt length, and the positions drawn from the eval seed's Generator."""
    sampler = build_position_sampler(trial.model)
    for eval_set in build_eval_sets(trial, build_task(trial.task), tokenizer):
        questions = eval_set.questions
        tokens, prompt = torch.from_numpy(questions.tokens), questions.prompt_length
        positions = model.sample_positions(tokens, torch.full((len(tokens),), prompt), sampler,
                                           eval_generator(trial, eval_set.digits), training=False)
        yield questions, tokens, prompt, positions


def right_answers(model, tokens: torch.Tensor, prompt: int, positions) -> tuple[torch.Tensor, torch.Tensor]:
    """(B,) which answers one teacher-forced pass gets right, and which greedy decoding
    (KV-cached) gets right; padding after a row's end token is not compared."""
    target = tokens[:, prompt:]
    compared = target != tokenizer.pad_id
    forced = teacher_forced_argmax(model, tokens, positions, prompt)
    greedy = greedy_decode(model, tokens[:, :prompt], target.shape[1], positions)
    return ((forced == target) | ~compared).all(1), ((greedy == target) | ~compared).all(1)


def gradients(model) -> dict[str, torch.Tensor]:
    return {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}


def padded_and_bucketed(config: TrialConfig, groups=None):
    """(loss, gradients) of the trial's first batch padded and of its length buckets (3,
    or `groups`), from one draw of positions; and the buckets."""
    torch.set_num_threads(1)
    batch = batch_of(config)
    model = build_model(config.model, len(tokenizer), 0, config.input_layout)
    tensors = batch_tensors(batch, CPU)
    sampler = build_position_sampler(config.model)
    positions = model.sample_positions(
        tensors.tokens, tensors.prompt_lengths, sampler, torch.Generator().manual_seed(5), training=True
    )
    logits, targets = model.forward_batch(tensors, positions)
    padded = F.cross_entropy(logits, targets)
    padded.backward()
    padded_grads = gradients(model)
    model.zero_grad(set_to_none=True)
    lengths = row_lengths(batch.answer_mask)
    groups = groups or length_buckets(lengths, 3)
    parts = split_batch(model, tensors, positions, groups, lengths)
    bucketed = accumulate_gradients(model.forward_batch, parts, CPU, "fp32")
    return (padded.detach(), padded_grads), (bucketed, gradients(model)), parts


def assert_same_gradients(config: TrialConfig, groups=None) -> tuple[list, dict[str, torch.Tensor]]:
    """The length buckets of the trial's first batch have its padded loss and gradient;
    returns the buckets and the padded batch's gradients."""
    (padded, padded_grads), (bucketed, bucketed_grads), parts = padded_and_bucketed(config, groups)
    torch.testing.assert_close(bucketed, padded, rtol=1e-6, atol=1e-6)
    assert bucketed_grads.keys() == padded_grads.keys()
    for name, expected in padded_grads.items():
        torch.testing.assert_close(bucketed_grads[name], expected, rtol=1e-5, atol=1e-7)
    return parts, padded_grads
