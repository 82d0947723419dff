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
from dataclasses import asdict, dataclass, field
from typing import Literal

from lengthgen.distributions import DISTRIBUTIONS
from lengthgen.model import ARCHITECTURES
from lengthgen.model.layers import FEED_FORWARDS, NORM_PLACEMENTS, NORMS
from lengthgen.model.pe import POSITIONAL_ENCODINGS
from lengthgen.model.positions import POSITION_SAMPLERS
from lengthgen.model.sizes import SIZES
from lengthgen.tasks import TASKS

TaskName = Literal[tuple(TASKS)]
DistributionName = Literal[tuple(DISTRIBUTIONS)]
ArchitectureName = Literal[tuple(ARCHITECTURES)]
SizeName = Literal[tuple(SIZES)]
PositionalEncodingName = Literal[tuple(POSITIONAL_ENCODINGS)]
PositionSamplerName = Literal[tuple(POSITION_SAMPLERS)]
FeedForwardName = Literal[tuple(FEED_FORWARDS)]
NormName = Literal[tuple(NORMS)]
NormPlacementName = Literal[NORM_PLACEMENTS]

_STRICT = {"extra": "forbid"}


@dataclass(frozen=True)
class TaskConfig:
    __pydantic_config__ = _STRICT
    name: TaskName = "addition"
    #: inclusive range of operand lengths seen in training
    train_digits: tuple[int, int] = (1, 5)

    def __post_init__(self) -> None:
        low, high = self.train_digits
        if not 1 <= low <= high:
            raise ValueError(f"task.train_digits must satisfy 1 <= low <= high, got {low}, {high}")


@dataclass(frozen=True)
class FormatConfig:
    __pydantic_config__ = _STRICT
    #: write the answer least significant digit first (000 §3.1: "0123+0748 -> 1780")
    reverse: bool = True
    #: write the operands least significant digit first too, 001 App. B's reversed
    #: format "A_1A_2A_3 + B_1B_2B_3 = C_1C_2C_3" (A_1 the least significant digit)
    reverse_operands: bool = False


@dataclass(frozen=True)
class DataConfig:
    __pydantic_config__ = _STRICT
    #: training distribution of questions (lengthgen.distributions)
    distribution: DistributionName = "uniform_length"


