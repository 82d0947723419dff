"""A trial's accuracy plot: drawn by its worker as it finishes, into its artifact folder
(`leave_accuracy_plot`), and by the driver for a run made from rows alone, handed to the
MLflow writers (orchestrator.mlflow_tracking.handed), which draw nothing themselves.

Drawn by the driver for every trial, it was 30 % of the driver's time per trial in a
study of one-step trials (py-spy), the driver being the one process every trial waits on.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from orchestrator.mlflow_tracking.run_artifacts import PLOT_FILE
from results_contract.layout import artifact_folder


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
