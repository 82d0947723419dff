"""What the code that runs a study hands its MLflow writers: the answers they log and
never work out themselves, since the analysis (its SQL, its plots) is no room of theirs
(tests/test_imports.py). orchestrator.running.group_answers makes it for a study."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.mlflow_tracking.group_runs import GroupNumbers

#: (trial id, its config, its eval rows, the file to draw into) -> the file, or None
#: without an evaluation: a trial's accuracy against length at its last evaluation
PlotDrawer = Callable[[str, Mapping[str, Any], Sequence[Mapping[str, Any]], Path], "Path | None"]
#: (group ids, the folder to draw into) -> group id -> the figure's name -> its file
FiguresDrawer = Callable[[Collection[str], Path], Mapping[str, Mapping[str, Path]]]


@dataclass
class Handed:
    #: the groups' numbers over their seeds as the analysis answers them when called:
    #: every group's, or with trial ids those of their groups alone
    group_numbers: Callable[[Collection[str] | None], list[GroupNumbers]] | None = None
    #: group id -> its parent run's name, the group's short label among the study's
    group_names: Mapping[str, str] = field(default_factory=dict)
    #: draws the accuracy plot of a run made from rows alone (the worker left none)
    accuracy_plot: PlotDrawer | None = None
    #: draws the groups' figures of the report, for their parent runs
    group_figures: FiguresDrawer | None = None
