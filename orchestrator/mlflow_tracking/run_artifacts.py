"""The files attached to a trial's MLflow run when it ends, made from its results:
its resolved config, its accuracy by length at its last evaluation, and the files its
worker left in its artifact folder.

The worker draws the accuracy plot as it finishes (orchestrator.running.trial_plots).
A run synced from rows alone (a re-sync, a trial whose worker left no plot) has it
drawn by the drawer the driver hands over: the plots are the analysis's, no room of
the writers'."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from results_contract.layout import artifact_folder

if TYPE_CHECKING:
    from orchestrator.mlflow_tracking.handed import PlotDrawer

CONFIG_FILE = "config.yaml"
PLOT_FILE = "accuracy_vs_length.png"


def run_artifacts(
    root: Path,
    study: str,
    trial_id: str,
    config: Mapping[str, Any],
    eval_rows: Sequence[Mapping[str, Any]],
    folder: Path,
    draw: PlotDrawer | None = None,
) -> dict[str, Path]:
    """Name in the run -> local file, the made ones written into ``folder``; the
    accuracy plot ``draw`` draws when the worker left none (none without it)."""
    folder = Path(folder)
    config_file = folder / CONFIG_FILE
    config_file.write_text(yaml.safe_dump(dict(config), sort_keys=False))
    artifacts = {CONFIG_FILE: config_file}
    left = artifact_folder(root, study, trial_id)
    if draw is not None and not (left / PLOT_FILE).is_file():
        plot = draw(trial_id, config, eval_rows, folder / PLOT_FILE)
        if plot is not None:
            artifacts[PLOT_FILE] = plot
    for path in sorted(left.glob("*")) if left.is_dir() else []:
        if path.is_file() and not path.name.startswith("."):
            artifacts[path.name] = path
    return artifacts
