"""Where each group of a `seeds.until` study stands, asked of the same SQL files as the
report (seed_counts.sql, and the target metric's file at its length), and so which
trials it has planned so far: what `lg-study status`, `lg-study report`, the run table
and a seeds-until round read (orchestrator.store.seed_plan holds the plan and the
rule), without the Tune run that adds seeds (orchestrator.running.seed_target), so
reading them loads neither Ray nor torch.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from analysis.query import open_results, run_sql_file, sql_file
from orchestrator.store.seed_plan import (
    GroupState,
    design_groups,
    design_labels,
    saved_target,
    state_of,
    widest_comparisons,
)
from orchestrator.studies.seed_spec import SEED_METRICS, SeedTarget
from results_contract.layout import list_studies

if TYPE_CHECKING:  # `lg-study status` reads plans without loading torch (lengthgen's model)
    from lengthgen import TrialConfig
    from orchestrator.studies.study import Study


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


def saved_states(results_root: Path, study: str) -> tuple[SeedTarget, list[GroupState]] | None:
    """The target a run of ``study`` left and where its groups stand; None if none."""
    saved = saved_target(results_root, study)
    if saved is None:
        return None
    target, labels = saved
    return target, group_states(results_root, study, target, labels)


def seed_states(
    results_root: Path, study: str, loaded: Study | None = None
) -> tuple[SeedTarget, list[GroupState]] | None:
    """Where the groups of a `seeds.until` study stand: by the ``loaded`` study's own
    target and design when it has one, else by what its last run left; None if none."""
    if loaded is not None and loaded.spec.seeds.until is not None:
        target = loaded.spec.seeds.until
        return target, group_states(results_root, study, target, design_labels(loaded))
    return saved_states(results_root, study)
