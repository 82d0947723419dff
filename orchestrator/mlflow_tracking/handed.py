"""What the code that runs a study hands its MLflow writers: the answers they log and
never work out themselves, since the analysis (its SQL, its plots) is no room of theirs
(tests/test_imports.py). orchestrator.running.group_answers makes it for a study."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.mlflow_tracking.group_runs import GroupNumbers

#: (trial id, its config, its eval rows, the file to draw into) -> the file, or None
#: without an evaluation: a trial's accuracy against length at its last evaluation
PlotDrawer = Callable[[str, Mapping[str, Any], Sequence[Mapping[str, Any]], Path], "Path | None"]


@dataclass
class Handed:
    #: every group's numbers over its seeds as the analysis answers them when called
    group_numbers: Callable[[], list[GroupNumbers]] | None = None
    #: group id -> its parent run's name, the group's short label among the study's
    group_names: Mapping[str, str] = field(default_factory=dict)
    #: draws the accuracy plot of a run made from rows alone (the worker left none)
    accuracy_plot: PlotDrawer | None = None
