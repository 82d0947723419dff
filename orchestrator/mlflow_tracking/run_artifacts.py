"""The files attached to a trial's MLflow run when it ends, made from its results:
its resolved config, its accuracy by length at its last evaluation, and the files its
worker left in its artifact folder."""

from __future__ import annotations

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
    plot = accuracy_plot(trial_id, config, eval_rows, folder / PLOT_FILE)
    if plot is not None:
        artifacts[PLOT_FILE] = plot
    left = artifact_folder(root, study, trial_id)
    for path in sorted(left.glob("*")) if left.is_dir() else []:
        if path.is_file() and not path.name.startswith("."):
            artifacts[path.name] = path
    return artifacts


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
