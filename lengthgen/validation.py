"""The long-length validation set of `eval.select: best_long_loss`: questions of lengths
beyond training, held apart from the test questions, whose teacher-forced loss picks
the checkpoint a study reports.

Cho et al. 2024 (Position Coupling, arXiv 2405.20671) report the checkpoint with the
lowest loss on such a set (their released code's `val_long`, 51-100-digit additions).
Choosing on test questions would make the test accuracy optimistic, so these
questions come from their own stream of the eval seed: a Generator seeded by
(seeds.eval, n, VALIDATION_STREAM), where the test questions of length n use
(seeds.eval, n) and their positions (seeds.eval, n, 1). They are drawn as
`eval.questions` draws the test questions and written as test questions are (no
training augmentation); the loss is the training loss (mean cross-entropy over every
supervised token), at the positions a test question gets.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from lengthgen.batches import TrainingBatch, assemble_batch, batch_tensors
from lengthgen.config import TrialConfig, derive
from lengthgen.distributions import TEST_QUESTIONS
from lengthgen.formats import encode_questions, leading_zeros
from lengthgen.model.base import Architecture, rows_of
from lengthgen.model.position.samplers import PositionSampler
from lengthgen.tokenizer import CharTokenizer

#: the eval seed's stream of the validation questions (tests: none; positions: 1)
VALIDATION_STREAM = 2


def validation_batch(config: TrialConfig, tokenizer: CharTokenizer) -> TrainingBatch | None:
    """The validation questions of every length in eval.validation_digits as one
    loss-masked batch, or None without a validation set."""
    if not config.eval.validation_digits:
        return None
    task, distribution = derive(config).task, derive(config).distribution
    questions_of = TEST_QUESTIONS[config.eval.questions]()
    encoded = []
    for n in config.eval.validation_digits:
        rng = np.random.default_rng([config.seeds.eval, n, VALIDATION_STREAM])
        operands = questions_of.operands(distribution, task, rng, config.eval.validation_samples, n,
                                         config.task.train_digits, leading_zeros(config.format))
        encoded.append(encode_questions(task, operands, config.format, tokenizer, rng, width=config.longest_digits))
    return assemble_batch(encoded, config.format.fixed_length, tokenizer)


def validation_generator(config: TrialConfig) -> torch.Generator:
    """Torch randomness of the validation positions (coupled_at_eval, randomized_at_eval),
    from the eval seed only."""
    seed = np.random.SeedSequence([config.seeds.eval, VALIDATION_STREAM, 1]).generate_state(1)[0]
    return torch.Generator().manual_seed(int(seed))


@torch.no_grad()
def validation_loss(
    model: Architecture, batch: TrainingBatch, config: TrialConfig, positions: PositionSampler, device: torch.device
) -> float:
    """Mean cross-entropy over every supervised token of the validation batch, in chunks
    of eval.batch_size rows, at test-time positions."""
    was_training = model.training
    model.eval()
    tensors = batch_tensors(batch, device)
    placed = model.sample_positions(tensors.tokens, tensors.prompt_lengths, positions,
                                    validation_generator(config), training=False)
    total, count = 0.0, 0
    noise = torch.Generator().manual_seed(
        int(np.random.SeedSequence([config.seeds.eval, VALIDATION_STREAM, 3]).generate_state(1)[0]))
    for start in range(0, len(batch.tokens), config.eval.batch_size):
        rows = slice(start, start + config.eval.batch_size)
        part = type(tensors)(*(None if t is None else t[rows] for t in tensors))
        part_positions = model.trim_positions(rows_of(placed, rows), part.tokens, part.prompt_lengths)
        with model.noise_from(noise):  # model.state_init noise: the eval seed's stream 3
            logits, targets = model.forward_batch(part, part_positions)
        total += float(F.cross_entropy(logits.float(), targets, reduction="sum"))
        count += len(targets)
    model.train(was_training)
    return total / count
