"""The `seeds` block of a study file: add seeds until a precision target holds.

Its schema (SeedsSpec, SeedTarget), the estimates a target may name (SEED_METRICS:
the analysis file and columns of each interval) and the profile keys that change it
(`seeds.until: {...}`, `seeds.until.max: 6`). orchestrator.running.seed_target runs it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import pydantic
from pydantic import BaseModel, ConfigDict, Field

#: profile keys under `seeds.until` change the target (the config's seeds are
#: seeds.weight, seeds.data, seeds.eval: no config field is called `until`)
UNTIL = "seeds.until"


@dataclass(frozen=True)
class SeedMetric:
    """An estimate a target can narrow: the analysis file and columns of its interval."""

    sql: str
    estimate: str
    low: str
    high: str
    #: target fields that the file takes as parameters
    params: tuple[str, ...]
    words: str
    #: the file's rows are pairs of groups (group_a, group_b), not groups: a group's
    #: interval is the widest of its pairs' (seed_plan.widest_comparisons)
    per_pair: bool = False


SEED_METRICS = {
    "mean_accuracy": SeedMetric(
        "variance.sql",
        "mean",
        "mean_low",
        "mean_high",
        (),
        "mean exact-match accuracy over seeds, 95 % interval (crossed seeds: two-way random effects, Wilson at the effective n)",
    ),
    "success": SeedMetric(
        "success.sql",
        "p_success",
        "p_success_low",
        "p_success_high",
        ("threshold",),
        "share of trials with accuracy >= threshold, 95 % Wilson interval at the effective number of seed pairs",
    ),
    # a comparison target: seeds until every comparison is decided to within ± half_width.
    # Not "until significant": stopping when a test first rejects inflates its error rate
    "accuracy_difference": SeedMetric(
        "compare.sql",
        "accuracy_diff",
        "accuracy_diff_low",
        "accuracy_diff_high",
        (),
        "difference of mean accuracy between groups that differ in one setting, 95 % interval over seeds "
        "(paired: crossed variance of the differences); a group's is the widest of its comparisons'",
        per_pair=True,
    ),
}


class SeedTarget(BaseModel):
    """`seeds.until`: add weight seeds to each group until its interval is this narrow."""

    model_config = ConfigDict(extra="forbid")
    #: the estimate whose interval must narrow (SEED_METRICS)
    metric: Literal[tuple(SEED_METRICS)]
    #: the test length it is read at (one of eval.digits)
    digits: int = Field(ge=1)
    #: a group stops once its interval's half width, (high - low)/2, is at most this
    half_width: float = Field(gt=0, le=0.5)
    #: the most weight seeds a group gets (more only if the design gives it more)
    max: int = Field(ge=2, le=10_000)
    #: weight seeds added to a group per round
    step: int = Field(1, ge=1)
    #: success only: a trial succeeds at accuracy >= threshold (default as success.sql)
    threshold: float | None = Field(None, ge=0, le=1)
    #: after a round, grow each group to the weight seeds that seed planning, fitted on
    #: its trials so far (crossed, or one data seed and several weight seeds), needs for
    #: the target (at least one round); else `step` a round
    plan: bool = False

    @pydantic.model_validator(mode="after")
    def _threshold_for_success(self) -> SeedTarget:
        if self.threshold is not None and "threshold" not in SEED_METRICS[self.metric].params:
            raise ValueError(f"threshold applies to metric success only, not {self.metric}")
        return self

    def sql_params(self) -> dict[str, str]:
        """The analysis file's parameters; the others keep the file's defaults, as in the report."""
        taken = SEED_METRICS[self.metric].params
        return {name: str(getattr(self, name)) for name in taken if getattr(self, name) is not None}

    def words(self) -> str:
        metric = SEED_METRICS[self.metric]
        threshold = f", threshold {self.threshold}" if self.threshold is not None else ""
        return (
            f"seeds until the interval of {self.metric} at {self.digits} digits ({metric.words}"
            f"{threshold}; {metric.sql}) has half width <= {self.half_width}, "
            f"at most {self.max} weight seeds per group, "
            + ("as many per round as seed planning asks (at least " if self.plan else "")
            + f"{self.step} per round" + (")" if self.plan else "")
        )


class SeedsSpec(BaseModel):
    """The `seeds` block of a study file."""

    model_config = ConfigDict(extra="forbid")
    #: add weight seeds to every configuration group until a precision target holds
    until: SeedTarget | None = None


def until_key_problem(key: str) -> str | None:
    """Why a profile key under `seeds.until` names nothing it could change, or None."""
    field = key.removeprefix(UNTIL).removeprefix(".")
    if not field or field in SeedTarget.model_fields:
        return None
    return f"no such field of seeds.until; its fields: {', '.join(SeedTarget.model_fields)}"


def profiled_seeds(seeds: SeedsSpec, changes: dict[str, object]) -> SeedsSpec:
    """The `seeds` block after a profile's `seeds.until` keys, in their order (a whole
    block, or one field of it); raises pydantic.ValidationError for a target that
    cannot run."""
    until = seeds.until.model_dump(exclude_none=True) if seeds.until else None
    for key, value in changes.items():
        until = value if key == UNTIL else {**(until or {}), key.removeprefix(UNTIL + "."): value}
    return SeedsSpec.model_validate({"until": until})


def is_until_key(key: str) -> bool:
    return key == UNTIL or key.startswith(UNTIL + ".")
