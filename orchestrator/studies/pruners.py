"""`search.pruner`: which of Optuna's pruners stops poor points early, with its settings
and what it sees of a point (docs/search.md, "Stopping poor points early").

A pruner sees a point, never a seed: at each evaluation step that all of the point's
seeds have reached, one value from their values of ``search.metric`` there (POINT_VALUES,
`search.pruner.value`). `mean` is the quantity the point is finally scored by.
`upper_bound` is the one-sided Student t upper confidence bound of that mean from the
point's own seeds, so a point whose seeds disagree (one unlucky) is judged by what it
could still be. Only a point's own spread can change a decision: Optuna's pruners
compare points at the same step, so a width common to every point there (a spread
pooled over the points, Hoeffding's width for values in [0, 1]) moves them all alike.
How often a pruner loses the best point is measured, not assumed: `lg-study replay`.
"""

from __future__ import annotations

import functools
import math
import statistics
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import pydantic
from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    import optuna


class _Settings(BaseModel):
    model_config = ConfigDict(extra="forbid")


class NoSettings(_Settings):
    """`none`: every point trains to the last step."""


class MedianSettings(_Settings):
    """Optuna's MedianPruner: prune a point below the median of the earlier points at the same step."""

    #: points scored before any is pruned
    n_startup_trials: int = Field(5, ge=0)
    #: training steps before a point can be pruned
    n_warmup_steps: int = Field(0, ge=0)
    #: prune only at steps this many evaluations apart (as Optuna counts reported steps)
    interval_steps: int = Field(1, ge=1)
    #: earlier points that must have reached the step
    n_min_trials: int = Field(1, ge=1)


class PercentileSettings(MedianSettings):
    """Optuna's PercentilePruner: like median, at another percentile (25: keep the top quarter)."""

    percentile: float = Field(ge=0, le=100)


class SuccessiveHalvingSettings(_Settings):
    """Optuna's SuccessiveHalvingPruner (asynchronous successive halving, ASHA)."""

    #: training steps of the first rung; auto: Optuna's estimate from the first finished point
    min_resource: int | Literal["auto"] = "auto"
    #: 1 / the share of points promoted at each rung
    reduction_factor: int = Field(4, ge=2)
    min_early_stopping_rate: int = Field(0, ge=0)
    bootstrap_count: int = Field(0, ge=0)


class HyperbandSettings(_Settings):
    """Optuna's HyperbandPruner: successive halving in several brackets."""

    min_resource: int = Field(1, ge=1)
    #: training steps of a full point; auto: the last step of the first finished point
    max_resource: int | Literal["auto"] = "auto"
    reduction_factor: int = Field(3, ge=2)
    bootstrap_count: int = Field(0, ge=0)


class WilcoxonSettings(_Settings):
    """Optuna's WilcoxonPruner: prune a point whose values at the steps it shares with the
    best point are significantly worse, by a one-sided Wilcoxon signed-rank test."""

    p_threshold: float = Field(0.1, gt=0, lt=1)
    #: steps reported before the test is made
    n_startup_steps: int = Field(2, ge=0)


@dataclass(frozen=True)
class PrunerKind:
    """A pruner a study file may name: its settings and how Optuna makes it from them."""

    settings: type[_Settings]
    make: Callable[[dict[str, Any]], optuna.pruners.BasePruner]


def _optuna_pruners() -> Any:
    """optuna.pruners, imported on first use: every study file's load imports this module,
    and Optuna (with the scipy.stats it and the t bound bring) adds 0.6 s to each command."""
    import optuna.pruners

    return optuna.pruners


def _quietly(make: Callable[..., optuna.pruners.BasePruner], settings: dict) -> optuna.pruners.BasePruner:
    """Optuna's pruner without its ExperimentalWarning: it would repeat on every replay
    of a search (docs/search.md names the pruners Optuna calls experimental)."""
    import optuna

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return make(**settings)


#: the pruners `search.pruner` may name
PRUNERS: dict[str, PrunerKind] = {
    "none": PrunerKind(NoSettings, lambda s: _optuna_pruners().NopPruner()),
    "median": PrunerKind(MedianSettings, lambda s: _optuna_pruners().MedianPruner(**s)),
    "percentile": PrunerKind(PercentileSettings, lambda s: _optuna_pruners().PercentilePruner(**s)),
    "successive_halving": PrunerKind(SuccessiveHalvingSettings,
                                     lambda s: _optuna_pruners().SuccessiveHalvingPruner(**s)),
    "hyperband": PrunerKind(HyperbandSettings, lambda s: _optuna_pruners().HyperbandPruner(**s)),
    "wilcoxon": PrunerKind(WilcoxonSettings, lambda s: _quietly(_optuna_pruners().WilcoxonPruner, s)),
}


