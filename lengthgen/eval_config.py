"""The evaluation section of a trial's config (TrialConfig.eval): the test lengths and
questions, and what is evaluated beyond them (the long-length validation set of
eval.select, the grid of operand lengths). Checks that need the rest of the config
(the training range, the task, the model's positions) are TrialConfig's."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from lengthgen.distributions import TEST_QUESTIONS

#: pydantic refuses a field a section does not have (lengthgen.config's docstring)
STRICT = {"extra": "forbid"}
TestQuestionsName = Literal[tuple(TEST_QUESTIONS)]
#: eval.select: which evaluation a study reports
SELECTIONS = ("final", "best_long_loss")
SelectionName = Literal[SELECTIONS]


@dataclass(frozen=True)
class EvalConfig:
    __pydantic_config__ = STRICT
    #: operand lengths to test; lengths inside task.train_digits count as in-distribution
    digits: tuple[int, ...] = (5, 8, 10)
    #: questions per test length, the same for every trial with the same seeds.eval
    samples: int = 100
    #: evaluate every this many steps (the final step is always evaluated; 0 = final only)
    every: int = 0
    #: questions decoded together
    batch_size: int = 500
    #: how the questions of each length are drawn (lengthgen.distributions.TEST_QUESTIONS):
    #: uniform (every digit uniform, as the training distribution's own test set),
    #: exact_length (every operand exactly that many digits, its first digit never 0,
    #: 000 §3.3), or cascade_uniform (every complexity level equally often, 003 Fig. 8c)
    questions: TestQuestionsName = "uniform"
    #: which evaluation a study reports (SELECTIONS): the final one, or the one with the
    #: lowest loss on the long-length validation set (Cho et al. 2024), beside the final
    select: SelectionName = "final"
    #: best_long_loss: the lengths of the held-out validation questions, all longer than
    #: training (lengthgen.validation)
    validation_digits: tuple[int, ...] = ()
    #: best_long_loss: questions per validation length
    validation_samples: int = 1000
    #: lengths of the first and of the second operand, crossed: at the final evaluation
    #: every cell (i, j) gets grid_samples questions of exactly i and j digits (McLeish
    #: et al. 2024's 100 x 100 grid); empty: none
    grid: tuple[tuple[int, ...], tuple[int, ...]] | tuple[()] = ()
    #: eval.grid: questions per cell
    grid_samples: int = 100

    def __post_init__(self) -> None:
        if not self.digits or min(self.digits) < 1:
            raise ValueError(f"eval.digits must be a non-empty list of lengths >= 1, got {self.digits}")
        if len(set(self.digits)) != len(self.digits):
            raise ValueError(f"eval.digits has duplicates: {self.digits}")
        if self.samples < 1 or self.every < 0 or self.batch_size < 1:
            raise ValueError("eval.samples and eval.batch_size must be >= 1, eval.every >= 0")
        if self.validation_samples < 1 or self.grid_samples < 1:
            raise ValueError(f"eval.validation_samples and eval.grid_samples must be >= 1, got "
                             f"{self.validation_samples} and {self.grid_samples}")
        if self.grid and (len(self.grid) != 2 or not all(self.grid) or min(min(side) for side in self.grid) < 1):
            raise ValueError(f"eval.grid must be two non-empty lists of lengths >= 1 (the first operand's, "
                             f"the second's), got {[list(side) for side in self.grid]}")
        self._check_selection()

    def _check_selection(self) -> None:
        if self.select == "final":
            if self.validation_digits:
                raise ValueError(f"eval.validation_digits {list(self.validation_digits)} is read by eval.select "
                                 "best_long_loss only (eval.select is final): remove it")
            return
        if not self.validation_digits or min(self.validation_digits) < 1:
            raise ValueError(f"eval.select {self.select} chooses the checkpoint by the loss on "
                             f"eval.validation_digits, got {list(self.validation_digits)}: give the long "
                             "lengths to validate on")
        if self.every == 0:
            raise ValueError(f"eval.select {self.select} chooses among the evaluated checkpoints; eval.every 0 "
                             "evaluates the final step only: set eval.every")

    @property
    def longest_digits(self) -> int:
        """The longest question evaluated, test or validation."""
        return max((*self.digits, *self.validation_digits, *(n for side in self.grid for n in side)))
