"""Position samplers: which position index each token gets.

Every positional encoding consumes explicit positions (STYLE.md 4), so the
choice of indices is independent of the encoding that reads them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar

import torch


class PositionSampler(ABC):
    name: ClassVar[str]

    @abstractmethod
    def __call__(self, batch: int, length: int, device: torch.device) -> torch.Tensor:
        """(batch, length) long tensor of position indices."""


class PlainPositions(PositionSampler):
    """0, 1, ..., T-1 for every row."""

    name = "plain"

    def __call__(self, batch, length, device):
        return torch.arange(length, device=device).expand(batch, length)


POSITION_SAMPLERS: dict[str, type[PositionSampler]] = {s.name: s for s in (PlainPositions,)}
