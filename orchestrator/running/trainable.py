"""The Ray Tune trainable: one trial, in a Ray worker process.

A plain function: it trains with lengthgen, forwards reports to `tune.report` at the
trial's logging rate, and keeps the trial's Parquet files, the trial's one log. The
trials row is written first as `running` (with the node and process it runs on) and
last with the outcome, so "done" in `trials` means every table is there. At every
evaluation step it writes the trial's `train` and `eval` rows so far, then its
checkpoint, and reports ROWS_WRITTEN, upon which the driver brings the trial's MLflow
run up to date from those rows (orchestrator.mlflow_tracking.mlflow_sync).

Checkpoints live in the study's own store, ``<results>/<study>/_checkpoints/
<trial_id>.pt``, keyed by trial id rather than by Tune experiment: each `lg-study
run` is a new Tune experiment over the trials still to do, so a Tune checkpoint
would be lost with the experiment that made it, while this file is found by the
retry of a crashed worker (within a run) and by the next run after an
interruption (across runs) alike. It holds the model, the optimizer and where the
data stands (step, phase, tokens, wall time), in plain tensors, dicts, lists,
numbers and strings; it is written atomically, after the rows of its step, and is
loaded with ``weights_only=True``. A resumed trial takes its history up to the
checkpoint's step from the rows (resume_history). A finished (done or diverged)
trial removes it.
"""

from __future__ import annotations

import os
import pickle
import sys
import traceback
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import ray
import torch
from ray import tune

from lengthgen import Report, TrialConfig, train
from lengthgen.science import changes_since
from lengthgen.seed_batch import train_seed_batch
from lengthgen.training import resolve_device
from orchestrator.running.seed_batches import BATCH, members
from orchestrator.running.trial_plots import leave_accuracy_plot
from orchestrator.store.provenance import provenance
from orchestrator.store.results_store import (
    read_trial_rows,
    read_trial_statuses,
    write_trial_table,
)
from orchestrator.store.storage_faults import StorageFault, fault_of, root_gone
from orchestrator.store.trial_rows import history_rows, result_rows, rows_history, trials_row
from orchestrator.studies.config_paths import TRIAL_CONFIG
from orchestrator.studies.metric_names import LONG_LOSS, eval_metrics, train_metrics
from results_contract.layout import artifact_folder, checkpoint_path
from results_contract.trial_status import ENDED, TrialStatus

#: the key of a Tune result that says the worker has just written the trial's rows
#: (read by orchestrator.running.mlflow_callback)
ROWS_WRITTEN = "rows_written"
#: the key of a Tune result naming the seed-trial it reports (read by
#: orchestrator.running.point_pruning: a seed batch reports all its seeds through one Tune trial)
TRIAL_KEY = "lg_trial_id"


def report_metrics(report: Report) -> dict[str, Any]:
    """A lengthgen report as the flat metrics dict Tune receives (named as MLflow names them)."""
    metrics: dict[str, Any] = {"step": report.step, "status": report.status}
    if report.train is not None:
        metrics.update(train_metrics(asdict(report.train)), tokens=report.train.tokens)
    if report.eval:
        metrics.update(eval_metrics(report.eval))
    if report.long_loss is not None:
        metrics[LONG_LOSS] = report.long_loss
    return metrics


def save_checkpoint(path: Path, state: dict) -> None:
    """Write atomically: a reader (or a crash) never sees half a checkpoint."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as file:
            torch.save(state, file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def load_checkpoint(path: Path, config: TrialConfig) -> dict | None:
    """The trial's last checkpoint, or None (none yet, unreadable, or another config's)."""
    if not path.exists():
        return None
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except (RuntimeError, OSError, EOFError, ValueError, pickle.UnpicklingError) as error:
        # a damaged file costs the trial its progress, not the trial
        print(f"lg-study: ignoring unreadable checkpoint {path}: {error}", file=sys.stderr)
        return None
    if not isinstance(state, dict) or state.get("config") != config.to_dict():
        print(f"lg-study: ignoring checkpoint {path}: it is not this trial's", file=sys.stderr)
        return None
    if changes_since(state.get("science_version"), config):
        print(f"lg-study: ignoring checkpoint {path}: science version {state.get('science_version')} made it, "
              f"and a later change moves this trial's numbers (lengthgen/science.py)", file=sys.stderr)
        return None
    return state


def resume_history(root: Path, study: str, trial_id: str, state: dict) -> dict | None:
    """The history ``train(resume_state=...)`` continues: the trial's rows up to the
    checkpoint's step. The checkpoint is written after the rows of its step, so they
    are there; rows of later steps (written before an interruption) are dropped, as
    the trial trains those steps again. None when the rows do not reach the
    checkpoint's evaluation (a damaged file). A checkpoint of the previous version
    carries its history itself."""
    if "history" in state:
        return state["history"]
    train_rows = read_trial_rows(root, study, "train", trial_id)
    eval_rows = read_trial_rows(root, study, "eval", trial_id)
    if not any(row["step"] == state["step"] for row in eval_rows):
        return None
    return rows_history(train_rows, eval_rows, state["step"])


def write_history(root: Path, study: str, trial_id: str, history: dict) -> None:
    """Replace the trial's `train` and `eval` rows by those of ``history``."""
    for table, rows in history_rows(history).items():
        write_trial_table(root, study, table, trial_id, rows)


