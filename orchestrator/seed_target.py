"""Seeds until a precision target: the `seeds.until` block of a grid study.

    seeds:
      until: {metric: mean_accuracy, digits: 8, half_width: 0.1, max: 20, step: 2}

keeps adding weight seeds to every configuration group of the study, `step` at a time,
until the interval of `metric` at `digits` test digits has a half width (high - low)/2
of at most `half_width`, or the group has `max` weight seeds (docs/analysis.md).

Which seeds: a group's seeds are its weight seeds. Those of the study's design (its
axes) come first; the added ones are the next integers after the design's largest
weight seed of the group, each run with every data seed the group's design runs, so a
weight x data crossing stays crossed.

Rounds: each round is one `run_trials` (one Tune run) over the trials planned so far,
which runs only the unfinished ones. After a round, `group_states` reads every group's
interval from the analysis file the report shows it from (SEED_METRICS) and each group
still `adding seeds` is planned up to its next round: design seeds + k * step, capped
at `max`. With `plan: true` a group fitted on its trials so far jumps to the first round
that holds the weight seeds seed planning asks for (`planned_seeds`). The same function gives `lg-study status` and `lg-study report` their rows.

Resuming: the plan is recomputed from the trials rows. A group's seeds that have a row
(any status) are planned again, rounded up to the round they belong to, so an
interrupted round is completed with the same seeds before the rule is asked again, and
a trial is never trained twice (its id is its config; run_trials skips finished ids).
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections import defaultdict
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import Any

from rich.console import Console

from analysis import groups
from analysis.query import list_studies, open_results, run_sql_file
from analysis.seed_planning import PilotFit, plan
from lengthgen import TrialConfig
from orchestrator.recovery import check_not_busy, study_lock
from orchestrator.results_store import check_path_component, read_trial_statuses
from orchestrator.seed_spec import SEED_METRICS, SeedTarget
from orchestrator.study import Study
from orchestrator.tune_runner import FINISHED, RunSummary, run_trials

#: the lock a seed-target driver holds for all its rounds, around the study lock that
#: each round takes (as a search does)
SEEDS_LOCK = ".seeds"
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
    """group_id -> its row of analysis/seed_counts.sql; {} before the study has results."""
    return _read(results_root, study)[0]


def _read(results_root: Path, study: str, target: SeedTarget | None = None) -> tuple[dict, dict]:
    """(seed_counts.sql by group, the target metric's file at its length by group)."""
    if study not in list_studies(results_root):
        return {}, {}
    with open_results(results_root, study) as con:
        counts = run_sql_file(con, _sql("seed_counts.sql")).to_pylist()
        if target is None:
            return {r["group_id"]: r for r in counts}, {}
        rows = run_sql_file(con, _sql(SEED_METRICS[target.metric].sql), target.sql_params())
    intervals = {r["group_id"]: r for r in rows.to_pylist() if r["digits"] == target.digits}
    return {r["group_id"]: r for r in counts}, intervals


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


# --- the run -----------------------------------------------------------------------------


def run_until_target(
    study: Study,
    results_root: Path,
    tracking_uri: str,
    address: str | None = None,
    console: Console | None = None,
    restart: bool = False,
) -> RunSummary:
    """Run the study in rounds until every group's target holds or it has `max` seeds;
    return the rounds' RunSummary added up. Stops after a round with failed trials (a
    re-run retries them) or an interruption. Raises StudyBusy as run_study does."""
    target = study.spec.seeds.until
    results_root = Path(results_root).resolve()
    check_not_busy(results_root, study.name, SEEDS_LOCK)
    designs = design_groups(study.trials)
    with study_lock(results_root, study.name, SEEDS_LOCK):
        if restart:  # deletes the study's results and MLflow runs
            run_trials(
                dataclasses.replace(study, trials=[], axis_values=[]),
                results_root,
                tracking_uri,
                address,
                console,
                restart=True,
            )
        labels = design_labels(study)
        save_target(results_root, study.name, target, labels)
        before = read_trial_statuses(results_root, study.name)
        counts = planned_counts(study, results_root)
        summary = RunSummary(total=0, skipped=0)
        while True:
            trials = [t for gid, d in designs.items() for t in d.configs(counts[gid])]
            batch = run_trials(
                dataclasses.replace(study, trials=trials, axis_values=[]),
                results_root,
                tracking_uri,
                address,
                console,
            )
            _add(summary, batch)
            if batch.interrupted or batch.failed:
                break
            states = group_states(results_root, study.name, target, labels)
            wanted = planned_seeds(results_root, study.name, target, designs, states)
            grown = {
                s.group_id: designs[s.group_id].next_round(target, counts[s.group_id], wanted.get(s.group_id, 0))
                for s in states
                if s.state == ADDING
            }
            if all(grown[gid] == counts[gid] for gid in grown):
                break  # every group stopped (or can grow no further)
            counts.update(grown)
        summary.total = len(trials)
        summary.skipped = sum(before.get(t.trial_id) in FINISHED for t in trials)
    return summary


def planned_seeds(
    results_root: Path, study: str, target: SeedTarget, designs: dict[str, GroupDesign], states: list[GroupState]
) -> dict[str, int]:
    """With `plan: true`, group_id -> the weight seeds that seed planning (analysis/
    seed_planning.py, fitted on the group's trials so far at the target's length) needs
    for the target at the design's data seeds, or `max` where no count up to it does.
    Groups that cannot be fitted yet (fewer than 2 x 2 seeds) are left out: they grow by
    `step`."""
    adding = {s.group_id for s in states if s.state == ADDING}
    if not target.plan or not adding:
        return {}
    with open_results(results_root, study) as con:
        rows = run_sql_file(con, _sql("lucky_tickets.sql"), {"resamples": "2"}).to_pylist()
    wanted = {}
    for row in {r["group_id"]: r for r in rows if r["group_id"] in adding}.values():
        try:
            fit = PilotFit.from_lucky_row(row, target.digits)
            found = plan(fit, target.metric, target.half_width, len(designs[row["group_id"]].templates),
                         target.threshold if target.threshold is not None else 0.9, max_weight_seeds=target.max)
        except ValueError:
            continue
        wanted[row["group_id"]] = found.weight_seeds or target.max
    return wanted


def _add(total: RunSummary, batch: RunSummary) -> None:
    """Add a round's RunSummary to the run's (total and skipped are set at the end)."""
    total.ran += batch.ran
    total.wall_s += batch.wall_s
    for name in ("failed", "resumed", "interrupted", "killed_runs", "repaired_runs"):
        getattr(total, name).extend(getattr(batch, name))
    total.reused.update(batch.reused)


def _sql(name: str) -> Path:
    return Path(str(files("analysis") / name))
