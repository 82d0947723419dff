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
at `max`. With `plan: true` a group fitted on its trials so far (crossed, or one data
seed and several weight seeds) jumps to the first round that holds the weight seeds
seed planning asks for (`planned_seeds`). The same function gives `lg-study status` and
`lg-study report` their rows.

The plan lives in orchestrator.store.seed_plan and each group's state in
orchestrator.running.seed_answers (status and the report
read them without loading Ray); this module runs the rounds.

Resuming: the plan is recomputed from the trials rows. A group's seeds that have a row
(any status) are planned again, rounded up to the round they belong to, so an
interrupted round is completed with the same seeds before the rule is asked again, and
a trial is never trained twice (its id is its config; run_trials skips finished ids).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from analysis.one_way_planning import OneWayFit, plan_one_way
from analysis.query import open_results, run_sql_file, sql_file
from analysis.seed_planning import PilotFit, plan
from orchestrator.running.run_context import RunContext, RunSummary
from orchestrator.running.seed_answers import group_states, planned_counts
from orchestrator.running.tune_runner import run_trials
from orchestrator.store.results_store import read_trial_statuses
from orchestrator.store.seed_plan import (
    ADDING,
    GroupDesign,
    GroupState,
    design_groups,
    design_labels,
    save_target,
)
from orchestrator.store.study_locks import SEEDS_LOCK, check_not_busy, study_lock
from orchestrator.studies.seed_spec import SeedTarget
from orchestrator.studies.study import Study
from results_contract.trial_status import FINISHED

# --- the run -----------------------------------------------------------------------------


def run_until_target(study: Study, context: RunContext) -> RunSummary:
    """Run the study in rounds until every group's target holds or it has `max` seeds;
    return the rounds' RunSummary added up. Stops after a round with failed trials (a
    re-run retries them) or an interruption. Raises StudyBusy as run_trials does."""
    target = study.spec.seeds.until
    results_root = context.results_root
    check_not_busy(results_root, study.name, SEEDS_LOCK)
    designs = design_groups(study.trials)
    with study_lock(results_root, study.name, SEEDS_LOCK):
        if context.restart:  # deletes the study's results and MLflow runs
            run_trials(dataclasses.replace(study, trials=[], axis_values=[]), context)
        labels = design_labels(study)
        save_target(results_root, study.name, target, labels)
        before = read_trial_statuses(results_root, study.name)
        counts = planned_counts(study, results_root)
        summary = RunSummary(total=0, skipped=0)
        while True:
            trials = [t for gid, d in designs.items() for t in d.configs(counts[gid])]
            batch = run_trials(dataclasses.replace(study, trials=trials, axis_values=[]), context.continuing())
            summary.add_batch(batch)
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
    """With `plan: true`, group_id -> the weight seeds that seed planning needs for the
    target, fitted on the group's trials so far at the target's length, or `max` where
    no count up to it does: a crossed group (analysis/seed_planning.py) at the design's
    data seeds, a group of one data seed and several weight seeds as a one-way pilot
    (analysis/one_way_planning.py, the data order held as the design holds it). Groups
    that cannot be fitted yet (one weight seed, or a target a one-way pilot cannot plan:
    the weight share) are left out: they grow by `step`."""
    adding = {s.group_id for s in states if s.state == ADDING}
    if not target.plan or not adding:
        return {}
    with open_results(results_root, study) as con:
        crossed = run_sql_file(con, sql_file("lucky_tickets.sql"), {"resamples": "2"}).to_pylist()
        one_way = run_sql_file(con, sql_file("one_way_pilots.sql"), {"digits": str(target.digits)}).to_pylist()
    threshold = target.threshold if target.threshold is not None else 0.9
    wanted = {}
    for row in {r["group_id"]: r for r in crossed if r["group_id"] in adding}.values():
        try:
            fit = PilotFit.from_lucky_row(row, target.digits)
            found = plan(fit, target.metric, target.half_width, len(designs[row["group_id"]].templates),
                         threshold, max_weight_seeds=target.max)
        except ValueError:
            continue
        wanted[row["group_id"]] = found.weight_seeds or target.max
    one_way = [r for r in one_way if r["group_id"] in adding - set(wanted)
               and r["at_digits"] == target.digits and r["varied"] == "weight"]
    for row in one_way:
        try:
            found = plan_one_way(OneWayFit.from_row(row), target.metric, target.half_width, threshold,
                                 max_seeds=target.max)
        except ValueError:
            continue
        wanted[row["group_id"]] = found.seeds or target.max
    return wanted
