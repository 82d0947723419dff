"""The files attached to a trial's MLflow run when it ends, made from its results:
its resolved config, its accuracy by length at its last evaluation, and the files its
worker left in its artifact folder.

The worker draws the accuracy plot as it finishes (``leave_accuracy_plot``): drawn by
the driver, it was 30 % of the driver's time per trial in a study of one-step trials
(py-spy), the driver being the one process every trial waits on. A run synced from
rows alone (a re-sync, a trial whose worker left no plot) has it drawn here."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from results_contract.layout import artifact_folder

CONFIG_FILE = "config.yaml"
PLOT_FILE = "accuracy_vs_length.png"


def run_artifacts(
    root: Path,
    study: str,
    trial_id: str,
    config: Mapping[str, Any],
    eval_rows: Sequence[Mapping[str, Any]],
    folder: Path,
) -> dict[str, Path]:
    """Name in the run -> local file, the made ones written into ``folder``."""
    folder = Path(folder)
    config_file = folder / CONFIG_FILE
    config_file.write_text(yaml.safe_dump(dict(config), sort_keys=False))
    artifacts = {CONFIG_FILE: config_file}
    left = artifact_folder(root, study, trial_id)
    if not (left / PLOT_FILE).is_file():
        plot = accuracy_plot(trial_id, config, eval_rows, folder / PLOT_FILE)
        if plot is not None:
            artifacts[PLOT_FILE] = plot
    for path in sorted(left.glob("*")) if left.is_dir() else []:
        if path.is_file() and not path.name.startswith("."):
            artifacts[path.name] = path
    return artifacts


def leave_accuracy_plot(root: Path, study: str, trial_id: str, config: Mapping[str, Any],
                        eval_rows: Sequence[Mapping[str, Any]]) -> Path | None:
    """Draw the trial's accuracy plot into its artifact folder, whole or not at all (a
    worker killed while drawing leaves no half file for its run to attach)."""
    folder = artifact_folder(root, study, trial_id)
    folder.mkdir(parents=True, exist_ok=True)
    drawing = folder / f".tmp-{os.getpid()}-{PLOT_FILE}"  # a dot file: no run attaches it
    try:
        drawn = accuracy_plot(trial_id, config, eval_rows, drawing)
        return drawn and drawn.replace(folder / PLOT_FILE)
    finally:
        drawing.unlink(missing_ok=True)


def accuracy_plot(
    trial_id: str, config: Mapping[str, Any], eval_rows: Sequence[Mapping[str, Any]], path: Path
) -> Path | None:
    """Accuracy against length at the trial's last evaluation, the training range
    shaded; None without an evaluation."""
    if not eval_rows:
        return None
    from analysis.plots import accuracy_vs_length  # matplotlib: only when a run ends

    last = max(row["step"] for row in eval_rows)
    points = sorted((row["digits"], row["accuracy"]) for row in eval_rows if row["step"] == last)
    try:
        train_max = int(config["task"]["train_digits"][1])
    except (TypeError, KeyError, IndexError, ValueError):
        train_max = 0  # unknown training range: plot without the band
    return accuracy_vs_length(
        [digits for digits, _ in points],
        [accuracy for _, accuracy in points],
        train_max,
        title=f"trial {trial_id}",
        path=path,
    )
