"""`search.pruner`: which of Optuna's pruners stops poor points early, with its settings
(docs/search.md, "Stopping poor points early").

A pruner sees a point, never a seed: at each evaluation step that all of the point's
seeds have reached, the mean of ``search.metric`` over them (point_value). The mean is
the quantity the point is finally scored by, so a pruner compares like with like at
every step; a lower confidence bound from two or three seeds would rest on a t quantile
with one or two degrees of freedom (12.7, 4.3) and prune any point whose seeds happen
to disagree, which is seed luck again. How often a pruner loses the best point is
measured, not assumed: `lg-study replay`.
"""

from __future__ import annotations

import statistics
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal

import optuna
import pydantic
from pydantic import BaseModel, ConfigDict, Field


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


def _quietly(make: Callable[..., optuna.pruners.BasePruner], settings: dict) -> optuna.pruners.BasePruner:
    """Optuna's pruner without its ExperimentalWarning: it would repeat on every replay
    of a search (docs/search.md names the pruners Optuna calls experimental)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return make(**settings)


#: the pruners `search.pruner` may name
PRUNERS: dict[str, PrunerKind] = {
    "none": PrunerKind(NoSettings, lambda s: optuna.pruners.NopPruner()),
    "median": PrunerKind(MedianSettings, lambda s: optuna.pruners.MedianPruner(**s)),
    "percentile": PrunerKind(PercentileSettings, lambda s: optuna.pruners.PercentilePruner(**s)),
    "successive_halving": PrunerKind(SuccessiveHalvingSettings,
                                     lambda s: optuna.pruners.SuccessiveHalvingPruner(**s)),
    "hyperband": PrunerKind(HyperbandSettings, lambda s: optuna.pruners.HyperbandPruner(**s)),
    "wilcoxon": PrunerKind(WilcoxonSettings, lambda s: _quietly(optuna.pruners.WilcoxonPruner, s)),
}


class PrunerSpec(BaseModel):
    """`search.pruner`: a name of PRUNERS and that pruner's settings beside it
    (`{name: median, n_warmup_steps: 1000}`), or the name alone (`median`)."""

    model_config = ConfigDict(extra="allow", frozen=True)
    #: which of Optuna's pruners; its settings sit beside the name, each pruner's as Optuna
    #: names them (docs/search.md lists them with their defaults)
    name: Literal[tuple(PRUNERS)] = "none"

    @pydantic.model_validator(mode="before")
    @classmethod
    def _name_alone(cls, value: Any) -> Any:
        return {"name": value} if isinstance(value, str) else value

    @pydantic.model_validator(mode="after")
    def _settings_of_the_pruner(self) -> PrunerSpec:
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

    def __str__(self) -> str:
        given = ", ".join(f"{k} {v}" for k, v in (self.model_extra or {}).items())
        return self.name + (f" ({given})" if given else "")


def point_value(seed_values: Iterable[float]) -> float:
    """What a pruner sees of a point at a step: the mean over its seeds (see the module's docstring)."""
    return statistics.fmean(seed_values)
