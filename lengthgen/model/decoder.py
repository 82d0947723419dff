"""Decoder-only causal transformer, with a pluggable positional encoding.

Read top to bottom: the model, then the four methods of the architecture
interface (lengthgen.model.base); its layers are lengthgen.model.block.Block, run
model.loops times with shared weights, the embedded input added again between them
with model.input_injection (lengthgen.model.recurrence, McLeish et al. 2024 §3.2).
Positions are explicit inputs (B, T); the positional encoding acts at the input, on
q/k, as an attention bias or on the keys, according to its registry entry
(lengthgen.model.position.pe), wired by lengthgen.model.position.stack. A structural attention
bias (model.attention_bias) acts on the one self-attention, site `lm`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import torch
from torch import nn

from lengthgen.host_copy import to_device
from lengthgen.layout import InputLayout
from lengthgen.model.attention import KVCache
from lengthgen.model.base import Architecture, Batch, Positions, TrainingInputs, combine
from lengthgen.model.block import Block
from lengthgen.model.layers import norm_of
from lengthgen.model.position.attention_bias import Geometry
from lengthgen.model.position.places import (
    along_rows,
    answer_digits,
    answer_places,
    coupled,
    equals_sign,
    own_answer_places,
    own_question_places,
    question_places,
    reach,
)
from lengthgen.model.position.samplers import Places
from lengthgen.model.position.stack import StackPositionalEncoding
from lengthgen.model.recurrence import INPUT_INJECTIONS, STATE_INITS, state_noise
from lengthgen.model.sizes import SIZES

if TYPE_CHECKING:
    from lengthgen.config import ModelConfig


class DecoderLM(Architecture):
    bias_sites = ("lm",)
    start_token_optional = True
    options = ("loops", "input_injection", "embedding_norm", "init", "attention_scale", "state_init",
               "attention_projection_bias", "output_adapter")
    #: checkpoints written before model.pe moved into `pe` (Architecture.renamed_state)
    renamed_state: ClassVar[dict[str, str]] = {
        "input_position.": "pe.input_embedding.", "attention_bias.": "pe.attention_bias.",
    }

    def __init__(self, cfg: ModelConfig, vocab_size: int, layout: InputLayout | None = None) -> None:
        super().__init__(cfg, vocab_size, layout)
        dims = SIZES[cfg.size]
        self.pe = StackPositionalEncoding(dims, cfg, self.layout, causal=True)
        self.blocks = nn.ModuleList(Block(dims, cfg, self.pe.relative_keys()) for _ in range(dims.n_layers))
        self._add_head(cfg, vocab_size, dims)
        # McLeish et al. 2024's EmbeddingComponent normalises the summed embeddings
        # (cramming/architectures/components.py, `normalization: True`); a norm draws no
        # weights from the seed
        self.embedding_norm = norm_of(cfg.norm, dims.d_model, cfg.norm_eps) if cfg.embedding_norm else nn.Identity()
        self.loops = cfg.loops
        self.injection = INPUT_INJECTIONS[cfg.input_injection]
        self.noise_std = STATE_INITS[cfg.state_init]
        # McLeish et al. 2024's TransposedAdapter (crammed_depthrecurrent.py lines 120-133
        # and 450, untied with tie_weights False): a d x d map between the final norm and
        # the head, in every forward, generation included (`_generate`, line 348). Built
        # last, so that every other weight is drawn as without it
        self.output_adapter = nn.Linear(dims.d_model, dims.d_model, bias=False) if cfg.output_adapter else nn.Identity()

    def forward(self, tokens: torch.Tensor, positions: torch.Tensor, cache: KVCache | None = None,
                prompt_lengths: torch.Tensor | None = None, lengths: torch.Tensor | None = None,
                abacus: torch.Tensor | None = None, loops: tuple[int, int] | None = None,
                noise: torch.Tensor | None = None) -> torch.Tensor:
        """tokens, positions: (B, T) -> logits (B, T, vocab). With a cache, `tokens` are
        the new tokens only; the cache is extended in place. A structural bias needs
        each row's prompt length and the length of the whole sequence it will have
        (with a cache, given on the first call). `abacus` (B, T): the tokens' Abacus
        indices, with model.abacus. `loops`: (frozen, trained), run that many loops
        without gradient, then that many with it (the progressive loss's passes,
        lengthgen.model.recurrence.progressive_terms); by default model.loops, all trained.
        `noise` (B, T, d): with model.state_init noise, the first state's noise, drawn
        outside the forward (training); None draws it here from `noise_generator`."""
        past = cache.length if cache is not None else 0
        if cache is not None:
            if prompt_lengths is None:
                prompt_lengths, lengths = cache.context.get("prompt_lengths"), cache.context.get("lengths")
            cache.context.update(prompt_lengths=prompt_lengths, lengths=lengths)
        key_positions = positions if past == 0 else torch.cat([cache.positions, positions], dim=1)  # (B, Tk)
        x = self.embedding_norm(self.embed(tokens, positions, self.pe, abacus))  # (B, T, d)
        # computed once and shared by every layer (001 App. E.2 for FIRE); with a
        # cache, only the rows of the new queries
        mask = self.pe.bias(positions, key_positions)  # (B|1, H, Tq, Tk)
        if self.structural_bias.acts:
            geometry = self._geometry(tokens, past, key_positions.shape[1], prompt_lengths, lengths)
            mask = combine(mask, self.structural_bias.lm(geometry), causal=True)  # (B, H|1, Tq, Tk)
        x = self._layers(x, positions, key_positions, mask, cache, self.pe.rotation(positions), loops,
                         self._first_state(x, noise))
        if cache is not None:
            cache.positions = key_positions
        return self.lm_head(self.output_adapter(self.final_norm(x)))

    @property
    def stochastic(self) -> bool:
        return self.noise_std > 0

    def draw_noise(self, shape: tuple[int, ...]) -> torch.Tensor | None:
        """The first state's noise for inputs of `shape` (B, T, d), or None without it."""
        return state_noise(shape, self.noise_std, self.noise_generator) if self.stochastic else None

    def _first_state(self, x: torch.Tensor, noise: torch.Tensor | None) -> torch.Tensor:
        """The state the first layer reads: the embedded input `x`, plus the noise of
        model.state_init noise (the authors' noise, to which their first injection adds x)."""
        if not self.stochastic:
            return x
        noise = self.draw_noise(tuple(x.shape)) if noise is None else noise
        return x + noise.to(x.device, x.dtype)

    def _layers(self, injected, positions, key_positions, mask, cache, rotation, loops=None, x=None) -> torch.Tensor:
        """The blocks, model.loops times over with the same weights: compute depth
        n_layers x loops. `injected` is the embedded input; the injection adds it to the state
        where McLeish et al. 2024's code does (lengthgen.model.recurrence). Every pass
        through a layer has its own slot in the cache: a loop's keys and values are not
        the previous loop's. `loops` (frozen, trained): see `forward`. `x`: the first
        state, by default the embedded input."""
        frozen, trained = loops or (0, self.loops)
        x = injected if x is None else x
        for loop in range(frozen + trained):
            # the frozen loops' output enters the trained ones as a constant (truncated
            # backpropagation through the loops, as the authors' `torch.no_grad()` passes)
            with torch.set_grad_enabled(torch.is_grad_enabled() and loop >= frozen):
                for index, block in enumerate(self.blocks):
                    if self.injection.adds_before(loop, index):
                        x = x + injected
                    x = block(x, positions, key_positions, mask, cache, loop * len(self.blocks) + index, rotation)
        return x

    def _geometry(self, tokens, past, n_keys, prompt_lengths, lengths) -> Geometry:
        if prompt_lengths is None or lengths is None:
            raise ValueError("model.attention_bias needs the prompt length of every row and the sequence length")
        rows = torch.arange(past, past + tokens.shape[1], device=tokens.device)
        return Geometry(
            rows=rows, n_keys=n_keys, key_lengths=lengths, output_start=prompt_lengths - 1,
            input_start=torch.full_like(prompt_lengths, 1 + self.layout.lead), input_end=prompt_lengths - 1,
        )

    def empty_cache(self) -> KVCache:
        return KVCache.empty(len(self.blocks) * self.loops)

    # the architecture interface (lengthgen.model.base)

    def position_lengths(self, tokens, prompt_lengths, training):
        return (tokens.shape[1] - 1 if training else tokens.shape[1],)  # training feeds tokens[:, :-1]

    def coupled_places(self, tokens, prompt_lengths, lengths):
        """The row: own_place, every token its own place (operators and "=" 0);
        predicted_place, question tokens their own places and from "=" on each token the
        place of the answer token it predicts (position t predicts token t + 1)."""
        (length,) = lengths
        width = tokens.shape[1] - int(prompt_lengths.min())
        question = question_places(tokens, prompt_lengths, self.layout)
        own = along_rows(own_question_places(tokens, prompt_lengths, self.layout),
                         own_answer_places(tokens, prompt_lengths, self.layout, width), prompt_lengths, lead=0)
        predicted = along_rows(question, answer_places(tokens, prompt_lengths, self.layout, width + 1),
                               prompt_lengths, lead=1)
        return Places({"own_place": (own[:, :length],), "predicted_place": (coupled(predicted)[:, :length],)},
                      reach(question), equals=(equals_sign(tokens, prompt_lengths)[:, :length],),
                      answer_digits=answer_digits(tokens, prompt_lengths, width))

    def digit_places(self, tokens, prompt_lengths, lengths):
        (length,) = lengths
        question = question_places(tokens, prompt_lengths, self.layout)
        answer = answer_places(tokens, prompt_lengths, self.layout, tokens.shape[1] - int(prompt_lengths.min()))
        return (along_rows(question, answer, prompt_lengths, lead=0)[:, :length],)

    def training_inputs(self, batch: Batch, positions: Positions) -> TrainingInputs:
        """`forward_batch` also takes `loops`: (frozen, trained) loops, for the progressive loss."""
        supervised = self.supervised_mask(batch)
        lengths = batch.prompt_lengths + supervised.sum(1) - 1  # tokens fed: prompt and answer
        return TrainingInputs((batch.tokens[:, :-1], positions[0]),
                              {"prompt_lengths": batch.prompt_lengths, "lengths": lengths,
                               "abacus": self.abacus_of(positions, 0), **self._noise_of(batch.tokens[:, :-1])},
                              batch.tokens[:, 1:], supervised)

    def supervised_mask(self, batch: Batch) -> torch.Tensor:
        return batch.answer_mask[:, 1:]  # position t predicts token t + 1

    def _noise_of(self, tokens: torch.Tensor) -> dict[str, torch.Tensor]:
        """{"noise": the first state's noise} for these fed tokens, drawn outside the
        forward (so that a compiled forward draws nothing) on the host and queued to the
        tokens' device; {} without it."""
        if not self.stochastic:
            return {}
        return {"noise": to_device(self.draw_noise((*tokens.shape, self.token_embedding.embedding_dim)), tokens.device)}

    @torch.no_grad()
    def teacher_forced_argmax(self, tokens, positions, answer_start):
        rows, length = tokens.shape
        abacus = self.abacus_of(positions, 0)
        logits = self(tokens[:, :-1], positions[0][:, :-1], **self._rows(rows, answer_start, length - 1, tokens.device),
                      abacus=None if abacus is None else abacus[:, :-1])
        return logits[:, answer_start - 1 :].argmax(-1)

    @torch.no_grad()
    def greedy_decode(self, prompts, new_tokens, positions, use_cache=True):
        """Append `new_tokens` argmax tokens. `positions` (B, P + new_tokens) are fixed up
        front, so each token keeps its position as the sequence grows. With the KV cache
        each new token runs through the model once; without it the whole sequence is
        re-run for every token."""
        abacus = self.abacus_of(positions, 0)
        positions = positions[0]

        def columns(start: int, stop: int) -> dict[str, torch.Tensor | None]:
            return {"abacus": None if abacus is None else abacus[:, start:stop]}

        rows, prompt_length = prompts.shape
        context = self._rows(rows, prompt_length, prompt_length + new_tokens - 1, prompts.device)
        if not use_cache or self.stochastic:  # the authors' _generate: fresh noise over the whole row
            tokens = prompts
            for _ in range(new_tokens):
                width = tokens.shape[1]
                logits = self(tokens, positions[:, :width], **context, **columns(0, width))[:, -1]  # (B, vocab)
                tokens = torch.cat([tokens, logits.argmax(-1, keepdim=True)], dim=1)
            return tokens[:, prompt_length:]
        cache = self.empty_cache()
        logits = self(prompts, positions[:, :prompt_length], cache, **context, **columns(0, prompt_length))[:, -1]
        generated = []
        for step in range(new_tokens):
            next_token = logits.argmax(-1, keepdim=True)  # (B, 1)
            generated.append(next_token)
            if step + 1 < new_tokens:
                at = prompt_length + step
                logits = self(next_token, positions[:, at : at + 1], cache, **columns(at, at + 1))[:, -1]
        return torch.cat(generated, dim=1)

    def site_shapes(self, width, answer_start):
        return {"lm": (width - 1, width - 1)}  # every token but the last is fed

    @torch.no_grad()
    def attention_logits(self, tokens, positions, answer_start):
        attention = self.blocks[-1].attention.sublayer
        attention.record = True
        try:
            self.teacher_forced_argmax(tokens, positions, answer_start)
        finally:
            attention.record = False
        return {"lm": attention.recorded}

    @staticmethod
    def _rows(rows: int, prompt_length: int, length: int, device) -> dict[str, torch.Tensor]:
        return {
            "prompt_lengths": torch.full((rows,), prompt_length, dtype=torch.long, device=device),
            "lengths": torch.full((rows,), length, dtype=torch.long, device=device),
        }
