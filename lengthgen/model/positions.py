"""Position samplers: which position index each token gets.

Every positional encoding consumes explicit positions (STYLE.md 4), so the choice
of indices is independent of the encoding that reads them. A sampler is called
once per sequence batch with the full length; decoding slices the same positions
as the sequence grows, so a token keeps its position while it is being generated.
Randomness comes from the torch Generator the caller passes (seeded by the data
seed at training and the eval seed at evaluation), never from global state.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, ClassVar

import torch

if TYPE_CHECKING:
    from lengthgen.config import ModelConfig


class PositionSampler(ABC):
    name: ClassVar[str]

    @classmethod
    def from_config(cls, cfg: ModelConfig) -> PositionSampler:
        return cls()

    @abstractmethod
    def __call__(
        self, batch: int, length: int, device: torch.device,
        generator: torch.Generator | None = None, training: bool = False,
    ) -> torch.Tensor:
        """(batch, length) long tensor of position indices."""


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
        return chosen.sort(dim=1).values.to(device)


class CyclicPositions(PositionSampler):
    """Cyclic Position Indexing, 000 §4.1: position i becomes i mod T."""

    name = "cyclic"

    def __init__(self, period: int) -> None:
        self.period = period

    @classmethod
    def from_config(cls, cfg):
        return cls(cfg.cyclic_period)

    def __call__(self, batch, length, device, generator=None, training=False):
        return PlainPositions()(batch, length, device) % self.period


POSITION_SAMPLERS: dict[str, type[PositionSampler]] = {
    s.name: s for s in (PlainPositions, RandomizedPositions, CyclicPositions)
}


def build_position_sampler(cfg: ModelConfig) -> PositionSampler:
    return POSITION_SAMPLERS[cfg.positions].from_config(cfg)