@dataclass(frozen=True)
class ModelConfig:
    __pydantic_config__ = _STRICT
    arch: ArchitectureName = "decoder"
    #: size preset (lengthgen.model.sizes)
    size: SizeName = "tiny"
    #: positional encoding (lengthgen.model.pe)
    pe: PositionalEncodingName = "rope"
    #: how position indices are assigned to tokens (lengthgen.model.positions)
    positions: PositionSamplerName = "plain"
    #: largest position index + 1 the model supports (learned tables are this long;
    #: randomized positions are drawn from [0, max_positions))
    max_positions: int = 512
    dropout: float = 0.0
    #: feed-forward variant (lengthgen.model.layers): gelu MLP, or geglu as in 001 E.2
    ffn: FeedForwardName = "gelu"
    #: normalisation (layernorm, or rmsnorm as in 001 E.2) and where it sits:
    #: pre (before each sublayer) or pre_post (also on each sublayer's output, 001 E.2)
    norm: NormName = "layernorm"
    norm_placement: NormPlacementName = "pre"
    #: randomized positions also at evaluation (default: plain positions at test time)
    randomized_at_eval: bool = False
    #: period T of cyclic positions, i mod T (000 §4.1)
    cyclic_period: int = 3
    #: T5 bias: number of buckets K + 1 (even) and the distance L_1 of 001 eq. (D.2)
    t5_buckets: int = 32
    t5_max_distance: int = 128
    #: Shaw relative keys: distances are clipped to [-shaw_clip, shaw_clip] (003 eq. 2.1)
    shaw_clip: int = 16

    def __post_init__(self) -> None:
        if self.max_positions < 1:
            raise ValueError(f"model.max_positions must be >= 1, got {self.max_positions}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"model.dropout must be in [0, 1), got {self.dropout}")
        if self.cyclic_period < 1 or self.shaw_clip < 1:
            raise ValueError("model.cyclic_period and model.shaw_clip must be >= 1")
        if self.t5_buckets < 2 or self.t5_buckets % 2 or self.t5_max_distance <= self.t5_buckets // 2:
            raise ValueError(
                "model.t5_buckets must be even and >= 2, and model.t5_max_distance larger than half of it"
            )


@dataclass(frozen=True)
class TrainConfig:
    __pydantic_config__ = _STRICT
    steps: int = 2000
    batch_size: int = 64
    #: peak learning rate, reached after `warmup` steps, then cosine decay to 0
    lr: float = 1e-3
    warmup: int = 100
    weight_decay: float = 0.1
    #: gradient norm clip (0 disables)
    grad_clip: float = 1.0
    #: report the training loss every this many steps
    log_every: int = 50

    def __post_init__(self) -> None:
        for name in ("steps", "batch_size", "log_every"):
            if getattr(self, name) < 1:
                raise ValueError(f"train.{name} must be >= 1, got {getattr(self, name)}")
        if self.lr <= 0:
            raise ValueError(f"train.lr must be > 0, got {self.lr}")
        if self.warmup < 0 or self.weight_decay < 0 or self.grad_clip < 0:
            raise ValueError("train.warmup, train.weight_decay and train.grad_clip must be >= 0")


@dataclass(frozen=True)
class EvalConfig:
    __pydantic_config__ = _STRICT
    #: operand lengths to test; lengths inside task.train_digits count as in-distribution
    digits: tuple[int, ...] = (5, 8, 10)
    #: questions per test length, the same for every trial with the same seeds.eval
    samples: int = 100
    #: evaluate every this many steps (the final step is always evaluated; 0 = final only)
    every: int = 0
    #: questions decoded together
    batch_size: int = 500

    def __post_init__(self) -> None:
        if not self.digits or min(self.digits) < 1:
            raise ValueError(f"eval.digits must be a non-empty list of lengths >= 1, got {self.digits}")
        if len(set(self.digits)) != len(self.digits):
            raise ValueError(f"eval.digits has duplicates: {self.digits}")
        if self.samples < 1 or self.every < 0 or self.batch_size < 1:
            raise ValueError("eval.samples and eval.batch_size must be >= 1, eval.every >= 0")


@dataclass(frozen=True)
class SeedConfig:
    __pydantic_config__ = _STRICT
    #: parameter initialisation only
    weight: int = 0
    #: order and content of training batches (and dropout noise) only
    data: int = 0
    #: the evaluation questions only
    eval: int = 0

    def __post_init__(self) -> None:
        if min(self.weight, self.data, self.eval) < 0:
            raise ValueError("seeds must be non-negative integers")


@dataclass(frozen=True)
class TrialConfig:
    __pydantic_config__ = _STRICT
    task: TaskConfig = field(default_factory=TaskConfig)
    format: FormatConfig = field(default_factory=FormatConfig)
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    seeds: SeedConfig = field(default_factory=SeedConfig)

    def __post_init__(self) -> None:
        from lengthgen.formats import sequence_length

        longest = sequence_length(TASKS[self.task.name](), max(max(self.eval.digits), self.task.train_digits[1]))
        if longest > self.model.max_positions:
            raise ValueError(
                f"model.max_positions = {self.model.max_positions} is shorter than the longest "
                f"sequence ({longest} tokens); raise it or shorten eval.digits"
            )

    def to_dict(self) -> dict:
        return json.loads(json.dumps(asdict(self)))

    def canonical_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    @property
    def trial_id(self) -> str:
        """Short stable hash of the canonical JSON: same config, same id, anywhere."""
        return hashlib.sha256(self.canonical_json().encode()).hexdigest()[:12]

    def in_distribution(self, n_digits: int) -> bool:
        low, high = self.task.train_digits
        return low <= n_digits <= high
