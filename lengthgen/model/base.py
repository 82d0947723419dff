"""What every architecture offers the trainer and the evaluator.

`train()` and `evaluate()` never ask which architecture they hold: they call the
four methods below, and the architecture decides how a batch is fed (one causal
sequence; a question to an encoder and an answer to a decoder; one output per
input position). Token rows are always the ones lengthgen.formats writes:

- sequential rows "<s> question = answer </s>", right-padded, with per-row prompt
  lengths P (tokens through "="); the answer starts at column P;
- aligned rows (format.fixed_length): the question only; the answer is the output
  at the last A columns, so it "starts" at column T - A.

`answer_start` below is that column: P for sequential rows, T - A for aligned ones.
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Iterator
from typing import TYPE_CHECKING, ClassVar, NamedTuple

import torch
from torch import nn

from lengthgen.layout import InputLayout
from lengthgen.model.attention_kernels import causal_mask_with, dense
from lengthgen.model.init import INITIALIZATIONS, OutputLayer
from lengthgen.model.layers import norm_of
from lengthgen.model.position.abacus import Abacus
from lengthgen.model.position.attention_bias import ATTENTION_BIASES
from lengthgen.model.sizes import SIZES, Dimensions

if TYPE_CHECKING:
    from lengthgen.config import ModelConfig, TrialConfig
    from lengthgen.model.position.samplers import Places, PositionSampler
    from lengthgen.model.position.stack import StackPositionalEncoding
    from lengthgen.tasks import Task

#: position indices of the sequences an architecture reads, one (B, T_k) tensor per
#: sequence (decoder: the token row; encoder-decoder: the question, then the answer),
#: then, with model.abacus, the Abacus index of every token of each sequence in the
#: same order (`Architecture.abacus_of`); indexed by row together (`rows_of`)
Positions = tuple[torch.Tensor, ...]


def rows_of(positions: Positions, rows) -> Positions:
    return tuple(p[rows] for p in positions)


class Batch(NamedTuple):
    """A training batch as tensors (lengthgen.batches.TrainingBatch)."""

    #: (B, T) token rows, right-padded
    tokens: torch.Tensor
    #: (B, T) True on the supervised tokens: the answer and the end token (sequential),
    #: the answer columns (aligned)
    answer_mask: torch.Tensor
    #: (B, T) aligned layout: the target of every column; None for sequential rows
    targets: torch.Tensor | None
    #: (B,) prompt length P of each row (the whole row in the aligned layout)
    prompt_lengths: torch.Tensor
    #: decided on the host before the batch was copied to its device
    #: (lengthgen.batches.placed_parts), so that the step reads nothing back from it:
    #: (N,) the flat index of every supervised output among the (B, T') outputs
    #: (`Architecture.supervised_mask`), None: selected by the mask on the device
    supervised_index: torch.Tensor | None = None
    #: whether every row has the same positions (`Architecture.rows_decided`), and
    #: the positions checked against learned tables; None: the forward reads them
    rows_shared: bool | None = None


class TrainingInputs(NamedTuple):
    """A training batch as the model's forward takes it, prepared outside the forward
    (`Architecture.training_inputs`): the widths and masks that depend on the data are
    decided here, so that the forward has no host synchronisation and compiles whole."""

    #: positional and keyword arguments of the architecture's `forward`
    args: tuple
    kwargs: dict
    #: (B, T') the target of every output the forward gives, and True where supervised
    targets: torch.Tensor
    supervised: torch.Tensor


def supervised_outputs(
    logits: torch.Tensor, inputs: TrainingInputs, index: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """(N, vocab) logits and (N,) targets of the supervised outputs (a data-dependent
    shape: selected outside a compiled forward). With `index` (Batch.supervised_index,
    decided on the host) the same rows in the same order, taken without reading the
    mask back from the device: a boolean mask's selection and its backward each wait
    for the GPU to count the mask's True values."""
    if index is None:
        return logits[inputs.supervised], inputs.targets[inputs.supervised]
    return logits.reshape(-1, logits.shape[-1])[index], inputs.targets.reshape(-1)[index]


