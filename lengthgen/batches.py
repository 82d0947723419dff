"""Training batches: batch number `step` of a trial, drawn from the data seed alone
(`training_batch`), as tensors (`batch_tensors`), split into length buckets
(`batch_parts`, train.length_buckets), and queued to the device with what the step
would otherwise read back from it decided on the host (`placed_parts`)."""

from __future__ import annotations

from itertools import pairwise
from typing import NamedTuple

import numpy as np
import torch

from lengthgen.config import TrialConfig
from lengthgen.distributions import Distribution
from lengthgen.formats import EncodedQuestions, encode_questions, leading_zeros
from lengthgen.host_copy import to_device
from lengthgen.model.base import Architecture, Batch, Positions, rows_of
from lengthgen.model.position.stack import rows_agree
from lengthgen.tasks import Task
from lengthgen.tokenizer import CharTokenizer


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
    return assemble_batch(encoded, config.format.fixed_length, tokenizer)


def assemble_batch(encoded: list[EncodedQuestions], fixed_length: bool, tokenizer: CharTokenizer) -> TrainingBatch:
    """Groups of encoded questions as one batch, rows right-padded to the longest, the
    loss taken on each row's answer and end token (its answer columns when aligned)."""
    rows_total = sum(len(e.tokens) for e in encoded)
    length = max(e.tokens.shape[1] for e in encoded)
    tokens = np.full((rows_total, length), tokenizer.pad_id, dtype=np.int64)
    answer_mask = np.zeros((rows_total, length), dtype=bool)
    targets = np.full_like(tokens, tokenizer.pad_id) if fixed_length else None
    prompt_lengths = np.zeros(rows_total, dtype=np.int64)
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
        None if array is None else to_device(torch.from_numpy(array), device) for array in batch
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


def placed_parts(model: Architecture, parts: list[tuple[Batch, Positions]], device: torch.device) -> list[tuple[Batch, Positions]]:
    """Parts prepared on the host, queued to `device` with every decision that reads
    their values made here, where reading costs nothing: the positions checked against
    learned tables, whether their rows agree (Batch.rows_shared) and the flat index of
    the supervised outputs (Batch.supervised_index). On a GPU each such read inside the
    step would wait for every kernel queued before it. A split batch's parts each have
    as many supervised outputs as answer tokens (what the loss weights assume)."""
    return [_placed(model, batch, positions, device, len(parts) > 1) for batch, positions in parts]


def _placed(model: Architecture, batch: Batch, positions: Positions, device: torch.device, split: bool):
    model.check_positions(positions)
    index = model.supervised_mask(batch).flatten().nonzero().squeeze(1)
    if split and len(index) != int(batch.answer_mask.sum()):
        raise RuntimeError(f"{len(index)} supervised targets from {int(batch.answer_mask.sum())} answer-mask tokens")
    shared = rows_agree(*model.sequence_positions(positions))
    tensors = (None if t is None else to_device(t, device) for t in batch[:4])
    return Batch(*tensors, to_device(index, device), shared), tuple(_placed_rows(p, device) for p in positions)


def _placed_rows(positions: torch.Tensor, device: torch.device) -> torch.Tensor:
    """Positions on `device`; rows broadcast from one (plain positions) copied as that one row."""
    if positions.dim() and positions.stride(0) == 0:
        return to_device(positions[:1], device).expand(positions.shape)
    return to_device(positions, device)