def where_it_runs() -> dict[str, Any]:
    """trials columns naming the Ray node and process of this attempt (its host and
    environment: orchestrator.store.provenance)."""
    node = ray.get_runtime_context().get_node_id() if ray.is_initialized() else None
    return {"node": node, "pid": os.getpid()}


def save_attention_biases(root: Path, study: str, trial_id: str, biases: dict) -> Path:
    """The ABC bias matrices (000 §5) of one trial as an .npz, written atomically."""
    import numpy as np

    folder = artifact_folder(root, study, trial_id)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "attention_biases.npz"
    temporary = folder / f".attention_biases.{os.getpid()}.tmp.npz"
    np.savez(temporary, **{name.replace("/", "__"): array for name, array in biases.items()})
    os.replace(temporary, path)
    return path


def still_there(root: Path, study: str) -> None:
    """Raise StorageFault ("gone") when the study's folder, or the driver's lock file
    beside it, both made before any trial started, is no longer there: the results
    folder was deleted or unmounted (Tune's driver may have made some of its folders
    again since). The writes would otherwise make its folders again (on the disk under
    the mount point, or in a deleted folder's place) and the rows would land where no
    one looks."""
    if not (root / study).is_dir() or root_gone(root, strict=True):
        raise StorageFault("gone", str(root / study), "the study's folder is no longer there")


def run_trial(tune_config: dict[str, Any]) -> None:
    """The trial of ``tune_config["trial"]`` (tune_runner.trial_params), or the seed batch of
    trials it names (orchestrator.running.seed_batches), trained and written. A write
    that meets a full disk or a read-only or vanished results folder raises StorageFault
    (orchestrator.store.storage_faults), whatever the step: the driver stops the study
    rather than retrying, and the trial, left `running`, resumes from its last
    checkpoint once the disk has room."""
    params = tune_config["trial"]
    try:
        _train_trial(params)
    except Exception as error:
        fault = fault_of(error, Path(params["results_root"]))
        if fault is None:
            raise
        raise fault from error


def _train_trial(params: dict[str, Any]) -> None:
    torch.set_num_threads(max(1, int(params["threads"])))
    device = str(resolve_device(params.get("device")))
    if BATCH in params:
        run_seed_batch(params, device)
        return
    work = TrialWork(params, device)
    work.start()
    try:
        result = train(work.config, on_report=work.on_report, resume_state=work.resume_state, device=device)
    except Exception as error:
        work.failed(error)
        raise
    work.finish(result)


