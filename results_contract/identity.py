"""A trial's seeds: the one list of seed kinds that the rows, the groups and the SQL read.

Each kind is a field of a trial's ``seeds`` config (lengthgen's SeedConfig, checked
against this list by tests/test_identity.py) and the column ``<name>_seed`` of its
``trials`` row. Adding a seed kind is one entry here: orchestrator.store.trial_rows
names the row's column from it, analysis.groups leaves the kinds that are ``apart`` out
of a group's identity, and analysis.query hands the columns to the SQL as the DuckDB
variables ``seeds_apart`` and ``seeds_listed``, which the macros of
analysis/sql/macros/identity.sql read, so every view and question that shows a trial's
identity (finished_eval, final_accuracy.sql, ...) shows the new column too.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SeedKind:
    #: the field under ``seeds`` in a trial's config, e.g. "weight"
    name: str
    #: trials of one configuration group differ by it (else it is part of the group:
    #: the eval seed, fixed per study)
    apart: bool
    #: the outputs that list a trial show it beside the trial's group (the crossed
    #: weight and data seeds); a perturb seed, a numerical replicate of its weight seed,
    #: is shown only where replicates are the question (replicates.sql, run_trials.sql)
    listed: bool

    @property
    def column(self) -> str:
        """Its column in the trials row, e.g. ``weight_seed``."""
        return f"{self.name}_seed"


#: every seed kind, in the order of the SeedConfig fields (and so of the trials columns)
SEED_KINDS: tuple[SeedKind, ...] = (
    SeedKind("weight", apart=True, listed=True),
    SeedKind("data", apart=True, listed=True),
    SeedKind("eval", apart=False, listed=False),
    SeedKind("perturb", apart=True, listed=False),
)


def seeds_apart() -> tuple[str, ...]:
    """The config names of the seeds a group's trials differ by: weight, data, perturb."""
    return tuple(kind.name for kind in SEED_KINDS if kind.apart)


def seed_columns() -> dict[str, str]:
    """Config path -> trials column of every seed, e.g. ``seeds.weight`` -> ``weight_seed``."""
    return {f"seeds.{kind.name}": kind.column for kind in SEED_KINDS}


def apart_columns() -> list[str]:
    """The columns of the seeds apart (SQL's ``seeds_apart``): weight_seed, data_seed, perturb_seed."""
    return [kind.column for kind in SEED_KINDS if kind.apart]


def listed_columns() -> list[str]:
    """The columns the outputs that list a trial show (SQL's ``seeds_listed``)."""
    return [kind.column for kind in SEED_KINDS if kind.listed]
