"""Encoder-only transformer with one output per position (003 §3, App. B: "a
BERT-based encoder-only attention model").

It reads a question in the aligned layout (format.fixed_length, 003 eq. 3.1-3.2)
and its outputs at the last A columns are the answer, all in one pass: nothing is
generated, so the teacher-forced argmax is the model's answer. Self-attention is
bidirectional (003: "the model must consider ... both looking forward and
backward"); the aligned rows of a trial all have the same width, so there is no
padding. Positional encodings act as in the decoder, with the biases made
bidirectional (lengthgen.model.position.pe.biases); `upe` gives the multiplier's digit
columns their own key vectors (lengthgen.model.position.pe.relative_keys).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import torch
from torch import nn

from lengthgen.layout import InputLayout
from lengthgen.model.base import Architecture, Batch, Positions, TrainingInputs
from lengthgen.model.block import Block
from lengthgen.model.position.places import question_places
from lengthgen.model.position.stack import StackPositionalEncoding
from lengthgen.model.sizes import SIZES

if TYPE_CHECKING:
    from lengthgen.config import ModelConfig


class EncoderLM(Architecture):
    aligned_outputs = True
    options = ("init", "attention_scale", "attention_projection_bias")
    #: checkpoints written before model.pe moved into `pe` (Architecture.renamed_state)
    renamed_state: ClassVar[dict[str, str]] = {
        "input_position.": "pe.input_embedding.", "attention_bias.": "pe.attention_bias.",
    }

    def __init__(self, cfg: ModelConfig, vocab_size: int, layout: InputLayout | None = None) -> None:
        super().__init__(cfg, vocab_size, layout)
        dims = SIZES[cfg.size]
        self.pe = StackPositionalEncoding(dims, cfg, self.layout, causal=False)
        self.blocks = nn.ModuleList(
            Block(dims, cfg, self.pe.relative_keys(), causal=False) for _ in range(dims.n_layers)
        )
        self._add_head(cfg, vocab_size, dims)

    @classmethod
    def check(cls, config, task) -> None:
        super().check(config, task)
        if not config.format.fixed_length:
            raise ValueError(
                f"model.arch {config.model.arch} writes one output per input position (003 §3): it reads "
                f"the aligned layout, set format.fixed_length: true"
            )

    def forward(self, tokens: torch.Tensor, positions: torch.Tensor, abacus: torch.Tensor | None = None) -> torch.Tensor:
        """tokens, positions: (B, T) -> logits (B, T, vocab), one output per position;
        `abacus` (B, T): the tokens' Abacus indices, with model.abacus."""
        x = self.embed(tokens, positions, self.pe, abacus)  # (B, T, d)
        mask = self.pe.bias(positions, positions)  # (B|1, H, T, T)
        rotation = self.pe.rotation(positions)
        for block in self.blocks:
            x = block(x, positions, positions, mask, rotation=rotation)
        return self.lm_head(self.final_norm(x))

    # the architecture interface (lengthgen.model.base)

    def position_lengths(self, tokens, prompt_lengths, training):
        return (tokens.shape[1],)

    def digit_places(self, tokens, prompt_lengths, lengths):
        return (question_places(tokens, prompt_lengths, self.layout),)  # the row is the question

    def training_inputs(self, batch: Batch, positions: Positions) -> TrainingInputs:
        return TrainingInputs((batch.tokens, positions[0], self.abacus_of(positions, 0)), {}, batch.targets,
                              batch.answer_mask)

    def supervised_mask(self, batch: Batch) -> torch.Tensor:
        return batch.answer_mask  # one output per column: the answer columns

    @torch.no_grad()
    def teacher_forced_argmax(self, tokens, positions, answer_start):
        return self(tokens, positions[0], self.abacus_of(positions, 0))[:, answer_start:].argmax(-1)

    @torch.no_grad()
    def greedy_decode(self, prompts, new_tokens, positions, use_cache=True):
        """Nothing to generate: `prompts` are the whole question rows, and the answer is
        the argmax at their last `new_tokens` columns."""
        return self.teacher_forced_argmax(prompts, positions, prompts.shape[1] - new_tokens)
