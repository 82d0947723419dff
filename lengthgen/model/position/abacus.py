"""Abacus embeddings: a learned vector per place of a digit in its own number."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import nn

from lengthgen.formats import pairs_places
from lengthgen.model.position.checks import checks_inside
from lengthgen.model.position.places import is_digit

if TYPE_CHECKING:
    from lengthgen.config import TrialConfig
    from lengthgen.tasks import Task


class Abacus(nn.Module):
    """Abacus embeddings: McLeish, Bansal, Stein, Jain, Kirchenbauer, Bartoldson,
    Kailkhura, Bhatele, Geiping, Schwarzschild, Goldstein, "Transformers Can Do
    Arithmetic with the Right Embeddings", NeurIPS 2024, arXiv 2405.17399, §3.1.

    Every digit token gets, on top of its token embedding and whatever model.pe adds,
    the learned vector E[p + k] of its place p in its own number (p = 1 for the least
    significant digit, whatever order the number is written in; lengthgen.model.position.places),
    with an offset k drawn at training, uniform on 0 .. max_offset, and k = 0 at test,
    so that places longer than the trained numbers meet trained vectors. Non-digit
    tokens (start, operators, "=", hints, spaces, end) get nothing by default.

        "<s>085+050=5310</s>", k = 0: the digits 085 050 5310 get E[3 2 1], E[3 2 1], E[1 2 3 4]

    Choices where the paper is silent or differs: the paper writes every number least
    significant digit first and counts a run of digits from its first; here the place
    counts from the least significant digit in every format. By default k is drawn per
    question (from the data seed's Generator) and non-digits get zero; the authors'
    released code (mcleish7/arithmetic, cramming/architectures/embeddings.py, Abacus.forward,
    lines 526-534) draws one k per forward pass, a micro-batch, and gives every non-digit
    the table's row 0: model.abacus_offset batch and model.abacus_non_digits row_zero
    (`ABACUS_OFFSETS`, `ABACUS_NON_DIGITS`). The table has max_places + max_offset rows
    (max_places = model.max_positions: no number is longer than its row), one more for
    the non-digits' row under row_zero."""

    #: ModelConfig fields only Abacus embeddings read (refused without model.abacus)
    options = ("abacus_max_offset", "abacus_offset", "abacus_non_digits")

    def __init__(
        self, d_model: int, max_places: int, max_offset: int, offset: str = "question", non_digits: str = "zero"
    ) -> None:
        super().__init__()
        self.non_digits = ABACUS_NON_DIGITS[non_digits]
        # row i: index i + 1, or index i with a row kept for the non-digits
        self.table = nn.Embedding(self.non_digits.rows_before + max_places + max_offset, d_model)
        self.max_offset = max_offset
        self.draw_offsets = ABACUS_OFFSETS[offset]

    @staticmethod
    def check(config: TrialConfig, task: Task) -> None:
        """Refuse a trial whose digits have no place to read (ValueError naming the field)."""
        fmt = config.format
        if pairs_places(task, fmt):
            raise ValueError(
                "model.abacus indexes each digit by its place in its own number; format.interleave writes "
                "the digits of two numbers as one run (and aligns them itself): choose one"
            )
        if not fmt.fixed_length and not fmt.reverse and not fmt.pad and task.answer_is_number:
            raise ValueError(
                "model.abacus needs the place of every answer digit before it is written: with "
                "format.reverse false the first digit's place is the answer's length, which format.pad "
                "false leaves open (a carry may add a digit); set format.pad or format.reverse to true"
            )

    def indices(
        self, places: tuple[torch.Tensor, ...], generator: torch.Generator | None, training: bool
    ) -> tuple[torch.Tensor, ...]:
        """The index p + k of every token with a place p >= 1 (0 elsewhere), per sequence
        of one batch of rows; k drawn from `generator` at training, per row or once for
        the batch (model.abacus_offset), 0 at test."""
        offset = torch.zeros(len(places[0]), dtype=torch.long)
        if training:
            offset = self.draw_offsets(len(places[0]), self.max_offset, generator)
        offset = offset.to(places[0].device)[:, None]
        return tuple(torch.where(p > 0, p + offset, 0) for p in places)

    def forward(self, tokens: torch.Tensor, indices: torch.Tensor | None) -> torch.Tensor:
        """tokens, indices (B, T) -> (B, T, d): E[index] on the digits, elsewhere 0 or
        the non-digits' row (model.abacus_non_digits)."""
        if indices is None:
            raise ValueError("model.abacus needs the Abacus index of every token (Architecture.sample_positions)")
        if checks_inside():  # a compiled step or a seed batch checks before (Architecture.check_positions)
            self.check_indices(indices)
        return self.non_digits.embed(self.table, is_digit(tokens) & (indices > 0), indices)

    def check_indices(self, indices: torch.Tensor) -> None:
        if indices.numel() and int(indices.max()) + self.non_digits.rows_before > self.table.num_embeddings:
            raise ValueError(
                f"Abacus index {int(indices.max())} is past the table's {self.table.num_embeddings} rows "
                f"(model.max_positions + model.abacus_max_offset)"
            )


def _per_question(rows: int, max_offset: int, generator: torch.Generator | None) -> torch.Tensor:
    return torch.randint(0, max_offset + 1, (rows,), generator=generator)


def _per_batch(rows: int, max_offset: int, generator: torch.Generator | None) -> torch.Tensor:
    # the release's `k = random.randint(0, self.max_k)` once per forward pass
    # (embeddings.py line 531): one draw, every row of the micro-batch shifted alike
    return torch.randint(0, max_offset + 1, (1,), generator=generator).expand(rows)


#: model.abacus_offset -> (rows, K, generator) -> the training offsets k of a batch's rows,
#: uniform on 0 .. K
ABACUS_OFFSETS: dict[str, Callable[[int, int, torch.Generator | None], torch.Tensor]] = {
    "question": _per_question,
    "batch": _per_batch,
}


def _zero(table: nn.Embedding, used: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
    vectors = table((indices - 1).clamp(min=0))  # (B, T, d)
    return torch.where(used[..., None], vectors, 0.0)


def _row_zero(table: nn.Embedding, used: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
    # the release indexes its table by the digit's place + k and every other token by 0
    # (embeddings.py lines 526-534: `self.embedding(output)`, output 0 off the digits)
    return table(torch.where(used, indices, 0))  # (B, T, d)


@dataclass(frozen=True)
class NonDigits:
    """One model.abacus_non_digits choice: what the tokens that are not digits of a
    number (start, operators, "=", hints, spaces, end, padding) get."""

    #: table rows before index 1's: 1 keeps row 0 for the non-digits
    rows_before: int
    #: (table, used (B, T), indices (B, T)) -> (B, T, d): the Abacus vectors of a batch,
    #: `used` the digits with a place
    embed: Callable[[nn.Embedding, torch.Tensor, torch.Tensor], torch.Tensor]


ABACUS_NON_DIGITS: dict[str, NonDigits] = {
    "zero": NonDigits(rows_before=0, embed=_zero),
    "row_zero": NonDigits(rows_before=1, embed=_row_zero),
}
