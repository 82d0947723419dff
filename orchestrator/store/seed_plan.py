"""Which trials a `seeds.until` study plans, and where each of its groups stands: what
`lg-study status`, `lg-study report` and the run table read, without the Tune run
that adds seeds (orchestrator.running.seed_target), so reading them loads neither Ray nor torch.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from analysis.query import open_results, run_sql_file, sql_file
from orchestrator.studies.seed_spec import SEED_METRICS, SeedMetric, SeedTarget
from results_contract import groups
from results_contract.layout import check_path_component, list_studies

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


def planned_counts(study: Study, results_root: Path) -> dict[str, int]:
    """group_id -> the weight seeds a `seeds.until` study has planned for it so far: the
    round that the group's seeds with trials rows reach (its design's, at least)."""
    rows = seed_counts(results_root, study.name)
    return {
        gid: design.planned(study.spec.seeds.until, set(rows.get(gid, {}).get("weight_seeds", [])))
        for gid, design in design_groups(study.trials).items()
    }


def planned_trials(study: Study, results_root: Path) -> list[TrialConfig]:
    """The trials a `seeds.until` study has planned so far (`planned_counts`)."""
    designs = design_groups(study.trials)
    return [
        t
        for gid, count in planned_counts(study, results_root).items()
        for t in designs[gid].configs(count)
    ]


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


def seed_counts(results_root: Path, study: str) -> dict[str, dict[str, Any]]:
    """group_id -> its row of analysis/sql/questions/seed_counts.sql; {} before the study has results."""
    return _read(results_root, study)[0]


def _read(results_root: Path, study: str, target: SeedTarget | None = None) -> tuple[dict, dict]:
    """(seed_counts.sql by group, the target metric's file at its length by group)."""
    if study not in list_studies(results_root):
        return {}, {}
    with open_results(results_root, study) as con:
        counts = run_sql_file(con, sql_file("seed_counts.sql")).to_pylist()
        if target is None:
            return {r["group_id"]: r for r in counts}, {}
        rows = run_sql_file(con, sql_file(SEED_METRICS[target.metric].sql), target.sql_params())
    at_length = [r for r in rows.to_pylist() if r["digits"] == target.digits]
    metric = SEED_METRICS[target.metric]
    intervals = widest_comparisons(at_length, metric) if metric.per_pair else {r["group_id"]: r for r in at_length}
    return {r["group_id"]: r for r in counts}, intervals


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


def group_states(
    results_root: Path, study: str, target: SeedTarget, labels: dict[str, str]
) -> list[GroupState]:
    """Where each group of ``labels`` (group_id -> group_label) stands, from the same
    analysis file as the report."""
    metric = SEED_METRICS[target.metric]
    counts, intervals = _read(results_root, study, target)
    states = []
    for gid, label in labels.items():
        count, interval = counts.get(gid, {}), intervals.get(gid, {})
        low, high = interval.get(metric.low), interval.get(metric.high)
        half = (high - low) / 2 if low is not None and high is not None else None
        seeds = len(count.get("weight_seeds") or [])
        states.append(
            GroupState(
                gid,
                count.get("group_label") or label,
                seeds,
                count.get("unfinished", 0),
                interval.get("n_trials", 0),
                interval.get(metric.estimate),
                low,
                high,
                half,
                state_of(target, seeds, half),
            )
        )
    return states


def save_target(results_root: Path, study: str, target: SeedTarget, labels: dict[str, str]) -> None:
    """Leave the target and the design's groups (id -> label) in the study folder
    (atomically)."""
    check_path_component(study, "study")
    path = Path(results_root) / study / SAVED
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{SAVED}.tmp-{os.getpid()}")
    temporary.write_text(json.dumps({"target": target.model_dump(), "groups": labels}, indent=1))
    os.replace(temporary, path)


def saved_states(results_root: Path, study: str) -> tuple[SeedTarget, list[GroupState]] | None:
    """The target a run of ``study`` left and where its groups stand; None if none."""
    try:
        check_path_component(study, "study")
        saved = json.loads((Path(results_root) / study / SAVED).read_text())
    except (OSError, ValueError):
        return None
    target = SeedTarget.model_validate(saved["target"])
    return target, group_states(results_root, study, target, saved["groups"])


def seed_states(
    results_root: Path, study: str, loaded: Study | None = None
) -> tuple[SeedTarget, list[GroupState]] | None:
    """Where the groups of a `seeds.until` study stand: by the ``loaded`` study's own
    target and design when it has one, else by what its last run left; None if none."""
    if loaded is not None and loaded.spec.seeds.until is not None:
        target = loaded.spec.seeds.until
        return target, group_states(results_root, study, target, design_labels(loaded))
    return saved_states(results_root, study)


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
