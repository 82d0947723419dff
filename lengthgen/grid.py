"""eval.grid: test questions over a grid of operand lengths, the first operand's length
by the second's (McLeish et al. 2024, "Transformers Can Do Arithmetic with the Right
Embeddings", arXiv 2405.17399: accuracy over the 100 x 100 grid of operand lengths,
their Fig. 1 and the released code's evaluation over that grid).

Cell (i, j) holds eval.grid_samples questions whose first operand has exactly i digits
and whose second has exactly j (a 1-digit operand 1..base-1, as the authors' exact
lengths), drawn from a Generator seeded by (seeds.eval, i, j, GRID_STREAM) alone, so
every trial with the same eval seed answers the same questions and none is a test
question of eval.digits (stream none) or a validation question (stream 2). The
question's length is the longer operand's; the shorter is written zero-padded with
format.pad, at its own length without. Cells are evaluated at the final evaluation
only, as the authors evaluate their trained models.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from lengthgen.config import TrialConfig, derive
from lengthgen.distributions import exact_length_digits
from lengthgen.evaluation import EvalSet, answer_carries, evaluate
from lengthgen.formats import encode_questions
from lengthgen.model.base import Architecture
from lengthgen.model.position.samplers import PositionSampler
from lengthgen.tokenizer import CharTokenizer

#: the eval seed's stream of the grid questions (tests: none; positions: 1; validation: 2)
GRID_STREAM = 3


@dataclass
class GridResult:
    first: int  # digits of the first operand
    second: int  # digits of the second
    n: int
    correct: int
    accuracy: float
    #: both operands' lengths lie inside task.train_digits
    in_distribution: bool


@dataclass
class GridCell:
    first: int
    second: int
    questions: EvalSet


def build_grid(config: TrialConfig, tokenizer: CharTokenizer) -> list[GridCell]:
    """Every cell of eval.grid, first operand's lengths outermost."""
    if not config.eval.grid:
        return []
    task = derive(config).task
    cells = []
    for first in config.eval.grid[0]:
        for second in config.eval.grid[1]:
            rng = np.random.default_rng([config.seeds.eval, first, second, GRID_STREAM])
            n, count = max(first, second), config.eval.grid_samples
            scaled = [exact_length_digits(rng, np.full(count, length), n, task.base, zero_is_one_digit=False)
                      for length in (first, second)]
            operands = task.assemble(scaled, rng)
            questions = encode_questions(task, operands, config.format, tokenizer, rng, width=config.longest_digits)
            cells.append(GridCell(first, second, EvalSet(n, questions, task.complexity(operands),
                                                         answer_carries(task, operands), config.format.reverse)))
    return cells


def evaluate_grid(
    model: Architecture, cells: list[GridCell], config: TrialConfig, tokenizer: CharTokenizer,
    positions: PositionSampler, device: torch.device,
) -> list[GridResult]:
    """Exact match of every cell, as evaluate scores a test length."""
    results, _ = evaluate(model, [c.questions for c in cells], config, tokenizer, positions, device,
                          with_samples=False)
    return [GridResult(c.first, c.second, r.n, r.correct, r.accuracy,
                       config.in_distribution(c.first) and config.in_distribution(c.second))
            for c, r in zip(cells, results, strict=True)]