class Architecture(nn.Module, ABC):
    #: one output per input position (003 §3): trained with format.fixed_length
    aligned_outputs: ClassVar[bool] = False
    #: the attention sites a structural bias (model.attention_bias) acts on, with the
    #: kind of attention each is (lengthgen.model.position.attention_bias)
    bias_sites: ClassVar[tuple[str, ...]] = ()
    #: reads sequential rows without a start token (format.start_token: false): nothing in
    #: it stands at the start token's column
    start_token_optional: ClassVar[bool] = False
    #: ModelConfig fields only this architecture reads (refused on the others, naming
    #: the architectures that read them: lengthgen.config.refuse_unread_options)
    options: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def check(cls, config: TrialConfig, task: Task) -> None:
        """Refuse a trial this architecture cannot run (ValueError naming the field)."""
        if config.format.fixed_length and not cls.aligned_outputs:
            raise ValueError(
                f"format.fixed_length aligns the answer with the input, for a model with one output "
                f"per position (003 §3); model.arch {config.model.arch} does not have aligned outputs"
            )

    #: the token embedding, shared by every stack of the model
    token_embedding: nn.Embedding
    #: model.abacus: the Abacus embedding added to every digit (lengthgen.model.position.abacus), or
    #: None; every architecture sets it (a class-level default would hide the submodule)
    abacus: Abacus | None
    #: the stream the forward pass draws its noise from (model.state_init noise), set by
    #: `noise_from`; None outside it
    noise_generator: torch.Generator | None = None
    #: state-dict prefixes that checkpoints written before a submodule moved still use,
    #: old -> new: `load_state_dict` reads them, so that such checkpoints resume
    renamed_state: ClassVar[dict[str, str]] = {}

    def __init__(self, cfg: ModelConfig, vocab_size: int, layout: InputLayout | None = None) -> None:
        """What every architecture opens with: the input layout and the token embedding,
        the first weights drawn from the weight seed (`build_model`), in this order."""
        super().__init__()
        self.layout = layout or InputLayout()
        self.token_embedding = nn.Embedding(vocab_size, SIZES[cfg.size].d_model)

    def _add_head(self, cfg: ModelConfig, vocab_size: int, dims: Dimensions) -> None:
        """What every architecture adds after its stacks, in this order: the final norm,
        the language-model head, the structural attention bias, and the Abacus table
        (model.abacus) last, so that every other weight is drawn as without it."""
        self.final_norm = norm_of(cfg.norm, dims.d_model, cfg.norm_eps)
        self.lm_head = OutputLayer(dims.d_model, vocab_size, cfg.head_init_fan_out)
        self.structural_bias = ATTENTION_BIASES[cfg.attention_bias](cfg, self.layout, dims.n_heads)
        self.abacus = Abacus(dims.d_model, cfg.max_positions, cfg.abacus_max_offset, cfg.abacus_offset,
                             cfg.abacus_non_digits) if cfg.abacus else None

    def embed(
        self, tokens: torch.Tensor, positions: torch.Tensor, pe: StackPositionalEncoding, abacus: torch.Tensor | None
    ) -> torch.Tensor:
        """The input of one stack, (B, T, d): the token embeddings, plus the stack's input
        embedding of `positions` (model.pe), plus the Abacus embedding of the digits at
        the Abacus indices `abacus` (with model.abacus)."""
        x = pe.embed(self.token_embedding(tokens), positions)
        return x if self.abacus is None else x + self.abacus(tokens, abacus)

    @property
    def stochastic(self) -> bool:
        """Whether a forward pass draws noise (model.state_init noise): a teacher-forced
        pass then is not what greedy decoding would give, and evaluation decodes."""
        return False

    @contextlib.contextmanager
    def noise_from(self, generator: torch.Generator) -> Iterator[None]:
        """Within the block, the forward passes draw their noise from `generator`."""
        previous, self.noise_generator = self.noise_generator, generator
        try:
            yield
        finally:
            self.noise_generator = previous

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        """nn.Module's, also reading a checkpoint written before `renamed_state`'s moves."""

        def renamed(key: str) -> str:
            old = next((old for old in self.renamed_state if key.startswith(old)), None)
            return key if old is None else self.renamed_state[old] + key[len(old) :]

        if any(renamed(key) != key for key in state_dict):
            metadata = getattr(state_dict, "_metadata", None)
            state_dict = OrderedDict((renamed(key), value) for key, value in state_dict.items())
            if metadata is not None:  # per-module versions, keyed by module prefix
                state_dict._metadata = OrderedDict((renamed(f"{key}.")[:-1], v) for key, v in metadata.items())
        return super().load_state_dict(state_dict, strict, assign)

    @abstractmethod
    def position_lengths(self, tokens: torch.Tensor, prompt_lengths: torch.Tensor, training: bool) -> tuple[int, ...]:
        """The length of every sequence the model reads for these token rows, in the
        order of `Positions`."""

    def coupled_places(
        self, tokens: torch.Tensor, prompt_lengths: torch.Tensor, lengths: tuple[int, ...]
    ) -> Places:
        """What coupled positions read of these rows: per sequence (of `lengths`), the
        place of the digits each token is coupled with (lengthgen.model.position.samplers.CoupledPositions)."""
        raise NotImplementedError(f"{type(self).__name__} has no coupled positions")

    def digit_places(
        self, tokens: torch.Tensor, prompt_lengths: torch.Tensor, lengths: tuple[int, ...]
    ) -> tuple[torch.Tensor, ...]:
        """Per sequence (of `lengths`), (B, length): the place of every digit in its own
        number, 0 elsewhere (lengthgen.model.position.places), what Abacus embeddings index by."""
        raise NotImplementedError(f"{type(self).__name__} has no Abacus embeddings")

    def sample_positions(
        self, tokens: torch.Tensor, prompt_lengths: torch.Tensor, sampler: PositionSampler,
        generator: torch.Generator | None, training: bool,
    ) -> Positions:
        """Positions of every sequence the model reads for these token rows, drawn from
        `generator` in a fixed order (the data seed at training, the eval seed after):
        the sampler's, then the Abacus offsets. `tokens` are whole rows (answer and end
        token included): coupled and Abacus indices read the question from them, and
        the answer's columns alone (lengthgen.model.position.places)."""
        lengths = self.position_lengths(tokens, prompt_lengths, training)
        places = self.coupled_places(tokens, prompt_lengths, lengths) if sampler.reads_places else None
        positions = sampler.sample(len(tokens), lengths, tokens.device, generator, training=training, places=places)
        if self.abacus is None:
            return positions
        return positions + self.abacus.indices(self.digit_places(tokens, prompt_lengths, lengths), generator, training)

    def abacus_of(self, positions: Positions, sequence: int) -> torch.Tensor | None:
        """The Abacus indices of sequence `sequence` in `positions`, or None without model.abacus."""
        return None if self.abacus is None else positions[len(positions) // 2 + sequence]

    def trim_positions(self, positions: Positions, tokens: torch.Tensor, prompt_lengths: torch.Tensor) -> Positions:
        """Training positions drawn for wider rows, cut to the leading columns that these
        (narrower) rows read: each row keeps the positions it had in the wide batch
        (length bucketing, lengthgen.batches.split_batch). `positions` hold these rows."""
        lengths = self.position_lengths(tokens, prompt_lengths, training=True)
        lengths = lengths * 2 if self.abacus is not None else lengths  # the Abacus indices follow
        return tuple(p[:, :length] for p, length in zip(positions, lengths, strict=True))

    @abstractmethod
    def training_inputs(self, batch: Batch, positions: Positions) -> TrainingInputs:
        """A training batch as `forward`'s arguments, with the targets and the supervised mask."""

    @abstractmethod
    def supervised_mask(self, batch: Batch) -> torch.Tensor:
        """(B, T') True at the outputs `forward` gives for `batch` that are trained on:
        the mask `training_inputs` returns, computed alone (on the host, for
        Batch.supervised_index)."""

    def forward_batch(self, batch: Batch, positions: Positions, **options) -> tuple[torch.Tensor, torch.Tensor]:
        """Training: (N, vocab) logits and (N,) targets of every supervised token.
        `options`: more keyword arguments of `forward` (a decoder's `loops`)."""
        inputs = self.training_inputs(batch, positions)
        with self.host_decisions(batch):
            logits = self(*inputs.args, **inputs.kwargs, **options)
        return supervised_outputs(logits, inputs, batch.supervised_index)

    @contextlib.contextmanager
    def host_decisions(self, batch: Batch) -> Iterator[None]:
        """Within the block, the forward reads no position back from the device when
        `batch` carries the host's decisions (Batch.rows_shared: lengthgen.batches.placed_parts
        checked its positions and decided whether their rows agree)."""
        from lengthgen.model.position.checks import checked_before

        if batch.rows_shared is None:
            yield
            return
        with self.rows_decided((), shared=batch.rows_shared), checked_before():
            yield

    @contextlib.contextmanager
    def rows_decided(self, positions: Positions, shared: bool | None = None) -> Iterator[None]:
        """Within the block, every stack's positional bias knows whether the rows of
        `positions` share their positions (`StackPositionalEncoding.rows_shared`),
        decided here (or given: `shared`, decided on the host before the copy) rather
        than inside the forward: the forward then has no host synchronisation. Set only
        when every sequence's rows agree, every stack then shares them as the
        uncompiled forward would; otherwise every stack computes its bias per row (the
        same values, where the uncompiled forward may share the rows of a stack whose
        own sequence agrees)."""
        from lengthgen.model.position.stack import StackPositionalEncoding, rows_agree

        stacks = [m for m in self.modules() if isinstance(m, StackPositionalEncoding)]
        shared = rows_agree(*self.sequence_positions(positions)) if shared is None else shared
        for stack in stacks:
            stack.rows_shared = shared
        try:
            yield
        finally:
            for stack in stacks:
                stack.rows_shared = None

    def check_positions(self, positions: Positions) -> None:
        """Refuse positions past a learned table (model.max_positions, the Abacus rows),
        as the uncompiled forward does: a compiled forward skips that check, which reads
        the data."""
        for module in self.modules():
            check = getattr(module, "check_indices", None)
            if check is not None:
                kind = self.abacus_indices if module is self.abacus else self.sequence_positions
                for indices in kind(positions):
                    check(indices)

    def sequence_positions(self, positions: Positions) -> Positions:
        """The position tensors of `positions` without the Abacus indices."""
        return positions if self.abacus is None else positions[: len(positions) // 2]

    def abacus_indices(self, positions: Positions) -> Positions:
        """The Abacus index tensors of `positions` (none without model.abacus)."""
        return () if self.abacus is None else positions[len(positions) // 2 :]

    @abstractmethod
    def teacher_forced_argmax(self, tokens: torch.Tensor, positions: Positions, answer_start: int) -> torch.Tensor:
        """(B, T - answer_start): the argmax prediction of every answer token (and the end
        token) given the true prefix, in one pass. A question is answered exactly by
        greedy decoding iff all of them equal the target."""

    @abstractmethod
    def greedy_decode(
        self, prompts: torch.Tensor, new_tokens: int, positions: Positions, use_cache: bool = True
    ) -> torch.Tensor:
        """(B, new_tokens): the model's own answer to equal-length prompts (B, P)."""

    def site_shapes(self, width: int, answer_start: int) -> dict[str, tuple[int, int]]:
        """{site: (queries, keys)} of the attention at each of `bias_sites` for token rows
        of `width` tokens whose answer starts at `answer_start` (teacher forcing)."""
        return {}

    def attention_logits(self, tokens: torch.Tensor, positions: Positions, answer_start: int) -> dict[str, torch.Tensor]:
        """{site: (B, H, Tq, Tk)} pre-softmax content logits of the last layer at each of
        `bias_sites` on one teacher-forced pass, NaN where a mask closes them (ABC, 000 §5)."""
        raise NotImplementedError(f"{type(self).__name__} exposes no attention logits")


def combine(
    mask: torch.Tensor | None, structural_bias: torch.Tensor | None, causal: bool = False
) -> torch.Tensor | None:
    """Add a structural attention bias (lengthgen.model.position.attention_bias) to an additive
    mask; a causal attention's mask then closes the future too."""
    if structural_bias is None:
        return mask
    mask = structural_bias if mask is None else dense(mask) + structural_bias
    return causal_mask_with(mask) if causal else mask


@torch.no_grad()
def initialize(model: nn.Module, generator: torch.Generator, scheme: str = "gpt2", depth: int = 1) -> None:
    """Initialise every parameter from `generator` alone (the weight seed), in a fixed
    module order, so nothing else (data seed, global RNG) can change it. Linear and
    embedding weights: N(0, 0.02), biases 0, norm gains 1 (GPT-2), or the standard
    deviations of another `scheme` (model.init, lengthgen.model.init; `depth`, the
    compute depth n_layers x model.loops, sets deepnorm's gain); a positional
    encoding with its own `initialize(generator)` draws its parameters itself."""
    chosen = INITIALIZATIONS[scheme]
    self_initializing = [m for m in model.modules() if m is not model and hasattr(m, "initialize")]
    handled = {id(sub) for m in self_initializing for sub in m.modules()}
    for module in model.modules():
        if module in self_initializing:
            module.initialize(generator)
        elif id(module) in handled:
            continue
        elif isinstance(module, (nn.LayerNorm, nn.RMSNorm)):
            nn.init.ones_(module.weight)
            if getattr(module, "bias", None) is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=chosen.std(module, depth), generator=generator)
            if getattr(module, "bias", None) is not None:
                nn.init.zeros_(module.bias)
    chosen.finish(model, depth)
