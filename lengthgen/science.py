"""The science version: which numbers a config gives with this code.

A trial id hashes the config only (lengthgen.config), so a code change that makes the
same config give other numbers would leave old results under the same ids. The science
version closes that gap. It must change whenever the same config would train or
evaluate differently: the vocabulary, the data a seed draws (questions, hints, spaces,
shifts, their order), the test questions, the initialisation, the training step
(optimizer, schedule, loss, clipping, position sampling) or the evaluation (decoding,
what counts as correct). Refactors, speed-ups that keep every number, new options at
defaults that keep the old behaviour and changes outside lengthgen do not change it.

It is stored in every `trials` row (column `science_version`) and in a trial's
checkpoint, and checked, rather than hashed into the trial id: see docs/design.md,
"Science version". Each version says which configs its change moves (`Change.affects`),
so a trial trained under an older version stays valid when no later change touches its
config: a fix to one task does not send every study of every other task back to
training. tests/test_science_pins.py pins the vocabulary, the first training batches
and the test questions of every task, format and distribution, the initial weights and
the first losses; a change that moves any of them fails there until a version is added
here (and the pins written anew).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lengthgen.config import TrialConfig


@dataclass(frozen=True)
class Change:
    """One science version: what changed, and which configs it gives other numbers."""

    version: int
    what: str
    affects: Callable[[TrialConfig], bool]


def _every_config(config: TrialConfig) -> bool:
    return True


def _bf16_rmsnorm(config: TrialConfig) -> bool:
    return config.train.precision == "bf16" and config.model.norm == "rmsnorm"


def _parity_fixed_length(config: TrialConfig) -> bool:
    return config.task.name == "parity" and config.format.fixed_length and config.format.pad


#: every version, oldest first; add one (and rewrite the pins) with every change that
#: moves a number of an unchanged config
CHANGES = (
    Change(1, "the first versioned science (2026-11-24); results written before carry no version "
              "and count as changed", _every_config),
    Change(2, "parity under format.fixed_length with pad: the scratchpad runs on through the zero "
              "cells left of the question (it restarted at 0 there, so one input had several targets)",
           _parity_fixed_length),
    Change(3, "RMSNorm under train.precision bf16 runs torch's fused kernel in bfloat16 with its gain "
              "cast to bfloat16 (it ran unfused with a float32 gain)", _bf16_rmsnorm),
)
SCIENCE_VERSION = CHANGES[-1].version


def changes_since(version: int | None, config: TrialConfig) -> list[Change]:
    """The changes after ``version`` (None: before versions were recorded) that give
    ``config`` other numbers than that version gave; [] when its numbers still stand."""
    return [change for change in CHANGES if change.version > (version or 0) and change.affects(config)]
