"""Position samplers: which position index each token gets.

Every positional encoding consumes explicit positions, so the choice
of indices is independent of the encoding that reads them. A sampler is called
once per sequence batch with the full length; decoding slices the same positions
as the sequence grows, so a token keeps its position while it is being generated.
Randomness comes from the torch Generator the caller passes (seeded by the data
seed at training and the eval seed at evaluation), never from global state.

Most samplers need only the length of each sequence (`__call__`). One that reads
the token rows (`reads_places`: coupled positions) gets, through `sample`, the
place of every digit in them, which the architecture computes from its rows
(Architecture.coupled_places, lengthgen.model.position.places).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, ClassVar, NamedTuple

import torch

from lengthgen.formats import pairs_places
from lengthgen.host_copy import to_device

if TYPE_CHECKING:
    from lengthgen.config import ModelConfig, TrialConfig
    from lengthgen.tasks import Task


#: model.coupled_answer: which place an answer token of coupled positions is coupled
#: with (CoupledPositions), and the lowest start s of its IDs s + p: own_place gives
#: operators and "=" place 0, so s >= 1 keeps them off the 0 of uncoupled tokens
COUPLED_ANSWERS: dict[str, int] = {"own_place": 1, "predicted_place": 0}
#: model.coupled_equals, own_place with answers written most significant digit first:
#: the place "=" is coupled with, beyond the operators' 0 (operators, the paper-era
#: code's choice in lg-study's numbering) or one past the answer's most significant
#: digit, A + 1 (the current release); paper_era: the paper-era code's numbering itself,
#: IDs counted down from the operators' (CoupledPositions._coupled_places), in either
#: answer order, with format.pad_overflow's operands of n + 1 digits
COUPLED_EQUALS: tuple[str, ...] = ("operators", "past_answer", "paper_era")


class Places(NamedTuple):
    """What a sampler that reads the token rows gets of one batch of them."""

    #: per model.coupled_answer (COUPLED_ANSWERS), per sequence the model reads, in the
    #: order of its positions, (B, T_k): the place each token is coupled with (1 = units),
    #: -1 for a token coupled with none (lengthgen.model.position.places.NONE)
    sequences: dict[str, tuple[torch.Tensor, ...]]
    #: (B,) the largest ID a token of the row can carry at the lowest start, from its
    #: question alone (the same under both conventions; lengthgen.model.position.places.reach)
    reach: torch.Tensor
    #: per sequence, (B, T_k): where "=" stands, and (B,) the answer's digits A: what
    #: model.coupled_equals past_answer moves (None: the model has no such "=")
    equals: tuple[torch.Tensor, ...] | None = None
    answer_digits: torch.Tensor | None = None


class PositionSampler(ABC):
    name: ClassVar[str]
    #: reads the places of the digits in the token rows (`sample`'s `places`)
    reads_places: ClassVar[bool] = False
    #: ModelConfig fields this sampler reads that some others do not; set under another
    #: sampler they are refused (lengthgen.config.refuse_unread_options)
    options: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def from_config(cls, cfg: ModelConfig) -> PositionSampler:
        return cls()

    @classmethod
    def check(cls, config: TrialConfig, task: Task) -> None:
        """Refuse a trial whose rows these positions cannot serve (ValueError naming the field)."""

    def indices_needed(self, tokens: int, places: int) -> int:
        """How many position indices (0 .. n - 1) a row of `tokens` tokens whose longest
        operand has `places` digits needs: model.max_positions must be at least this."""
        return tokens

    @abstractmethod
    def __call__(
        self, batch: int, length: int, device: torch.device,
        generator: torch.Generator | None = None, training: bool = False,
    ) -> torch.Tensor:
        """(batch, length) long tensor of position indices."""

    def sample(
        self, batch: int, lengths: tuple[int, ...], device: torch.device,
        generator: torch.Generator | None = None, training: bool = False, places: Places | None = None,
    ) -> tuple[torch.Tensor, ...]:
        """The positions of every sequence a model reads for one batch of rows, (batch,
        length) each, drawn from `generator` in order; `places` for a sampler that
        `reads_places`."""
        return tuple(self(batch, length, device, generator, training=training) for length in lengths)


class PlainPositions(PositionSampler):
    """0, 1, ..., T-1 for every row."""

    name = "plain"

    def __call__(self, batch, length, device, generator=None, training=False):
        return torch.arange(length, device=device).expand(batch, length)


class RandomizedPositions(PositionSampler):
    """Ruoss et al. 2023 (001 App. D, Fig. 8): each row gets a sorted random subset of
    `length` distinct indices from [0, max_positions), so that training sees the
    position values that longer test sequences need. At training only unless
    `at_eval` (Ruoss et al. also sample at test time; 001 does not say), because plain
    positions are what a test sequence shorter than max_positions would otherwise get."""

    name = "randomized"
    options = ("randomized_at_eval",)

    def __init__(self, max_positions: int, at_eval: bool = False) -> None:
        self.max_positions, self.at_eval = max_positions, at_eval

    @classmethod
    def from_config(cls, cfg):
        return cls(cfg.max_positions, cfg.randomized_at_eval)

    def __call__(self, batch, length, device, generator=None, training=False):
        if not (training or self.at_eval):
            return PlainPositions()(batch, length, device)
        if length > self.max_positions:
            raise ValueError(f"{length} positions requested from a range of {self.max_positions}")
        scores = torch.rand(batch, self.max_positions, generator=generator)
        chosen = scores.argsort(dim=1)[:, :length]  # distinct, uniformly random
        return to_device(chosen.sort(dim=1).values, device)


class CyclicPositions(PositionSampler):
    """Cyclic Position Indexing, 000 §4.1: position i becomes i mod T."""

    name = "cyclic"
    options = ("cyclic_period",)

    def __init__(self, period: int) -> None:
        self.period = period

    @classmethod
    def from_config(cls, cfg):
        return cls(cfg.cyclic_period)

    def __call__(self, batch, length, device, generator=None, training=False):
        return PlainPositions()(batch, length, device) % self.period


class CoupledPositions(PositionSampler):
    """Position coupling: Cho, Cha, Awasthi, Bhojanapalli, Gupta, Yun, "Position Coupling:
    Improving Length Generalization of Arithmetic Transformers Using Task Structure",
    NeurIPS 2024, arXiv 2405.20671, §3. Digits of the same significance in every
    operand share one position ID, and so does the answer token coupled with them:

        ID = s + p  for a token coupled with place p (lengthgen.model.position.places),  0 for every other,

    where which token is coupled with which place is model.coupled_answer:

    own_place (default; the authors' released code for addition): every digit and index
    hint its own place, the answer's digits included; every other question token but
    the start token and spaces (the operators, "=") place 0; the start token, spaces,
    the end token and padding no place. s >= 1, so "+" and "=" never share the 0 of
    the start token. Default format, s = 1 (test time):

        <s>  0  8  5  +  0  5  0  =  5  3  1  0  </s>
         0   4  3  2  1  4  3  2  1  2  3  4  5   0

    ("=" predicts the units "5" from the operators' ID; the last digit, which predicts
    the end token, keeps its own place's ID). predicted_place (the token that predicts
    an answer digit carries that digit's place): question digits and hints their own
    place, and from "=" on a decoder's token the place of the token it predicts; the
    last digit predicts the end token and carries the place after it in writing order
    (A + 1 least significant digit first, none most significant first); every other
    token no place. s >= 0. Default format, s = 0:

        <s>  0  8  5  +  0  5  0  =  5  3  1  0  </s>
         0   3  2  1  0  3  2  1  1  2  3  4  5   0

    Index hints take their digit's place in both. An encoder-decoder's decoder input
    token i (the start token, then the answer) carries the place of answer token i - 1
    with own_place (the start token, which predicts the first digit as "=" does, place
    0) and of answer token i, which it predicts, with predicted_place.

    s is drawn per question at training (the data seed's Generator), uniform on
    s0 .. s0 + max_positions - 1 - r, s0 the lowest start (COUPLED_ANSWERS) and r the
    largest ID at s0 (its longest operand + 2 in both conventions), so that every ID
    below max_positions is trained (Cho et al. draw a random starting ID likewise);
    s = s0 at test unless `at_eval` (then drawn from the eval seed's Generator). One s
    per row serves every sequence of the row (an encoder-decoder's question and
    answer). docs/methods.md says where this departs from the authors' released code."""

    name = "coupled"
    reads_places = True
    options = ("coupled_at_eval", "coupled_answer", "coupled_equals")

    def __init__(self, max_positions: int, at_eval: bool = False, answer: str = "own_place",
                 equals: str = "operators") -> None:
        if answer not in COUPLED_ANSWERS:
            raise ValueError(f"model.coupled_answer must be one of {sorted(COUPLED_ANSWERS)}, got {answer!r}")
        if equals not in COUPLED_EQUALS:
            raise ValueError(f"model.coupled_equals must be one of {list(COUPLED_EQUALS)}, got {equals!r}")
        self.max_positions, self.at_eval, self.answer, self.equals = max_positions, at_eval, answer, equals

    @classmethod
    def from_config(cls, cfg):
        return cls(cfg.max_positions, cfg.coupled_at_eval, cfg.coupled_answer, cfg.coupled_equals)

    @classmethod
    def check(cls, config, task):
        fmt = config.format
        if fmt.fixed_length:
            raise ValueError(
                "model.positions coupled couples the answer tokens a model writes with the operand digits "
                "of their place (Cho et al. 2024 §3); format.fixed_length writes no answer tokens, and its "
                "aligned layout already puts each answer digit at a column of its place (003 §3)"
            )
        if pairs_places(task, fmt):
            raise ValueError(
                "model.positions coupled and format.interleave both align the digits of one place, and "
                "interleave writes two numbers as one run of digits: choose one"
            )
        if any(digits > 1 for digits in task.fixed_digits()):
            raise ValueError(
                f"model.positions coupled gives the digits of one place one ID; with task.multiplier_digits "
                f"{max(task.fixed_digits())} an answer digit combines several places of each operand "
                f"(task.name {task.name}), which no shared ID aligns: use task.multiplier_digits 1"
            )
        if not fmt.reverse and not fmt.pad and task.answer_is_number:
            raise ValueError(
                "model.positions coupled needs the place of every answer digit before it is written: with "
                "format.reverse false the first digit's place is the answer's length, which format.pad "
                "false leaves open (a carry may add a digit); set format.pad or format.reverse to true"
            )
        cls._check_equals(config)

    @staticmethod
    def _check_equals(config) -> None:
        """past_answer is a convention for "=" before an answer written most significant
        digit first, in a decoder that couples its answer with own_place; elsewhere it
        would change the trial id and nothing else, or mean nothing."""
        model = config.model
        if model.coupled_equals == "operators":
            return
        if model.coupled_equals == "paper_era":
            if model.coupled_answer != "own_place" or model.arch != "decoder" or not config.format.pad_overflow:
                raise ValueError(
                    "model.coupled_equals paper_era is the paper-era code's numbering of a decoder's own "
                    "places over operands padded to n + 1 digits: it needs model.arch decoder, "
                    f"model.coupled_answer own_place and format.pad_overflow true; got model.arch {model.arch}, "
                    f"model.coupled_answer {model.coupled_answer}, format.pad_overflow {config.format.pad_overflow}"
                )
            return
        if config.format.reverse:
            raise ValueError(
                "model.coupled_equals past_answer moves the ID of \"=\" before an answer written most "
                "significant digit first; with format.reverse true the released code and the paper-era "
                "code both give \"=\" the start ID, as operators does: remove it"
            )
        if model.coupled_answer != "own_place" or model.arch != "decoder":
            raise ValueError(
                "model.coupled_equals past_answer is the released code's convention for a decoder with "
                f"model.coupled_answer own_place; got model.arch {model.arch} and model.coupled_answer "
                f"{model.coupled_answer}: remove it"
            )

    def indices_needed(self, tokens, places):
        # IDs 0 .. places + 2 at the lowest start (the reach r = places + 2); "=" one past
        # the answer's top digit (past_answer) reaches one further
        return places + 3 + self._past_answer_reach()

    def _past_answer_reach(self) -> int:
        return 1 if self.equals == "past_answer" else 0

    def __call__(self, batch, length, device, generator=None, training=False):
        raise ValueError(
            "coupled positions are read from the token rows: call sample() with their places "
            "(Architecture.sample_positions does)"
        )

    def sample(self, batch, lengths, device, generator=None, training=False, places=None):
        if places is None:
            raise ValueError("coupled positions need the places of the token rows (Architecture.coupled_places)")
        reach = places.reach.cpu() + self._past_answer_reach()
        room = self.max_positions - 1 - reach  # (B,) the largest start of each row, less s0
        if bool((room < 0).any()):
            raise ValueError(
                f"a question whose tokens carry IDs up to {int(reach.max())} needs "
                f"model.max_positions >= {int(reach.max()) + 1}, got {self.max_positions}"
            )
        start = torch.full((batch,), COUPLED_ANSWERS[self.answer], dtype=torch.long)  # s0
        if training or self.at_eval:
            start += (torch.rand(batch, generator=generator) * (room + 1)).long().minimum(room)  # + uniform 0 .. room
        start = to_device(start, device)[:, None]
        return tuple(torch.where(p >= 0, p + start, 0) for p in self._coupled_places(places))

    def _coupled_places(self, places: Places) -> tuple[torch.Tensor, ...]:
        """The places of model.coupled_answer, with "=" moved one past the answer's most
        significant digit under model.coupled_equals past_answer: the released code's
        `eq_position = start + len(labels) + 1` for answers not reversed
        (src/data/addition.py, AdditionDatasetWithCoupledPositions)."""
        sequences = places.sequences[self.answer]
        if self.equals == "operators":
            return sequences
        if self.equals == "paper_era":
            # Cho et al.'s src/data/addition.py at e050132, AdditionDatasetWithCoupledPositions:
            # end = start + max_len + 1 over operands padded to max_len = n + 1 digits; a
            # digit of place p gets end - p, "+" and "=" get end: place p counted down
            # from reach - 1 (reach = n + 3, the question's top place + 2)
            top = places.reach.to(sequences[0].device)[:, None] - 1
            return tuple(torch.where(p >= 0, top - p, p) for p in sequences)
        after = places.answer_digits[:, None] + 1
        return tuple(torch.where(equals, after, p) for p, equals in zip(sequences, places.equals))


POSITION_SAMPLERS: dict[str, type[PositionSampler]] = {
    s.name: s for s in (PlainPositions, RandomizedPositions, CyclicPositions, CoupledPositions)
}


def build_position_sampler(cfg: ModelConfig) -> PositionSampler:
    return POSITION_SAMPLERS[cfg.positions].from_config(cfg)
