"""The resolved trial config: one dataclass per component, one comment per field.

Registry names are typed as `Literal[...]` built from the registry keys, so a
validator (pydantic in the orchestrator) lists exactly the registered choices.
Checks that involve more than one field live in `__post_init__` and name the
field they refuse. `__pydantic_config__` is a plain dict read by pydantic when it
validates these stdlib dataclasses; lengthgen itself does not import pydantic.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from functools import lru_cache
from typing import Literal, NamedTuple

from lengthgen.distributions import DISTRIBUTIONS, PAIR_BALANCES, TEST_QUESTIONS, Distribution
from lengthgen.eval_config import STRICT, EvalConfig
from lengthgen.formats import check_format, input_layout, sequence_length
from lengthgen.layout import InputLayout
from lengthgen.model import ARCHITECTURES
from lengthgen.model.attention_kernels import ATTENTION_KERNELS
from lengthgen.model.init import ATTENTION_SCALES, INITIALIZATIONS
from lengthgen.model.layers import FEED_FORWARDS, NORM_PLACEMENTS, NORMS
from lengthgen.model.position.abacus import ABACUS_NON_DIGITS, ABACUS_OFFSETS, Abacus
from lengthgen.model.position.attention_bias import ATTENTION_BIASES, WINDOW_CENTRES
from lengthgen.model.position.attention_bias.base import NoBias
from lengthgen.model.position.pe import POSITIONAL_ENCODINGS
from lengthgen.model.position.samplers import COUPLED_ANSWERS, COUPLED_EQUALS, POSITION_SAMPLERS
from lengthgen.model.recurrence import INPUT_INJECTIONS, STATE_INITS
from lengthgen.model.sizes import SIZES
from lengthgen.tasks import TASKS, Task, build_task
from lengthgen.train_config import PrecisionName, TrainConfig  # noqa: F401 (re-exported)

TaskName = Literal[tuple(TASKS)]
DistributionName = Literal[tuple(DISTRIBUTIONS)]
ArchitectureName = Literal[tuple(ARCHITECTURES)]
SizeName = Literal[tuple(SIZES)]
PositionalEncodingName = Literal[tuple(POSITIONAL_ENCODINGS)]
PositionSamplerName = Literal[tuple(POSITION_SAMPLERS)]
CoupledAnswerName = Literal[tuple(COUPLED_ANSWERS)]
CoupledEqualsName = Literal[COUPLED_EQUALS]
FeedForwardName = Literal[tuple(FEED_FORWARDS)]
NormName = Literal[tuple(NORMS)]
NormPlacementName = Literal[tuple(NORM_PLACEMENTS)]
AttentionBiasName = Literal[tuple(ATTENTION_BIASES)]
WindowCentreName = Literal[WINDOW_CENTRES]
InputInjectionName = Literal[tuple(INPUT_INJECTIONS)]
StateInitName = Literal[tuple(STATE_INITS)]
BalanceName = Literal[tuple(PAIR_BALANCES)]
InitializationName = Literal[tuple(INITIALIZATIONS)]
AttentionScaleName = Literal[tuple(ATTENTION_SCALES)]
AttentionKernelName = Literal[tuple(ATTENTION_KERNELS)]
AbacusOffsetName = Literal[tuple(ABACUS_OFFSETS)]
AbacusNonDigitsName = Literal[tuple(ABACUS_NON_DIGITS)]

_STRICT = STRICT


def refuse_unread_options(section: str, values: object, axis: str, registry: Mapping[str, object]) -> None:
    """Refuse a field of `values` (the config's `section`) that some entries of `registry`
    read (`options`, declared by each entry) but the entry its field `axis` names does
    not, when it differs from its default: it would change the trial id and nothing
    else. The error names the field and the entries that read it."""
    chosen = getattr(values, axis)
    for option in fields(values):
        readers = [name for name, entry in registry.items() if option.name in entry.options]
        if not readers or chosen in readers:
            continue
        if getattr(values, option.name) != option.default:
            raise ValueError(
                f"{section}.{option.name} does not apply to {section}.{axis} {chosen}, only to "
                f"{', '.join(readers)}; remove it"
            )


@dataclass(frozen=True)
class TaskConfig:
    __pydantic_config__ = _STRICT
    #: the arithmetic task (lengthgen.tasks: one file per task, with an example question)
    name: TaskName = "addition"
    #: inclusive range of operand lengths seen in training (the multiplicand's for
    #: multiplication; with uniform_operands, [1, L_int] sets the pool, 000 §3.3)
    train_digits: tuple[int, int] = (1, 5)
    #: multiplication only: digits k of the multiplier, uniform over [10^(k-1), 10^k) (003 §3.2)
    multiplier_digits: int = 1

    def __post_init__(self) -> None:
        low, high = self.train_digits
        if not 1 <= low <= high:
            raise ValueError(f"task.train_digits must satisfy 1 <= low <= high, got {low}, {high}")
        if not 1 <= self.multiplier_digits <= 17:
            raise ValueError(f"task.multiplier_digits must be in 1..17, got {self.multiplier_digits}")
        refuse_unread_options("task", self, "name", TASKS)


@dataclass(frozen=True)
class FormatConfig:
    __pydantic_config__ = _STRICT
    #: write the answer least significant digit first (000 §3.1: "0123+0748 -> 1780")
    reverse: bool = True
    #: write the operands least significant digit first too, 001 App. B's reversed
    #: format "A_1A_2A_3 + B_1B_2B_3 = C_1C_2C_3" (A_1 the least significant digit)
    reverse_operands: bool = False
    #: zero-pad operands to the question length and the answer to its full length
    #: (000 §3.2, 001 App. E.1); false: no leading zeros, operands of exactly n digits
    pad: bool = True
    #: a hint symbol before every digit naming its place, a random run of the 102
    #: ordered hints per question, at training and test time (001 App. A.2, E.1)
    index_hints: bool = False
    #: training only: a space in each gap between question symbols with probability
    #: 1/2 (001 Fig. 7, after Shen et al. 2023)
    random_spaces: bool = False
    #: input alignment "+ a_n b_n ... a_1 b_1", N x 1 "* a_n b ... a_1 b" (000 App. A.4)
    interleave: bool = False
    #: 003 eq. 3.1-3.2: operands right-aligned in fixed-length fields filled with 003's
    #: "pad" symbol (with pad false; zeros with pad true), the answer aligned with the
    #: input positions, for models with one output per position
    fixed_length: bool = False
    #: training only: append s ~ U{0..W-n} zeros to the scaled operands (003 A3, M3)
    shift_zeros: bool = False
    #: sequential rows begin with the start token "<s>"; false: "question = answer </s>",
    #: as McLeish et al. 2024's data (decoder without a structural bias only)
    start_token: bool = True
    #: with pad: every operand of the question's length n written with n + 1 digits (a
    #: leading zero more), as Cho et al. 2024's paper-era code pads to max_len + 1
    pad_overflow: bool = False
    #: sequential rows open with the end token "</s>" in the start token's place, as Cho
    #: et al. 2024's released task configs (`bos_to_eos: True`): one symbol closes a row
    #: and opens the next; needs format.start_token
    end_as_start: bool = False


@dataclass(frozen=True)
class DataConfig:
    __pydantic_config__ = _STRICT
    #: training distribution of questions (lengthgen.distributions)
    distribution: DistributionName = "uniform_length"
    #: length_pairs: every batch balanced over the length pairs to within one question
    #: (batch), or each question's pair drawn on its own, as a batch of the authors'
    #: shuffled set (shuffle) (lengthgen.distributions.LengthPairs)
    balance: BalanceName = "batch"

    def __post_init__(self) -> None:
        refuse_unread_options("data", self, "distribution", DISTRIBUTIONS)


@dataclass(frozen=True)
class ModelConfig:
    __pydantic_config__ = _STRICT
    #: architecture (lengthgen.model): a decoder-only transformer, an encoder-decoder, or
    #: an encoder with one output per position (with format.fixed_length)
    arch: ArchitectureName = "decoder"
    #: size preset (lengthgen.model.sizes)
    size: SizeName = "tiny"
    #: positional encoding (lengthgen.model.position.pe)
    pe: PositionalEncodingName = "rope"
    #: how position indices are assigned to tokens (lengthgen.model.position.samplers)
    positions: PositionSamplerName = "plain"
    #: largest position index + 1 the model supports, checked against the longest sequence
    #: of every trial (learned tables and Abacus tables are this long; randomized positions
    #: are drawn from [0, max_positions); coupled start IDs stay below it)
    max_positions: int = 512
    #: dropout probability at training, on the attention weights and the feed-forward's output
    dropout: float = 0.0
    #: how attention is computed (lengthgen.model.attention_kernels): sdpa, the reference
    #: (the bias as a tensor), flex (FlexAttention, the bias inside the kernel; GPU
    #: training only, no dropout) or math (written out, for train.compile on a CPU, whose
    #: Inductor fuses it). The same function up to float rounding
    attention_kernel: AttentionKernelName = "sdpa"
    #: feed-forward variant (lengthgen.model.layers): gelu MLP, geglu as in 001 E.2, or
    #: geglu_tanh, GeGLU with the tanh-approximated GELU (T5's gated-gelu, as Cho et al.
    #: 2024's code)
    ffn: FeedForwardName = "gelu"
    #: normalisation (layernorm, or rmsnorm as in 001 E.2) and where it sits:
    #: pre (before each sublayer), pre_post (also on each sublayer's output, 001 E.2),
    #: post (on the residual sum, post-LN, as McLeish et al. 2024) or pre_post_sum (before
    #: each sublayer and on the residual sum, as Cho et al. 2024's code) (lengthgen.model.layers)
    norm: NormName = "layernorm"
    #: where the norms sit (model.norm above)
    norm_placement: NormPlacementName = "pre"
    #: the epsilon of every norm; null: each norm's own (layernorm 1e-5, rmsnorm float32's
    #: machine epsilon). McLeish et al. 2024's code: 1e-12
    norm_eps: float | None = None
    #: decoder, encoder: initialisation scheme, gpt2 (N(0, 0.02)), t5 (embeddings N(0, 1),
    #: linear maps N(0, 1/fan-in), queries 1/sqrt(d_head) narrower, as Cho et al. 2024's
    #: code) or deepnorm_straight (Xavier-normal maps of gain (8 n_layers loops)^(-1/4),
    #: queries and keys of gain 1, embeddings N(0, 1/d), as McLeish et al. 2024's code)
    #: (lengthgen.model.init)
    init: InitializationName = "gpt2"
    #: init deepnorm_straight: the fan-out the output layer's Xavier init counts; null: its
    #: outputs, the vocabulary (120). McLeish et al. 2024's decoder has the 19 outputs of
    #: its tokenizer (lengthgen.model.init)
    head_init_fan_out: int | None = None
    #: decoder, encoder: attention scores q.k / sqrt(d_head) (inv_sqrt_d) or q.k (none, T5's)
    attention_scale: AttentionScaleName = "inv_sqrt_d"
    #: decoder, encoder: the self-attention's query, key, value and output maps carry
    #: biases; false: none, as T5's attention (Cho et al. 2024's code) and McLeish et al.
    #: 2024's (`qkv_bias: False`, `bias_in_proj: False`)
    attention_projection_bias: bool = True
    #: decoder: a learned d x d map between the final norm and the head, untied, at
    #: training and when generating (McLeish et al. 2024's TransposedAdapter)
    output_adapter: bool = False
    #: randomized positions also at evaluation (default: plain positions at test time)
    randomized_at_eval: bool = False
    #: coupled positions: a random start ID at evaluation too (default: the lowest start at test time)
    coupled_at_eval: bool = False
    #: coupled positions: the ID an answer token carries, that of its own place (own_place,
    #: the authors' released code; "+" and "=" get place 0's) or of the place of the digit it
    #: predicts (predicted_place; "=" the units') (lengthgen.model.position.samplers.CoupledPositions)
    coupled_answer: CoupledAnswerName = "own_place"
    #: coupled positions, own_place, answers written most significant digit first: "=" shares
    #: the operators' ID (operators, the paper-era code) or gets the ID one past the answer's
    #: most significant digit (past_answer, the current released code); paper_era: the
    #: paper-era code's own numbering, IDs counted down from the operators' over operands
    #: padded to n + 1 digits (format.pad_overflow), in either answer order
    coupled_equals: CoupledEqualsName = "operators"
    #: period T of cyclic positions, i mod T (000 §4.1)
    cyclic_period: int = 3
    #: T5 bias: number of buckets K + 1 (even) and the distance L_1 of 001 eq. (D.2)
    t5_buckets: int = 32
    #: T5 bias: L_1 of 001 eq. (D.2), the distance up to which the buckets are logarithmic
    t5_max_distance: int = 128
    #: Shaw relative keys (and UPE's): distances are clipped to [-shaw_clip, shaw_clip] (003 eq. 2.1)
    shaw_clip: int = 16
    #: structural attention bias (lengthgen.model.position.attention_bias): none, windowed
    #: (000 §4.1, App. A.4) or abc (Attention Bias Calibration, 000 §5)
    attention_bias: AttentionBiasName = "none"
    #: windowed: w, the earlier outputs each output sees and the input places either
    #: side of its aligned place (000 App. A.4)
    window: int = 1
    #: windowed: the input place output row t is centred on: previous = x_t, the place
    #: of the decoder's current input token (row 0 sees x_1 only); produced = x_(t+1),
    #: the place being written (lengthgen.model.position.attention_bias.windowed)
    window_centre: WindowCentreName = "previous"
    #: abc: kappa of the dropoff threshold mu + kappa sigma, cross and self attention (002 §5)
    abc_kappa_cross: float = 4.5
    #: abc: kappa of the self attention's dropoff threshold (002 §5)
    abc_kappa_self: float = 0.87
    #: abc: training questions whose attention logits are averaged (|S_gen|, 000 §5)
    abc_samples: int = 256
    #: Abacus embeddings (McLeish et al. 2024): a learned vector per place of a digit in
    #: its number, added to every digit on top of model.pe (lengthgen.model.position.abacus)
    abacus: bool = False
    #: abacus: the random offset k added to every place at training is uniform on 0 .. this
    abacus_max_offset: int = 100
    #: abacus: the training offset k drawn once per question (question) or once per
    #: batch, every row of a micro-batch with the same k (batch, McLeish et al. 2024's code)
    abacus_offset: AbacusOffsetName = "question"
    #: abacus: the tokens that are not digits of a number get no Abacus vector (zero) or
    #: all one learned vector, the table's row 0 (row_zero, McLeish et al. 2024's code)
    abacus_non_digits: AbacusNonDigitsName = "zero"
    #: decoder: run its layers this many times with shared weights (a looped transformer,
    #: McLeish et al. 2024 §3.2): compute depth n_layers x loops, the parameters of n_layers
    loops: int = 1
    #: decoder: add the embedded input to the state again, before every loop after the
    #: first (loop) or before every layer after the first (layer), as McLeish et al.
    #: 2024's code (lengthgen.model.recurrence); none: never
    input_injection: InputInjectionName = "none"
    #: decoder: the first layer reads the embedded input (embed) or the embedded input
    #: plus N(0, 0.02^2) noise drawn anew at every forward pass from the trial's own
    #: stream (noise, as McLeish et al. 2024's code) (lengthgen.model.recurrence)
    state_init: StateInitName = "embed"
    #: decoder: normalise the embedded input (tokens, model.pe's input embedding, Abacus)
    #: with model.norm before the first layer, as McLeish et al. 2024's code
    embedding_norm: bool = False

    def __post_init__(self) -> None:
        if self.max_positions < 1:
            raise ValueError(f"model.max_positions must be >= 1, got {self.max_positions}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"model.dropout must be in [0, 1), got {self.dropout}")
        if self.attention_kernel == "flex" and self.dropout:
            raise ValueError("model.attention_kernel flex has no attention dropout: set model.dropout: 0, "
                             "or model.attention_kernel: sdpa")
        if self.cyclic_period < 1 or self.shaw_clip < 1:
            raise ValueError("model.cyclic_period and model.shaw_clip must be >= 1")
        if self.t5_buckets < 2 or self.t5_buckets % 2 or self.t5_max_distance <= self.t5_buckets // 2:
            raise ValueError(
                "model.t5_buckets must be even and >= 2, and model.t5_max_distance larger than half of it"
            )
        if self.window < 0 or self.abc_samples < 1:
            raise ValueError("model.window must be >= 0 and model.abc_samples >= 1")
        if self.abacus_max_offset < 0:
            raise ValueError(f"model.abacus_max_offset must be >= 0, got {self.abacus_max_offset}")
        if self.head_init_fan_out is not None and self.head_init_fan_out < 1:
            raise ValueError(f"model.head_init_fan_out must be >= 1 (null: the head's outputs), "
                             f"got {self.head_init_fan_out}")
        if self.norm_eps is not None and not self.norm_eps > 0:
            raise ValueError(f"model.norm_eps must be > 0 (null: each norm's own), got {self.norm_eps}")
        refuse_unread_options("model", self, "arch", ARCHITECTURES)
        self._check_loops()
        refuse_unread_options("model", self, "pe", POSITIONAL_ENCODINGS)
        refuse_unread_options("model", self, "positions", POSITION_SAMPLERS)
        refuse_unread_options("model", self, "attention_bias", ATTENTION_BIASES)
        refuse_unread_options("model", self, "init", INITIALIZATIONS)
        for option in fields(self):
            if option.name in Abacus.options and not self.abacus and getattr(self, option.name) != option.default:
                raise ValueError(f"model.{option.name} does not apply without model.abacus: true; remove it")


    def _check_loops(self) -> None:
        if isinstance(self.loops, bool) or not isinstance(self.loops, int) or self.loops < 1:
            raise ValueError(f"model.loops must be an integer >= 1 (1: no loop), got {self.loops!r}")
        n_layers = SIZES[self.size].n_layers
        injection = INPUT_INJECTIONS[self.input_injection]
        if injection.adds and not injection.adds_anything(n_layers, self.loops):
            choices = [name for name, kind in INPUT_INJECTIONS.items() if kind.adds_anything(n_layers, self.loops)]
            raise ValueError(
                f"model.input_injection {self.input_injection} adds the embedded input nowhere in model.loops "
                f"{self.loops} of model.size {self.size}'s {n_layers} layer(s): the first layer's input is the "
                f"embedded input already. Raise model.loops, or choose among none"
                + "".join(f", {name}" for name in choices)
            )


@dataclass(frozen=True)
class SeedConfig:
    __pydantic_config__ = _STRICT
    #: parameter initialisation only
    weight: int = 0
    #: order and content of training batches (and dropout noise) only
    data: int = 0
    #: the evaluation questions only
    eval: int = 0
    #: numerical replicate: 0 leaves the initial weights as the weight seed makes them;
    #: k > 0 moves one of them, chosen by k alone, by one ulp (lengthgen.model.perturbation;
    #: Summers & Dinneen 2021, arXiv 2103.04514). It separates seed luck from floating-point chaos
    perturb: int = 0

    def __post_init__(self) -> None:
        for name in ("weight", "data", "eval", "perturb"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"seeds.{name} must be a non-negative integer, got {value!r}")


@dataclass(frozen=True)
class TrialConfig:
    __pydantic_config__ = _STRICT
    #: the task and the operand lengths it trains on
    task: TaskConfig = field(default_factory=TaskConfig)
    #: how a question and its answer are written as tokens (lengthgen.formats)
    format: FormatConfig = field(default_factory=FormatConfig)
    #: the training distribution of questions
    data: DataConfig = field(default_factory=DataConfig)
    #: the architecture, its size, positions and positional encoding
    model: ModelConfig = field(default_factory=ModelConfig)
    #: the optimiser, its schedule, precision and compilation (lengthgen.train_config)
    train: TrainConfig = field(default_factory=TrainConfig)
    #: the test lengths and questions, and what is evaluated beyond them (lengthgen.eval_config)
    eval: EvalConfig = field(default_factory=EvalConfig)
    #: the trial's seeds, each deciding one thing only
    seeds: SeedConfig = field(default_factory=SeedConfig)

    def __post_init__(self) -> None:
        task, distribution, longest_digits, layout = derive(self)
        distribution.check(task, self)
        TEST_QUESTIONS[self.eval.questions]().check(task, self)
        if self.eval.grid and sum(task.scales) != 2:
            raise ValueError(
                f"eval.grid crosses the lengths of two operands; task.name {self.task.name} has "
                f"{sum(task.scales)} operand(s) of the question's length: remove eval.grid"
            )
        if self.eval.validation_digits and min(self.eval.validation_digits) <= self.task.train_digits[1]:
            raise ValueError(
                f"eval.validation_digits {list(self.eval.validation_digits)}: a long-length validation set "
                f"holds lengths beyond training, task.train_digits {list(self.task.train_digits)}"
            )
        check_format(self.format, task, longest_digits)
        if not self.format.start_token and not (
            ARCHITECTURES[self.model.arch].start_token_optional and ATTENTION_BIASES[self.model.attention_bias] is NoBias
        ):
            raise ValueError(
                f"format.start_token: false is read by a decoder without a structural attention bias (whose "
                f"geometry, like an encoder-decoder's decoder, starts at the start token); model.arch is "
                f"{self.model.arch}, model.attention_bias {self.model.attention_bias}: remove format.start_token"
            )
        architecture = ARCHITECTURES[self.model.arch]
        architecture.check(self, task)
        ATTENTION_BIASES[self.model.attention_bias].check(self, task, architecture)
        sampler = POSITION_SAMPLERS[self.model.positions]
        sampler.check(self, task)
        if self.model.abacus:
            Abacus.check(self, task)
        if self.train.state_noise_draw != "host" and not STATE_INITS[self.model.state_init]:
            raise ValueError(
                f"train.state_noise_draw {self.train.state_noise_draw} says where model.state_init noise is "
                f"drawn; model.state_init is {self.model.state_init}, which draws none: remove train.state_noise_draw"
            )
        if self.train.progressive_loss_alpha and self.model.loops < 2:
            raise ValueError(
                f"train.progressive_loss_alpha trains looped models at random loop counts; model.loops is "
                f"{self.model.loops}: set model.loops >= 2 or train.progressive_loss_alpha to 0"
            )
        if POSITIONAL_ENCODINGS[self.model.pe].needs_uniform_columns and not layout.uniform_columns:
            raise ValueError(
                f"model.pe {self.model.pe} gives each digit of the fixed operand (the multiplier) its own "
                f"key vector (003 eq. 3.3); it needs format.fixed_length, where those digits have fixed "
                f"columns, and a task with a fixed operand (multiplication, n_by_1), not task.name {self.task.name}"
            )
        longest = max(
            sequence_length(task, self.eval.longest_digits, self.format, width=longest_digits),
            sequence_length(
                task, distribution.longest_digits(task, self.task.train_digits), self.format,
                training=True, width=longest_digits,
            ),
        )
        # format.pad_overflow writes a question's top place one further
        needed = sampler.from_config(self.model).indices_needed(longest, longest_digits + self.format.pad_overflow)
        if needed > self.model.max_positions:
            what = (
                f"the longest sequence ({longest} tokens)" if needed == longest else
                f"the {needed} position IDs that model.positions {self.model.positions} gives "
                f"{longest_digits}-digit operands"
            )
            raise ValueError(
                f"model.max_positions = {self.model.max_positions} is shorter than {what}; "
                f"raise it or shorten eval.digits"
            )

    @property
    def longest_digits(self) -> int:
        """W, the longest question length of the trial, tested or trained (the field
        width of format.fixed_length, the shift bound of format.shift_zeros)."""
        return derive(self).longest_digits

    @property
    def input_layout(self) -> InputLayout:
        """Where the digits of a question sit, for the model (lengthgen.formats.input_layout)."""
        return derive(self).input_layout

    def to_dict(self) -> dict:
        return json.loads(json.dumps(asdict(self)))

    def canonical_json(self) -> str:
        """Every field, sorted keys, no spaces: the `config_json` of the results."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    def identity_json(self) -> str:
        """The canonical JSON of the fields that differ from their defaults. A field
        added to the config later (at a default that keeps the old behaviour) thus
        leaves every existing trial id, and so the resumption of existing studies,
        unchanged. The price: a default must never change (tests/test_config_identity.py
        pins the ids of reference configs)."""
        sparse = _without_defaults(self.to_dict(), _DEFAULT_DICT)
        return json.dumps(sparse, sort_keys=True, separators=(",", ":"))

    @property
    def trial_id(self) -> str:
        """Short stable hash of `identity_json`: same config, same id, anywhere."""
        return hashlib.sha256(self.identity_json().encode()).hexdigest()[:12]

    def in_distribution(self, n_digits: int) -> bool:
        low, high = self.task.train_digits
        return low <= n_digits <= high


class Derived(NamedTuple):
    """What a trial's config implies beyond its fields, built once per config (`derive`)."""

    #: the task of task.name with its options (lengthgen.tasks)
    task: Task
    #: the training distribution data.distribution (lengthgen.distributions)
    distribution: Distribution
    #: W, the longest question length, tested or trained (TrialConfig.longest_digits)
    longest_digits: int
    #: where the digits of a question sit, for the model (TrialConfig.input_layout)
    input_layout: InputLayout


@lru_cache(maxsize=256)
def derive(config: TrialConfig) -> Derived:
    """The derived state of `config`, computed on its first use and then looked up (a
    config is frozen, so it is its own cache key): the trainer reads the longest length
    at every step and the layout at every model it builds."""
    task = build_task(config.task)
    chosen = DISTRIBUTIONS[config.data.distribution]
    distribution = chosen(**{option: getattr(config.data, option) for option in chosen.options})
    longest = max(config.eval.longest_digits, distribution.longest_digits(task, config.task.train_digits))
    return Derived(task, distribution, longest, input_layout(task, config.format, longest))


def _without_defaults(values: dict, defaults: dict) -> dict:
    """``values`` less every leaf equal to ``defaults``; sections left empty go too."""
    kept = {}
    for key, value in values.items():
        default = defaults.get(key)
        if isinstance(value, dict) and isinstance(default, dict):
            section = _without_defaults(value, default)
            if section:
                kept[key] = section
        elif key not in defaults or value != default:
            kept[key] = value
    return kept


_DEFAULT_DICT = TrialConfig().to_dict()
