"""Encoder-decoder transformer (000 §3.3: 1 encoder layer, 6 decoder layers).

The encoder reads the question, the decoder writes the answer:

    row      <s> 0 8 5 + 0 5 0 = 5 3 1 0 </s>
    encoder      0 8 5 + 0 5 0                  (between the start token and "=")
    decoder  <s> 5 3 1 0          -> predicts  5 3 1 0 </s>

Choices (000 does not say): the question tokens without the start token and "="
are the encoder's input (000 §3.2 writes "0123+0748 -> 1780"); the decoder starts
from the row's start token; token embeddings are shared by both sides. Both sides
get their own positions, from 0 (lengthgen.model.position.samplers), and their own
positional-encoding parts: the encoder's self-attention is bidirectional, so its
biases cover keys after the query too (lengthgen.model.position.pe.biases). Cross-attention
carries no positional encoding; it closes the question's padding, and a structural
bias (model.attention_bias) may shape it (site `cross`) and the decoder's
self-attention (site `decoder_self`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import torch
from torch import nn

from lengthgen.layout import InputLayout
from lengthgen.model.attention import CrossAttention, KVCache, SelfAttention, padding_mask
from lengthgen.model.attention_kernels import dense
from lengthgen.model.base import Architecture, Batch, Positions, TrainingInputs, combine
from lengthgen.model.block import Block
from lengthgen.model.layers import FEED_FORWARDS, Residual, norm_of
from lengthgen.model.position.attention_bias import Geometry
from lengthgen.model.position.places import (
    answer_places,
    coupled,
    own_answer_places,
    own_question_places,
    question_places,
    reach,
)
from lengthgen.model.position.samplers import Places
from lengthgen.model.position.stack import StackPositionalEncoding
from lengthgen.model.sizes import SIZES, Dimensions

if TYPE_CHECKING:
    from lengthgen.config import ModelConfig


class DecoderBlock(nn.Module):
    """Causal self-attention, cross-attention over the encoder output, feed-forward,
    each as a residual sublayer."""

    def __init__(self, dims: Dimensions, cfg: ModelConfig, relative_keys) -> None:
        super().__init__()
        residual = {"d_model": dims.d_model, "norm": cfg.norm, "placement": cfg.norm_placement, "eps": cfg.norm_eps}
        self.attention = Residual(SelfAttention(dims, relative_keys, cfg.dropout, kernel=cfg.attention_kernel),
                                  **residual)
        self.cross_attention = Residual(CrossAttention(dims, cfg.dropout, cfg.attention_kernel), **residual)
        self.feed_forward = Residual(FEED_FORWARDS[cfg.ffn](dims, cfg.dropout), **residual)

    def forward(self, x, positions, key_positions, self_mask, memory, cross_mask, cache=None, layer=0, rotation=None):
        x = self.attention(x, positions, key_positions, self_mask, cache, layer, rotation)
        x = self.cross_attention(x, memory, cross_mask, cache, layer)
        return self.feed_forward(x)


class EncoderDecoder(Architecture):
    bias_sites = ("decoder_self", "cross")
    #: checkpoints written before model.pe moved into `source_pe` and `target_pe`
    #: (Architecture.renamed_state)
    renamed_state: ClassVar[dict[str, str]] = {
        "source_position.": "source_pe.input_embedding.", "source_bias.": "source_pe.attention_bias.",
        "target_position.": "target_pe.input_embedding.", "target_bias.": "target_pe.attention_bias.",
    }

    def __init__(self, cfg: ModelConfig, vocab_size: int, layout: InputLayout | None = None) -> None:
        super().__init__(cfg, vocab_size, layout)
        dims = SIZES[cfg.size]
        self.source_pe = StackPositionalEncoding(dims, cfg, self.layout, causal=False)
        self.encoder = nn.ModuleList(
            Block(dims, cfg, self.source_pe.relative_keys(), causal=False) for _ in range(dims.encoder_layers)
        )
        self.encoder_norm = norm_of(cfg.norm, dims.d_model, cfg.norm_eps)
        self.target_pe = StackPositionalEncoding(dims, cfg, self.layout, causal=True)
        self.decoder = nn.ModuleList(
            DecoderBlock(dims, cfg, self.target_pe.relative_keys()) for _ in range(dims.n_layers)
        )
        # the Abacus table (model.abacus) is one for both sides, like the token embedding
        self._add_head(cfg, vocab_size, dims)

    def forward(self, source, source_positions, source_lengths, tokens, positions, target_lengths,
                source_abacus=None, abacus=None):
        """source (B, S) question tokens at source_positions, source_lengths (B,) of them
        real; tokens (B, T) the decoder input at `positions`, target_lengths (B,) of
        them real -> logits (B, T, vocab). With model.abacus, source_abacus and abacus
        are the Abacus indices of the two."""
        memory = self.encode(source, source_positions, source_lengths, source_abacus)
        return self.decode(tokens, positions, memory, source_lengths, target_lengths, abacus=abacus)

    def encode(self, source: torch.Tensor, positions: torch.Tensor, lengths: torch.Tensor,
               abacus: torch.Tensor | None = None) -> torch.Tensor:
        x = self.embed(source, positions, self.source_pe, abacus)  # (B, S, d)
        mask = padding_mask(lengths, source.shape[1], x.dtype)  # (B, 1, 1, S)
        bias = self.source_pe.bias(positions, positions)
        if bias is not None:
            mask = mask + dense(bias)  # (B, H, S, S)
        rotation = self.source_pe.rotation(positions)
        for block in self.encoder:
            x = block(x, positions, positions, mask, rotation=rotation)
        return self.encoder_norm(x)

    def decode(self, tokens, positions, memory, source_lengths, target_lengths, cache: KVCache | None = None,
               abacus: torch.Tensor | None = None):
        """The decoder over `memory`; with a cache, `tokens` are the new tokens only."""
        past = cache.length if cache is not None else 0
        key_positions = positions if past == 0 else torch.cat([cache.positions, positions], dim=1)  # (B, Tk)
        x = self.embed(tokens, positions, self.target_pe, abacus)  # (B, T, d)
        self_mask = self.target_pe.bias(positions, key_positions)  # (B|1, H, T, Tk)
        cross_mask = padding_mask(source_lengths, memory.shape[1], x.dtype)  # (B, 1, 1, S)
        if self.structural_bias.acts:
            rows = torch.arange(past, past + tokens.shape[1], device=tokens.device)
            start = torch.zeros_like(source_lengths)
            own = Geometry(rows, key_positions.shape[1], target_lengths, start)
            question = Geometry(rows, memory.shape[1], source_lengths, start, start + self.layout.lead, source_lengths)
            self_mask = combine(self_mask, self.structural_bias.decoder_self(own), causal=True)
            cross_mask = combine(cross_mask, self.structural_bias.cross(question))
        rotation = self.target_pe.rotation(positions)
        for layer, block in enumerate(self.decoder):
            x = block(x, positions, key_positions, self_mask, memory, cross_mask, cache, layer, rotation)
        if cache is not None:
            cache.positions = key_positions
        return self.lm_head(self.final_norm(x))

    # the architecture interface (lengthgen.model.base)

    def position_lengths(self, tokens, prompt_lengths, training):
        question = int(prompt_lengths.max()) - 2
        answer = tokens.shape[1] - int(prompt_lengths.min())  # the decoder's input: start token and answer
        return question, answer

    def coupled_places(self, tokens, prompt_lengths, lengths):
        """The question's tokens carry their own places (own_place: operators 0); the
        decoder's input token i (the start token, then the answer) the place of answer
        token i - 1, its own (own_place: the start token, which predicts the first digit
        as "=" does, 0), or of answer token i, which it predicts (predicted_place)."""
        question, answer = lengths
        places = question_places(tokens, prompt_lengths, self.layout)
        written = own_answer_places(tokens, prompt_lengths, self.layout, answer)
        own = torch.cat([torch.zeros_like(written[:, :1]), written[:, :-1]], dim=1)  # input i is answer token i - 1
        # the encoder reads the question without "=" (the decoder's start token takes its part)
        own_question = own_question_places(tokens, prompt_lengths - 1, self.layout)[:, 1 : 1 + question]
        predicted = answer_places(tokens, prompt_lengths, self.layout, answer)
        return Places({"own_place": (own_question, own),
                       "predicted_place": (coupled(places[:, 1 : 1 + question]), coupled(predicted))}, reach(places))

    def digit_places(self, tokens, prompt_lengths, lengths):
        question, answer = lengths
        written = answer_places(tokens, prompt_lengths, self.layout, answer)
        start = torch.zeros_like(written[:, :1])  # the start token
        own = torch.cat([start, written[:, :-1]], dim=1)  # decoder input i is answer token i - 1
        return question_places(tokens, prompt_lengths, self.layout)[:, 1 : 1 + question], own

    def training_inputs(self, batch: Batch, positions: Positions) -> TrainingInputs:
        # the widths its positions were drawn for (`position_lengths`): read from their shapes, not the device
        widths = (positions[0].shape[1], positions[1].shape[1])
        source, source_lengths, decoder_input, target, supervised = _split(batch.tokens, batch.prompt_lengths,
                                                                          batch.answer_mask, widths)
        return TrainingInputs((source, positions[0], source_lengths, decoder_input, positions[1], supervised.sum(1),
                               self.abacus_of(positions, 0), self.abacus_of(positions, 1)), {}, target, supervised)

    def supervised_mask(self, batch: Batch) -> torch.Tensor:
        return _split(batch.tokens, batch.prompt_lengths, batch.answer_mask)[4]

    @torch.no_grad()
    def teacher_forced_argmax(self, tokens, positions, answer_start):
        source, source_lengths, decoder_input, _, _ = _split(tokens, _full(tokens, answer_start))
        target_lengths = torch.full_like(source_lengths, decoder_input.shape[1])
        return self(source, positions[0], source_lengths, decoder_input, positions[1], target_lengths,
                    self.abacus_of(positions, 0), self.abacus_of(positions, 1)).argmax(-1)

    @torch.no_grad()
    def greedy_decode(self, prompts, new_tokens, positions, use_cache=True):
        """Encode the question once, then generate `new_tokens` tokens; `positions` are
        (question (B, S), decoder (B, new_tokens)), fixed up front."""
        source_positions, target_positions = positions[:2]
        target_abacus = self.abacus_of(positions, 1)
        source = prompts[:, 1:-1]
        source_lengths = torch.full((len(prompts),), source.shape[1], dtype=torch.long, device=prompts.device)
        target_lengths = torch.full_like(source_lengths, new_tokens)
        memory = self.encode(source, source_positions, source_lengths, self.abacus_of(positions, 0))
        tokens = prompts[:, :1]  # the start token
        cache = self.empty_cache() if use_cache else None
        generated = []
        for step in range(new_tokens):
            fed = tokens[:, -1:] if use_cache else tokens
            at = step + 1 - fed.shape[1]
            abacus = None if target_abacus is None else target_abacus[:, at : step + 1]
            logits = self.decode(fed, target_positions[:, at : step + 1], memory, source_lengths, target_lengths, cache,
                                 abacus)
            next_token = logits[:, -1].argmax(-1, keepdim=True)  # (B, 1)
            generated.append(next_token)
            tokens = torch.cat([tokens, next_token], dim=1)
        return torch.cat(generated, dim=1)

    def site_shapes(self, width, answer_start):
        steps = width - answer_start  # "<s>" and the answer but its end token
        return {"decoder_self": (steps, steps), "cross": (steps, answer_start - 2)}

    @torch.no_grad()
    def attention_logits(self, tokens, positions, answer_start):
        last = self.decoder[-1]
        recorders = {"decoder_self": last.attention.sublayer, "cross": last.cross_attention.sublayer}
        for recorder in recorders.values():
            recorder.record = True
        try:
            self.teacher_forced_argmax(tokens, positions, answer_start)
        finally:
            for recorder in recorders.values():
                recorder.record = False
        return {site: recorder.recorded for site, recorder in recorders.items()}

    def empty_cache(self) -> KVCache:
        return KVCache.empty(len(self.decoder))


def _full(tokens: torch.Tensor, value: int) -> torch.Tensor:
    return torch.full((len(tokens),), value, dtype=torch.long, device=tokens.device)


def _split(tokens: torch.Tensor, prompt_lengths: torch.Tensor, answer_mask: torch.Tensor | None = None,
           widths: tuple[int, int] | None = None):
    """Sequential rows "<s> question = answer </s>" (B, T), prompt lengths P (B,) ->
    question (B, S) and its lengths P - 2, decoder input "<s> answer" (B, A), target
    "answer </s>" (B, A), and (B, A) True on the target tokens that are supervised
    (every one without `answer_mask`). Cells past a row's end hold arbitrary tokens:
    the masks close them. S = max P - 2 and A = T - min P, read from `prompt_lengths`
    unless `widths` gives them (`EncoderDecoder.position_lengths`)."""
    width = tokens.shape[1]
    question_width, answer_width = widths or (int(prompt_lengths.max()) - 2, width - int(prompt_lengths.min()))
    question = 1 + torch.arange(question_width, device=tokens.device)[None, :]  # (1, S)
    source = tokens.gather(1, question.expand(len(tokens), -1).clamp(max=width - 1))
    answer = prompt_lengths[:, None] + torch.arange(answer_width, device=tokens.device)  # (B, A)
    inside = answer < width
    target = tokens.gather(1, answer.clamp(max=width - 1))
    supervised = inside if answer_mask is None else inside & answer_mask.gather(1, answer.clamp(max=width - 1))
    decoder_input = torch.cat([tokens[:, :1], target[:, :-1]], dim=1)
    return source, prompt_lengths - 2, decoder_input, target, supervised
