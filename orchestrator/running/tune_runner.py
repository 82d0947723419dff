"""Run a study's trials with Ray Tune: the only module that starts Ray.

Finished trials (status done or diverged in the `trials` table) are not run
again, so re-running a study resumes it. MLflow is written from the driver only, by
its MLflow thread (orchestrator.mlflow_tracking.syncer), which `MlflowTuneCallback`
tells of trials whose rows changed; progress is drawn by `ProgressCallback`.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import logging
import os
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import ray
from ray import tune
from ray.tune.logger import CSVLoggerCallback, JsonLoggerCallback
from ray.tune.stopper import CombinedStopper
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from lengthgen import TrialConfig
from orchestrator.mlflow_tracking.syncer import END_FIGURES_SHARE, MlflowSyncer
from orchestrator.running.auto_seeds import auto_batch_size
from orchestrator.running.driver_memory import DriverMemoryCallback
from orchestrator.running.group_answers import handed
from orchestrator.running.mlflow_callback import MlflowTuneCallback
from orchestrator.running.point_pruning import PointPruner
from orchestrator.running.recovery import (
    StorageFaultStop,
    TrialFailureCallback,
    stop_on_sigterm,
    wipe_study,
)
from orchestrator.running.run_context import RunContext, RunSummary
from orchestrator.running.seed_batches import members, seed_batches
from orchestrator.running.trainable import run_trial
from orchestrator.running.trial_list import TrialList, pending_like_a_grid
from orchestrator.store.compaction import compact_after_run, extract_trials
from orchestrator.store.results_store import read_trial_statuses, remove_temp_files
from orchestrator.store.reuse import REUSED_FROM, finished_elsewhere, reuse_trials
from orchestrator.store.science_versions import (
    SCIENCE_VERSION,
    StaleScience,
    set_aside,
    stale_trials,
    superseded_run_tags,
    version_name,
)
from orchestrator.store.study_locks import check_not_busy, study_lock
from orchestrator.store.trial_rows import add_group_columns
from orchestrator.studies.study import Study
from results_contract.groups import run_name
from results_contract.layout import TUNE
from results_contract.trial_status import ENDED, TrialStatus

#: trials whose finishing times set the ETA: the recent rate, not the start-up's
ETA_WINDOW = 50


def eta_seconds(finishes: list[float], started: float, remaining: int) -> float:
    """Seconds left for ``remaining`` trials at the rate of the last finishes (up to
    ETA_WINDOW of them); from the start while fewer than 3 have finished. Since the
    start alone, the workers' start-up (seconds) weighs on every trial: the first
    of 1,000 one-step trials read 4,696 s for a run that took 160 s."""
    if len(finishes) < 3:
        return (finishes[-1] - started) / len(finishes) * remaining if finishes else float("nan")
    return (finishes[-1] - finishes[0]) / (len(finishes) - 1) * remaining


class ProgressCallback(tune.Callback):
    """Trials done / running / failed with an ETA, drawn with rich in the driver."""

    def __init__(self, progress: Progress, total: int, stop: StorageFaultStop | None = None) -> None:
        self.progress = progress
        self.total = total
        self.stop = stop
        self.task = progress.add_task("trials", total=total)
        #: Tune trial -> the seeds it trains (one, or a seed batch's)
        self.running: dict[str, int] = {}
        self.done = self.failed = 0
        self.started = time.perf_counter()
        self.finishes: collections.deque[float] = collections.deque(maxlen=ETA_WINDOW + 1)

    def __getstate__(self) -> dict:
        # Tune pickles callbacks into its experiment file; a live display is not picklable.
        return {**self.__dict__, "progress": None}

    def _refresh(self, finished: str | None = None) -> None:
        if self.progress is None:
            return
        status = f"running {sum(self.running.values())}  done {self.done}  failed {self.failed}"
        self.progress.update(self.task, completed=self.done + self.failed, description=status)
        if finished and not self.progress.console.is_terminal:
            # no live bar in a log file: one line per finished trial instead
            now = time.perf_counter()
            self.finishes.append(now)
            elapsed = now - self.started
            count = self.done + self.failed
            eta = eta_seconds(list(self.finishes), self.started, self.total - count)
            self.progress.console.print(
                f"[{count}/{self.total}] {finished}; {status}; elapsed {elapsed:.0f} s, ETA {eta:.0f} s",
                highlight=False,
            )

    def on_trial_start(self, iteration, trials, trial, **info):
        self.running[trial.trial_id] = len(members(trial.config["trial"]))
        self._refresh()

    def on_trial_complete(self, iteration, trials, trial, **info):
        self.running.pop(trial.trial_id, None)
        self.done += len(members(trial.config["trial"]))
        self._refresh(f"{_named(trial)} finished")

    def on_trial_error(self, iteration, trials, trial, **info):
        self.running.pop(trial.trial_id, None)
        self.failed += len(members(trial.config["trial"]))
        self._refresh(f"{_named(trial)} failed")

    def on_trial_recover(self, iteration, trials, trial, **info):
        if self.progress is not None:
            self.progress.console.print(_recover_line(trial, self.stop), highlight=False)


def _recover_line(trial, stop: StorageFaultStop | None) -> str:
    """What became of a trial's failed attempt that Tune queued again: retried, or (a
    storage fault: ``stop`` tripped) not, as the study stops."""
    head = f"{_named(trial)}: attempt {trial.num_failures} failed"
    if stop is not None and stop.fault is not None:
        return f"{head} ({stop.fault.kind}: {stop.fault.path}); not retried: the study stops"
    return f"{head} ({_error_name(trial)}); retrying from its last checkpoint"


def _named(trial) -> str:
    """`trial <id>`, or `trials <id>, <id>, ...` of a seed batch: seeds count as trials."""
    ids = [params["trial_id"] for params in members(trial.config["trial"])]
    return f"trial{'s' * (len(ids) > 1)} {', '.join(ids)}"


def _error_name(trial) -> str:
    """What ended a trial's attempt, in a few words, from Tune's error file."""
    try:
        text = Path(trial.error_file).read_text()
    except (TypeError, OSError):
        return "unknown error"
    last = text[text.rfind("Failure #"):]
    if "worker process has died" in last or "actor died" in last:
        return "its worker process died"
    names = [line.split(":")[0].split(".")[-1] for line in last.splitlines()
             if line.split(":")[0].split(".")[-1].endswith(("Error", "Exception"))]
    return names[-1] if names else "unknown error"


def _short_error(error: BaseException) -> str:
    """Exception name and the first sentence of its last line (Ray's are paragraphs)."""
    lines = str(error).strip().splitlines()
    last = lines[-1].split(". ")[0] if lines else ""
    return f"{type(error).__name__}: {last[:200]}"


def start_ray(address: str | None, num_cpus: int | None = None, num_gpus: int | None = None) -> None:
    """Connect to `address` (or RAY_ADDRESS), else start a local Ray on this machine
    (with `num_cpus` and `num_gpus` where given, else all it finds).

    The local Ray is always a new one ("local": a plain ray.init() would join a
    cluster started here with `ray start`), listening on 127.0.0.1 only.
    """
    if ray.is_initialized():
        return
    address = address or os.environ.get("RAY_ADDRESS")
    quiet = {"include_dashboard": False, "logging_level": logging.WARNING, "log_to_driver": False}
    if address:
        ray.init(address=address, **quiet)
    else:
        _single_node_on_loopback()
        _no_idle_workers()
        ray.init(address="local", num_cpus=num_cpus, num_gpus=num_gpus, **quiet)
    # Ray's own exit hook, ray.shutdown(_exiting_interpreter=True), first waits 0.5 s for
    # worker logs on their way to the driver; log_to_driver is off, so there are none.
    # Replace it by a plain shutdown (hooks run last-registered first, should the
    # unregister find nothing).
    atexit.unregister(ray.shutdown)
    atexit.register(ray.shutdown)


def _single_node_on_loopback() -> None:
    """Make a local Ray take 127.0.0.1 as its node address, so that its servers (GCS,
    raylet, workers) listen there rather than on every interface. Ray maps 127.0.0.1
    given as the node address to the machine's network address unless multi-node
    clusters are switched off, which RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 does (read by
    Ray's processes at import, so it is also set on the already imported module)."""
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    from ray._private import ray_constants

    if hasattr(ray_constants, "ENABLE_RAY_CLUSTER"):
        ray_constants.ENABLE_RAY_CLUSTER = False


def _no_idle_workers() -> None:
    """Keep a local Ray from starting Python workers ahead of need (one per CPU when it
    starts, more when the driver connects). Tune gives its trial actors a runtime
    environment of their own (env_vars), so those workers, made for the default one,
    never run a trial: each only spends a second or more of CPU importing Ray while
    the node starts up. Read by the raylet, which inherits this environment."""
    os.environ.setdefault("RAY_enable_worker_prestart", "0")
    os.environ.setdefault("RAY_prestart_worker_first_driver", "0")


class ResourceError(ValueError):
    """The cluster can never hold one trial of the study."""


def check_resources(study: Study, results_root: Path | None = None) -> None:
    """Refuse a study whose trials need more of a resource than the whole cluster has
    (Tune would otherwise leave them pending forever), saying why in the user's terms:
    orchestrator.studies.study_scale (with the GPU rates measured under `results_root`)."""
    available = ray.cluster_resources()
    resources = study.spec.resources
    if resources.cpus_per_trial > available.get("CPU", 0) or resources.gpus_per_trial > available.get("GPU", 0):
        from orchestrator.studies.study_scale import cannot_run_words

        raise ResourceError(cannot_run_words(study, available, results_root))


def run_trials(study: Study, context: RunContext, run_tags: dict[str, dict[str, str]] | None = None,
               pruner: PointPruner | None = None) -> RunSummary:
    """Run the study's unfinished trials; see docs/reliability.md for what survives what.

    Trials done or diverged in `trials` are skipped; the others (never started,
    `running` when a run was interrupted, `failed`) run, each continuing from its
    checkpoint when it has one, or is reused when it finished in another study or
    profile under the same results folder (orchestrator.store.reuse; not with
    ``study.reuse`` False). ``context.restart`` deletes the study's results and MLflow
    runs first and trains every trial. ``run_tags`` (trial id -> tags) are added to the
    trials' MLflow runs after the run. Every MLflow write goes through the driver's
    MLflow thread (orchestrator.mlflow_tracking.syncer): a tracking server that is down
    or slow leaves the runs behind, never the training. ``pruner``: a search's
    (orchestrator.running.point_pruning), which stops the seeds of the points it prunes
    and marks them `pruned` once Tune is done. Raises StudyBusy when another driver runs
    the study.
    """
    results_root, console, restart = context.results_root, context.console, context.restart
    check_not_busy(results_root, study.name)
    statuses = {} if restart else read_trial_statuses(results_root, study.name)
    stale = _stale_or_refused(results_root, study, statuses)
    pending = [t for t in study.trials if statuses.get(t.trial_id) not in ENDED or t.trial_id in stale]
    reuse = study.reuse and not restart  # --restart trains every trial again
    reusable = finished_elsewhere(results_root, study.name, pending) if reuse else {}
    if len(pending) > len(reusable):
        # checkpoints at every evaluation are intended; Tune's warning about them is noise here
        os.environ.setdefault("TUNE_WARN_EXCESSIVE_EXPERIMENT_CHECKPOINT_SYNC_THRESHOLD_S", "0")
        # a failed attempt is one line from ProgressCallback, its error goes to `trials.error`
        os.environ.setdefault("TUNE_PRINT_ALL_TRIAL_ERRORS", "0")
        start_ray(context.address)
        check_resources(study, results_root)  # refused before anything is written
    elif not reusable and not (results_root / study.name).is_dir():
        return RunSummary(total=len(study.trials), skipped=len(study.trials))

    with study_lock(results_root, study.name):
        if restart:
            wipe_study(results_root, study.name)
        syncer = MlflowSyncer(context.tracking_uri, study.experiment, results_root, study.name,
                              say=lambda words: console.print(f"[yellow]warning:[/yellow] {words}", highlight=False),
                              handed=handed(study, results_root))
        if restart:
            syncer.job("delete_runs")
        try:
            summary = _run_locked(study, context, syncer, reusable, run_tags or {}, pruner)
        finally:
            # waits while MLflow answers; what it still owes is left for later, and the
            # groups' figures beyond a tenth of the run's time for `lg-study sync`
            lag = syncer.close(figures_share=END_FIGURES_SHARE)
        if syncer.fault is not None:
            raise syncer.fault  # a local MLflow store on a full disk
        # a finished trial's run left RUNNING (MLflow went down first) is repaired, not killed
        summary.killed_runs = [t for t in syncer.results["end_running_runs"]
                               if t not in summary.finished_before and t not in summary.pruned]
        summary.repaired_runs = [t for t in syncer.results["sync_study"] if t in summary.finished_before]
        summary.mlflow_lag = lag if lag.behind else None
        # the finished trials' files merged into a few per table, while the lock is held
        # and once the MLflow thread, which reads them, is done
        compact_after_run(results_root, study.name)
    return summary


def _run_locked(study: Study, context: RunContext, syncer: MlflowSyncer, reusable: dict[str, str],
                run_tags: dict[str, dict[str, str]], pruner: PointPruner | None) -> RunSummary:
    """run_trials under the study lock: the stale trials set aside, the reusable reused,
    the MLflow runs' repairs queued, then the pending trials run."""
    results_root, console = context.results_root, context.console
    remove_temp_files(results_root, study.name)
    _set_aside_stale(results_root, study, syncer, console)
    # rows written before the group columns, or labelled by an older rule, get today's
    # columns now, before new rows join them
    regrouped = add_group_columns(results_root, study.name, study.group_label)
    if regrouped:
        syncer.job("tag_trial_runs", {trial_id: {"group": columns["group_id"], "group_label": columns["group_label"]}
                                      for trial_id, columns in regrouped.items()})
    # re-read under the lock: the statuses a previous driver left are final now
    statuses = read_trial_statuses(results_root, study.name)
    unfinished = [t.trial_id for t in study.trials if statuses.get(t.trial_id) not in ENDED]
    reused = reuse_trials(results_root, study, {k: v for k, v in reusable.items() if k in unfinished})
    for trial_id, source in reused.items():
        console.print(f"trial {trial_id} reused: finished in {source} (--no-reuse trains it again)",
                      highlight=False)
    statuses = read_trial_statuses(results_root, study.name)
    pending = [t for t in study.trials if statuses.get(t.trial_id) not in ENDED]
    summary = RunSummary(total=len(study.trials), skipped=len(study.trials) - len(pending) - len(reused),
                         reused=reused, finished_before={t for t, s in statuses.items() if s in ENDED})
    params = {c.trial_id: trial_params(c, study, results_root) for c in study.trials}
    syncer.run_names.update({trial_id: p["run_name"] for trial_id, p in params.items()})
    syncer.job("end_running_runs")  # left by a killed driver
    # runs behind their rows (a driver died first, or MLflow was down) catch up; interrupted
    # trials' end as KILLED
    syncer.job("sync_study", sorted(params))
    if reused:  # once sync_study's trials have made their runs
        syncer.job("tag_trial_runs", {trial_id: {REUSED_FROM: source} for trial_id, source in reused.items()},
                   after=True)
    try:
        if pending:
            summary.resumed = [t.trial_id for t in pending if statuses.get(t.trial_id) is not None]
            _fit(study, [params[t.trial_id] for t in pending], results_root, syncer, console, summary, pruner)
            if pruner is not None:  # every worker of the batch has stopped: no row is written after
                summary.pruned = pruner.settle(results_root, study.name)
    finally:
        if pending:
            # trials stopped by an interruption keep `running` in `trials` (the next run
            # resumes them); their MLflow runs end as KILLED and are re-attached then
            syncer.job("end_running_runs", after=True)
        if run_tags:
            syncer.job("tag_trial_runs", run_tags, after=True)
        if summary.pruned:  # their runs end as pruned (KILLED), whatever end_running_runs made of them
            syncer.job("sync_study", summary.pruned, after=True)
    if pending:
        after = read_trial_statuses(results_root, study.name)
        summary.interrupted = [t.trial_id for t in pending if after.get(t.trial_id) not in (*ENDED, TrialStatus.FAILED)]
        summary.ran = len(pending) - len(summary.interrupted)
    return summary


def _stale_or_refused(results_root: Path, study: Study, statuses: dict[str, str]) -> dict[str, int | None]:
    """The design's finished trials whose numbers a later science change moved; raises
    StaleScience, before anything runs, unless the study retrains them."""
    stale = stale_trials(results_root, study.name, study.trials, statuses)
    if stale and not study.retrain_stale:
        raise StaleScience(study.name, stale)
    return stale


def _set_aside_stale(results_root: Path, study: Study, syncer: MlflowSyncer, console: Console) -> None:
    """With --retrain-stale: the design's trials finished under another science version
    move aside (orchestrator.store.science_versions) and train again. Under the study lock."""
    if not study.retrain_stale:  # without it, run_trials has refused any before the lock
        return
    stale = stale_trials(results_root, study.name, study.trials, read_trial_statuses(results_root, study.name))
    if stale:  # their rows leave the compacted files first, to move aside as their own files
        extract_trials(results_root, study.name, stale)
    for trial_id, version in sorted(stale.items()):
        folder = set_aside(results_root, study.name, trial_id, version)
        console.print(f"trial {trial_id}: trained under science version {version_name(version)}; retraining it "
                      f"under {SCIENCE_VERSION} (its old rows: {folder})", highlight=False)
    if stale:
        syncer.job("tag_trial_runs", {trial_id: superseded_run_tags(trial_id, version)
                                      for trial_id, version in stale.items()})


def trial_params(config: TrialConfig, study: Study, results_root: Path) -> dict[str, Any]:
    """The Tune param of one trial: everything its worker and the driver callbacks read."""
    resources = study.spec.resources
    return {
        "trial_id": config.trial_id,
        "study": study.name,
        "config": config.to_dict(),
        # the worker writes it into `trials` (with group_id), whence the MLflow tags
        "group_label": study.group_label(config),
        # its MLflow run's name: the group's short label among the study's, and its seeds
        "run_name": run_name(config.to_dict(), study.short_label(config)),
        "results_root": str(results_root),
        "threads": max(1, int(resources.cpus_per_trial)),
        "device": "cuda" if resources.gpus_per_trial > 0 else "cpu",
    }


class _TuneRestoreHints(logging.Filter):
    """Drops Tune's advice to resume with Tuner.restore and its complaint about the
    metrics of trials that never started (re-running `lg-study run` is how to resume),
    and its list of failed trials (the run's summary has them)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not any(noise in message for noise in (
            "Tuner.restore", "Failed to fetch metrics", "Trials did not complete"))


@contextlib.contextmanager
def _without_tune_restore_hints():
    loggers = [logging.getLogger(n) for n in ("ray.tune.tune", "ray.tune.analysis.experiment_analysis")]
    hint_filter = _TuneRestoreHints()
    for logger in loggers:
        logger.addFilter(hint_filter)
    try:
        yield
    finally:
        for logger in loggers:
            logger.removeFilter(hint_filter)


def _tune_file_loggers() -> list[tune.Callback]:
    """Tune's default per-trial files (result.json, progress.csv, which its result
    analysis reads) without its TensorBoard event files: their logger imports
    tensorboardX in the driver, 1-1.7 s of every run here, for event files that
    lg-study does not read (MLflow is its UI). TUNE_DISABLE_AUTO_CALLBACK_LOGGERS=0
    brings TensorBoard back."""
    os.environ.setdefault("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", "1")
    return [CSVLoggerCallback(), JsonLoggerCallback()]


def _fit(study: Study, trials: list[dict[str, Any]], results_root: Path, syncer: MlflowSyncer,
         console: Console, summary: RunSummary, pruner: PointPruner | None = None) -> None:
    resources = study.spec.resources
    run_name = f"{study.name}-{datetime.now(timezone.utc):%Y%m%dT%H%M%S}"
    started = time.perf_counter()
    # one Tune trial per trial or per seed batch; `auto` reads the memory where trials run, once
    size = resources.seeds_per_trial if resources.seeds_per_trial != "auto" else auto_batch_size(study, len(trials), console)
    units = seed_batches(trials, size)
    # a live bar prints what Python writes to stdout/stderr above itself, unless those go
    # elsewhere than the bar (a log file: orchestrator.console.terminal)
    shared = console.file is sys.stderr
    with Progress(
        SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
        TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(), console=console,
        redirect_stdout=shared, redirect_stderr=shared,
    ) as progress:
        stop = StorageFaultStop()  # a full disk stops the study (recovery.StorageFaultStop)
        syncer.on_fault = stop.trip  # the local MLflow store's disk too
        if syncer.fault is not None:  # met by the start-up's MLflow work already
            raise syncer.fault
        progress_callback = ProgressCallback(progress, len(trials), stop)
        tuner = tune.Tuner(
            tune.with_resources(run_trial, {"cpu": resources.cpus_per_trial, "gpu": resources.gpus_per_trial}),
            tune_config=tune.TuneConfig(
                search_alg=TrialList(units), num_samples=len(units),
                max_concurrent_trials=resources.max_concurrent_trials, reuse_actors=True
            ),
            run_config=tune.RunConfig(
                name=run_name,
                storage_path=str(results_root / study.name / TUNE),
                stop=stop if pruner is None else CombinedStopper(stop, pruner),
                callbacks=[
                    TrialFailureCallback(results_root, study.name, stop),
                    MlflowTuneCallback(syncer),
                    progress_callback,
                    DriverMemoryCallback(),  # the driver's resident memory flat over long runs
                    *_tune_file_loggers(),
                ],
                # a trial whose worker dies (or that raises) is retried from its checkpoint
                failure_config=tune.FailureConfig(max_failures=resources.max_failures),
                verbose=0,
            ),
        )
        # Tune prints its own tables to stdout even at verbose=0; keep them in a log file
        log_path = results_root / study.name / TUNE / f"{run_name}.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(log_path, "w") as log, contextlib.redirect_stdout(log), stop_on_sigterm(), \
                _without_tune_restore_hints(), pending_like_a_grid():
            grid = tuner.fit()
    if stop.fault is not None:
        raise stop.fault  # the trials it stopped stay `running`: the next run resumes them
    summary.ran = len(trials)
    summary.failed = [
        f"{params['trial_id']}: {_short_error(r.error)} (trials.error has more)"
        for r in grid
        if r.error is not None
        for params in members(r.config["trial"])
    ]
    summary.wall_s = time.perf_counter() - started