class TrialWork:
    """One trial's side of a worker: its checkpoint, its rows and its `trials` row. The
    trials row is written first as `running`, last with the outcome; at every
    evaluation the rows so far, then the checkpoint. `batch`: (seeds in the batch, this
    seed's slot) when it trains in a seed batch, recorded with its provenance."""

    def __init__(self, params: dict[str, Any], device: str, batch: tuple[int, int] | None = None) -> None:
        self.config = config = TRIAL_CONFIG.validate_python(params["config"])
        self.study, self.root, self.device = params["study"], Path(params["results_root"]), device
        self.started_at = datetime.now(timezone.utc)
        self.saved = checkpoint_path(self.root, self.study, config.trial_id)
        self.resume_state = self._resume_state()
        self.attempt = {
            **where_it_runs(),
            **provenance(device, config.train.deterministic, config.train.precision),
            "resumed_from_step": self.resume_state["step"] if self.resume_state else None,
        }
        if batch is not None:
            # a batched seed is a numerical replicate of its solo run: another environment
            self.attempt["environment"] += f"; seed batch of {batch[0]}"
            self.attempt.update(seeds_per_trial=batch[0], seed_slot=batch[1])
        self.label = params["group_label"]  # what sets its group apart within the study (Study.group_label)

    def _resume_state(self) -> dict | None:
        config, saved = self.config, self.saved
        resume_state = load_checkpoint(saved, config)
        if resume_state is not None:
            resume_state["history"] = resume_history(self.root, self.study, config.trial_id, resume_state)
            if resume_state["history"] is None:
                # without its rows the trial's history would have a gap: it starts over
                print(f"lg-study: ignoring checkpoint {saved}: the trial's rows do not reach its step",
                      file=sys.stderr)
                return None
            write_history(self.root, self.study, config.trial_id, resume_state["history"])  # cut back to it
        return resume_state

    def row(self, status: str, **more: Any) -> list[dict[str, Any]]:
        return [{**trials_row(self.study, self.config, status, self.device, self.started_at, group_label=self.label,
                              **more), **self.attempt}]

    def start(self) -> None:
        still_there(self.root, self.study)
        write_trial_table(self.root, self.study, "trials", self.config.trial_id, self.row(TrialStatus.RUNNING))

    def on_report(self, report: Report) -> None:
        written = report.checkpoint is not None and not report.final
        if written:
            still_there(self.root, self.study)
            state = report.checkpoint()
            # the rows first: the checkpoint never gets ahead of them
            write_history(self.root, self.study, self.config.trial_id, state.pop("history"))
            save_checkpoint(self.saved, state)
        tune.report({**report_metrics(report), ROWS_WRITTEN: written, TRIAL_KEY: self.config.trial_id})

    def failed(self, error: Exception) -> None:
        """The `failed` row after `error`, unless it was a storage fault: then the row would
        not fit either, and the trial was interrupted."""
        if fault_of(error, self.root) is not None:
            return
        write_trial_table(self.root, self.study, "trials", self.config.trial_id, self.row(
            TrialStatus.FAILED, finished_at=datetime.now(timezone.utc), error=traceback.format_exc(limit=5)))

    def finish(self, result) -> None:
        root, study, config = self.root, self.study, self.config
        still_there(root, study)
        tables = result_rows(result)
        for table, rows in tables.items():
            write_trial_table(root, study, table, config.trial_id, rows)
        if result.attention_biases:
            save_attention_biases(root, study, config.trial_id, result.attention_biases)
        leave_accuracy_plot(root, study, config.trial_id, config.to_dict(), tables["eval"])
        error = None
        if result.status == TrialStatus.DIVERGED:
            error = f"non-finite loss at step {result.diverged_at}; last finite loss {result.last_finite_loss}"
        write_trial_table(root, study, "trials", config.trial_id, [{
            **trials_row(study, config, result.status, result.device, self.started_at,
                         datetime.now(timezone.utc), result.n_params, error, group_label=self.label),
            **self.attempt,
            "diverged_at": result.diverged_at,
            "last_finite_loss": result.last_finite_loss,
        }])
        self.saved.unlink(missing_ok=True)


def run_seed_batch(params: dict[str, Any], device: str) -> None:
    """The seeds of a batch still to finish (a retried batch skips those that finished),
    trained together: those resuming from checkpoints of one step as one seed batch,
    so a worker killed between two seeds' checkpoints resumes every seed where it was."""
    seeds = members(params)
    statuses = read_trial_statuses(Path(params["results_root"]), params["study"])
    works = [TrialWork(seed, device, (len(seeds), slot)) for slot, seed in enumerate(seeds)
             if statuses.get(seed["trial_id"]) not in ENDED]
    for work in works:
        work.start()
    by_step: dict[int, list[TrialWork]] = {}
    for work in works:
        by_step.setdefault((work.resume_state or {}).get("step", 0), []).append(work)
    for _, batch in sorted(by_step.items()):
        try:
            results = train_seed_batch([w.config for w in batch], on_report=lambda k, r, b=batch: b[k].on_report(r),
                                       resume_states=[w.resume_state for w in batch], device=device)
        except Exception as error:
            for work in batch:
                work.failed(error)
            raise
        for work, result in zip(batch, results, strict=True):
            work.finish(result)
