"""A `seeds.until` study's plan: its design's groups and the seeds each can grow by, the
stopping rule, each group's state as a row, and the target a run leaves in the study
folder. Where the groups stand is asked of the analysis's SQL by
orchestrator.running.seed_answers (this room only writes and reads the study folder).
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator.studies.seed_spec import SeedMetric, SeedTarget
from results_contract import groups
from results_contract.layout import check_path_component

if TYPE_CHECKING:  # `lg-study status` reads plans without loading torch (lengthgen's model)
    from lengthgen import TrialConfig
    from orchestrator.studies.study import Study

#: where a run leaves its target, for `status` and `report` (which get a study name)
SAVED = "seed_target.json"
TARGET_HELD, MAX_REACHED, ADDING = "target held", "max reached", "adding seeds"


# --- the plan: which trials a group runs -------------------------------------------------


class GroupDesign:
    """One configuration group of the study's design and the seeds it can grow by."""

    def __init__(self, trials: list[TrialConfig]) -> None:
        self.trials = trials
        self.seeds = sorted({t.seeds.weight for t in trials})
        #: one design trial per data seed, the template of each added weight seed's trials
        self.templates: dict[int, TrialConfig] = {}
        for trial in sorted(trials, key=lambda t: (t.seeds.data, t.seeds.weight)):
            self.templates.setdefault(trial.seeds.data, trial)

    def order(self, count: int) -> list[int]:
        """The group's first ``count`` weight seeds: the design's, then the next integers."""
        added = range(self.seeds[-1] + 1, self.seeds[-1] + 1 + max(0, count - len(self.seeds)))
        return [*self.seeds, *added][: max(count, len(self.seeds))]

    def rounds(self, target: SeedTarget) -> list[int]:
        """Seed counts after each round: the design's, then + step at a time up to max."""
        counts = [len(self.seeds)]
        while counts[-1] < target.max:
            counts.append(min(counts[-1] + target.step, target.max))
        return counts

    def planned(self, target: SeedTarget, with_rows: set[int]) -> int:
        """The seed count of the round that the seeds with trials rows belong to."""
        order = self.order(self.rounds(target)[-1])
        found = max((i + 1 for i, seed in enumerate(order) if seed in with_rows), default=0)
        return next(count for count in self.rounds(target) if count >= found)

    def next_round(self, target: SeedTarget, count: int, at_least: int = 0) -> int:
        """The first round after ``count`` seeds that has at least ``at_least``."""
        later = [c for c in self.rounds(target) if c > count]
        return next((c for c in later if c >= at_least), later[-1]) if later else count

    def configs(self, count: int) -> list[TrialConfig]:
        """The design's trials, then those of each added weight seed up to ``count``."""
        added = self.order(count)[len(self.seeds) :]
        return [
            *self.trials,
            *(
                dataclasses.replace(
                    template, seeds=dataclasses.replace(template.seeds, weight=seed)
                )
                for seed in added
                for template in self.templates.values()
            ),
        ]


def design_groups(trials: list[TrialConfig]) -> dict[str, GroupDesign]:
    by_group: dict[str, list[TrialConfig]] = defaultdict(list)
    for trial in trials:
        by_group[groups.group_id(trial)].append(trial)
    return {gid: GroupDesign(members) for gid, members in by_group.items()}


def design_labels(study: Study) -> dict[str, str]:
    """group_id -> group_label of the study's design groups, in the design's order."""
    return {groups.group_id(t): study.group_label(t) for t in study.trials}


# --- where each group stands -------------------------------------------------------------


@dataclass(frozen=True)
class GroupState:
    group_id: str
    group_label: str
    #: weight seeds with a trial (any status), and trials of the group not finished
    seeds: int
    unfinished: int
    #: trials measured at the target's length, the estimate and its interval there
    trials: int
    estimate: float | None
    low: float | None
    high: float | None
    half_width: float | None
    state: str


def state_of(target: SeedTarget, seeds: int, half_width: float | None) -> str:
    """The stopping rule: held once the half width is at most the target; else stopped
    at `max` seeds; else the group gets more seeds."""
    if half_width is not None and half_width <= target.half_width:
        return TARGET_HELD
    return MAX_REACHED if seeds >= target.max else ADDING


def widest_comparisons(rows: list[dict[str, Any]], metric: SeedMetric) -> dict[str, dict[str, Any]]:
    """group_id -> the row of its comparison with the widest interval (one with none, too
    few seeds to compare, is the widest), as the group's own row: a group has reached a
    comparison target when every comparison it is in has."""
    def width(row: dict[str, Any]) -> float:
        low, high = row.get(metric.low), row.get(metric.high)
        return high - low if low is not None and high is not None else float("inf")

    widest: dict[str, dict[str, Any]] = {}
    for row in rows:
        for side in ("a", "b"):
            group = row[f"group_{side}"]
            if group not in widest or width(row) > width(widest[group]):
                widest[group] = {**row, "group_id": group, "n_trials": row[f"n_{side}"]}
    return widest


def save_target(results_root: Path, study: str, target: SeedTarget, labels: dict[str, str]) -> None:
    """Leave the target and the design's groups (id -> label) in the study folder
    (atomically)."""
    check_path_component(study, "study")
    path = Path(results_root) / study / SAVED
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{SAVED}.tmp-{os.getpid()}")
    temporary.write_text(json.dumps({"target": target.model_dump(), "groups": labels}, indent=1))
    os.replace(temporary, path)


def saved_target(results_root: Path, study: str) -> tuple[SeedTarget, dict[str, str]] | None:
    """The target a run of ``study`` left and its design's groups (id -> label); None if none."""
    try:
        check_path_component(study, "study")
        saved = json.loads((Path(results_root) / study / SAVED).read_text())
    except (OSError, ValueError):
        return None
    return SeedTarget.model_validate(saved["target"]), saved["groups"]


def state_rows(states: list[GroupState]) -> list[dict[str, Any]]:
    """One row per group for `status` and the report: its seeds, its interval, and
    whether it stopped because the target held or because it reached `max`."""
    return [
        {
            "group": s.group_label,
            "seeds": s.seeds,
            "trials measured": s.trials,
            "unfinished": s.unfinished,
            "estimate": s.estimate,
            "interval": f"{s.low:.3f} - {s.high:.3f}" if s.half_width is not None else "",
            "half width": s.half_width,
            "state": s.state,
        }
        for s in states
    ]
