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
"Science version". tests/test_science_pins.py pins the vocabulary, the first training
batches and the test questions of every task, format and distribution, the initial
weights and the first losses; a change that moves any of them fails there until this
number is raised (and the pins written anew).
"""

from __future__ import annotations

#: raise by one with every change that moves a number of an unchanged config, and say
#: what changed in CHANGES
SCIENCE_VERSION = 1

#: version -> what changed in it; rows written before versioning have no version (null)
CHANGES = {
    1: "the first versioned science (lg-study 0.x as of 2026-11-24); results written before carry no version",
}
