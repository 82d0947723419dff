"""The Ray Tune trainable: one trial, in a Ray worker process.

A plain function (STYLE.md 7): it trains with lengthgen, forwards reports to
`tune.report` at the trial's logging rate, checkpoints at evaluation steps,
resumes from `tune.get_checkpoint()`, and writes the trial's Parquet files. The
trials row is written last, so "done" in `trials` means every table is there.
"""

from __future__ import annotations

import tempfile
import traceback
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pydantic
import torch
from ray import tune

from lengthgen import Report, TrialConfig, train
from lengthgen.training import resolve_device
from orchestrator.results_store import write_trial_table
from orchestrator.trial_rows import result_rows, trials_row

CHECKPOINT_FILE = "trial_state.pt"
TRIAL_CONFIG = pydantic.TypeAdapter(TrialConfig)


def report_metrics(report: Report) -> dict[str, Any]:
    """A lengthgen report as the flat metrics dict Tune and MLflow receive."""
    metrics: dict[str, Any] = {"step": report.step, "status": report.status}
    if report.train is not None:
        metrics.update(loss=report.train.loss, lr=report.train.lr, tokens=report.train.tokens)
    for result in report.eval:
        metrics[f"acc/digits_{result.digits:03d}"] = result.accuracy
    for key, value in report.summary.items():
        metrics[f"summary/{key}"] = value
    return metrics


def run_trial(tune_config: dict[str, Any]) -> None:
    params = tune_config["trial"]
    config = TRIAL_CONFIG.validate_python(params["config"])
    study, root = params["study"], Path(params["results_root"])
    torch.set_num_threads(max(1, int(params["threads"])))
    device = str(resolve_device(params.get("device")))
    started_at = datetime.now(timezone.utc)
    write_trial_table(root, study, "trials", config.trial_id,
                      [trials_row(study, config, "running", device, started_at)])

    resume_state = None
    checkpoint = tune.get_checkpoint()
    if checkpoint is not None:
        with checkpoint.as_directory() as folder:
            resume_state = torch.load(Path(folder) / CHECKPOINT_FILE, weights_only=False)

    def on_report(report: Report) -> None:
        if report.checkpoint is None or report.final:
            tune.report(report_metrics(report))
            return
        with tempfile.TemporaryDirectory() as folder:
            torch.save(report.checkpoint(), Path(folder) / CHECKPOINT_FILE)
            tune.report(report_metrics(report), checkpoint=tune.Checkpoint.from_directory(folder))

    try:
        result = train(config, on_report=on_report, resume_state=resume_state, device=device)
    except Exception:
        write_trial_table(root, study, "trials", config.trial_id, [
            trials_row(study, config, "failed", device, started_at,
                       datetime.now(timezone.utc), error=traceback.format_exc(limit=5))
        ])
        raise
    for table, rows in result_rows(result).items():
        write_trial_table(root, study, table, config.trial_id, rows)
    error = None
    if result.status == "diverged":
        error = f"non-finite loss at step {result.diverged_at}; last finite loss {result.last_finite_loss}"
    write_trial_table(root, study, "trials", config.trial_id, [
        trials_row(study, config, result.status, result.device, started_at,
                   datetime.now(timezone.utc), result.n_params, error)
    ])