@functools.cache
def _t_quantile(confidence: float, df: int) -> float:
    # scipy.stats.t.ppf's own function, without scipy.stats's 0.4-0.6 s import (as
    # analysis.quantiles does it, which this room may not import)
    from scipy.special import stdtrit

    return float(stdtrit(df, confidence))


def upper_bound(seed_values: Sequence[float], confidence: float) -> float:
    """The one-sided ``confidence`` upper bound of the mean of ``seed_values``: mean +
    t(confidence, n - 1) s / sqrt(n). Not clipped to the metric's range: a pruner only
    ranks the values, and `search.metric` may be a length (summary/longest_99)."""
    n, mean = len(seed_values), statistics.fmean(seed_values)
    if n < 2:  # no spread to bound by; a search of one seed is refused (SearchSpec)
        return mean
    # floats, not statistics.stdev's exact fractions: a replay computes this a million times
    spread = math.sqrt(sum((v - mean) ** 2 for v in seed_values) / (n - 1))
    return mean + _t_quantile(confidence, n - 1) * spread / math.sqrt(n)


@dataclass(frozen=True)
class PointValue:
    """What a pruner may see of a point at a step: its words, and the value from the
    seeds' values there and `search.pruner.confidence`."""

    words: Callable[[float], str]
    of: Callable[[Sequence[float], float], float]


#: the values `search.pruner.value` may name
POINT_VALUES: dict[str, PointValue] = {
    "mean": PointValue(lambda confidence: "the mean over a point's seeds",
                       lambda seed_values, confidence: statistics.fmean(seed_values)),
    "upper_bound": PointValue(
        lambda confidence: f"the {confidence:.0%} upper t bound of the mean over a point's seeds", upper_bound),
}


class PrunerSpec(BaseModel):
    """`search.pruner`: a name of PRUNERS and that pruner's settings beside it
    (`{name: median, n_warmup_steps: 1000}`), or the name alone (`median`); `value` and
    `confidence` say what it sees of a point."""

    model_config = ConfigDict(extra="allow", frozen=True)
    #: which of Optuna's pruners; its settings sit beside the name, each pruner's as Optuna
    #: names them (docs/search.md lists them with their defaults)
    name: Literal[tuple(PRUNERS)] = "none"
    #: what the pruner sees of a point at a step (POINT_VALUES): the mean over its seeds, or
    #: the upper confidence bound of that mean from their spread (docs/search.md says when)
    value: Literal[tuple(POINT_VALUES)] = "mean"
    #: the upper bound's one-sided confidence level (value upper_bound only)
    confidence: float = Field(0.9, gt=0.5, lt=1)

    @pydantic.model_validator(mode="before")
    @classmethod
    def _name_alone(cls, value: Any) -> Any:
        return {"name": value} if isinstance(value, str) else value

    @pydantic.model_validator(mode="after")
    def _settings_of_the_pruner(self) -> PrunerSpec:
        if "confidence" in self.model_fields_set and self.value != "upper_bound":
            raise ValueError(f"confidence applies to value upper_bound only, not {self.value}")
        kind = PRUNERS[self.name].settings
        try:
            kind.model_validate(self.model_extra or {})
        except pydantic.ValidationError as error:
            from orchestrator.studies.config_paths import reason

            first = error.errors()[0]
            field = ".".join(map(str, first["loc"]))
            raise ValueError(f"{self.name} pruner, {field}: {reason(first, kind)}") from None
        return self

    @property
    def settings(self) -> dict[str, Any]:
        """The pruner's settings, its defaults filled in."""
        return PRUNERS[self.name].settings.model_validate(self.model_extra or {}).model_dump()

    @property
    def prunes(self) -> bool:
        return self.name != "none"

    def make(self) -> optuna.pruners.BasePruner:
        return PRUNERS[self.name].make(self.settings)

    def point_value(self, seed_values: Sequence[float]) -> float:
        """What the pruner sees of a point at a step, from its seeds' values there."""
        return POINT_VALUES[self.value].of(seed_values, self.confidence)

    @property
    def sees(self) -> str:
        return POINT_VALUES[self.value].words(self.confidence)

    def __str__(self) -> str:
        seen = {"value": self.value, "confidence": self.confidence} if self.value != "mean" else {}
        given = ", ".join(f"{k} {v}" for k, v in {**(self.model_extra or {}), **seen}.items())
        return self.name + (f" ({given})" if given else "")
