"""The one entry for running a study, whatever its file asks for: a grid's trials, a
search's points (orchestrator.running.search) or a seed target's rounds
(orchestrator.running.seed_target), each a runner taking the study and its RunContext."""

from __future__ import annotations

import enum
from collections.abc import Callable

from orchestrator.running.run_context import RunContext, RunSummary
from orchestrator.running.search import run_search
from orchestrator.running.seed_target import run_until_target
from orchestrator.running.tune_runner import run_trials
from orchestrator.studies.study import Study


class RunKind(enum.Enum):
    GRID = "grid"
    SEARCH = "search"
    SEEDS_UNTIL = "seeds until a target"


RUNNERS: dict[RunKind, Callable[[Study, RunContext], RunSummary]] = {
    RunKind.GRID: run_trials,
    RunKind.SEARCH: run_search,
    RunKind.SEEDS_UNTIL: run_until_target,
}


def run_kind(study: Study) -> RunKind:
    """What the study file asks for: a `search` block, a `seeds.until` target (load_study
    refuses the two together) or, without either, its grid."""
    if study.spec.search is not None:
        return RunKind.SEARCH
    if study.spec.seeds.until is not None:
        return RunKind.SEEDS_UNTIL
    return RunKind.GRID


def run_study(study: Study, context: RunContext) -> RunSummary:
    """Run the study by its kind's runner; re-running resumes it. A search returns a
    SearchSummary (a RunSummary with its points)."""
    return RUNNERS[run_kind(study)](study, context)
