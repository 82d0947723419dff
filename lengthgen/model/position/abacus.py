"""Abacus embeddings: a learned vector per place of a digit in its own number."""

from __future__ import annotations

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
    with an offset k drawn per question at training, uniform on 0 .. max_offset, and
    k = 0 at test, so that places longer than the trained numbers meet trained
    vectors. Non-digit tokens (start, operators, "=", hints, spaces, end) get nothing.

        "<s>085+050=5310</s>", k = 0: the digits 085 050 5310 get E[3 2 1], E[3 2 1], E[1 2 3 4]

    Choices where the paper is silent or differs: the paper writes every number least
    significant digit first and counts a run of digits from its first; here the place
    counts from the least significant digit in every format. Its reference code draws
    one k per batch and gives non-digits a learned vector of index 0; here k is drawn
    per question (from the data seed's Generator) and non-digits get zero. The table
    has max_places + max_offset rows (max_places = model.max_positions: no number is
    longer than its row)."""

    #: ModelConfig fields only Abacus embeddings read (refused without model.abacus)
    options = ("abacus_max_offset",)

    def __init__(self, d_model: int, max_places: int, max_offset: int) -> None:
        super().__init__()
        self.table = nn.Embedding(max_places + max_offset, d_model)  # row i: index i + 1
        self.max_offset = max_offset

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
        of one batch of rows; one k per row, drawn from `generator` at training."""
        offset = torch.zeros(len(places[0]), dtype=torch.long)
        if training:
            offset = torch.randint(0, self.max_offset + 1, (len(places[0]),), generator=generator)
        offset = offset.to(places[0].device)[:, None]
        return tuple(torch.where(p > 0, p + offset, 0) for p in places)

    def forward(self, tokens: torch.Tensor, indices: torch.Tensor | None) -> torch.Tensor:
        """tokens, indices (B, T) -> (B, T, d): E[index] on the digits, 0 elsewhere."""
        if indices is None:
            raise ValueError("model.abacus needs the Abacus index of every token (Architecture.sample_positions)")
        if checks_inside():  # a compiled step or a seed batch checks before (Architecture.check_positions)
            self.check_indices(indices)
        used = is_digit(tokens) & (indices > 0)
        vectors = self.table((indices - 1).clamp(min=0))  # (B, T, d)
        return torch.where(used[..., None], vectors, 0.0)

    def check_indices(self, indices: torch.Tensor) -> None:
        if indices.numel() and int(indices.max()) > self.table.num_embeddings:
            raise ValueError(
                f"Abacus index {int(indices.max())} is past the table's {self.table.num_embeddings} rows "
                f"(model.max_positions + model.abacus_max_offset)"
            )
