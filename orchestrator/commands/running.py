"""`lg-study run` and `lg-study migrate`: a study run (resumed, restarted, reusing
trials), what became of it and its exit code, a run stopped by its storage (a full
disk), and results an earlier lg-study wrote brought up to date."""

from __future__ import annotations

import contextlib
import dataclasses
from pathlib import Path

import typer

from orchestrator.cli_support import (
    bad_input,
    continue_command,
    err,
    load_study_file,
    out,
    refuse_all_for_a_search,
    results_warnings,
    say_if_moved,
    sync_command,
)
from orchestrator.exit_codes import ExitCode
from orchestrator.running.run_context import RunContext


def run_study_file(study_file: Path, profile: str | None, address: str | None, results: Path,
                   tracking_uri: str | None, restart: bool, yes: bool, reuse: bool, retrain_stale: bool,
                   verbose: bool, show_all: bool) -> None:
    """`lg-study run`: the study under its results folder, Ray's, Tune's and MLflow's
    messages in the run's log file (on the terminal with ``verbose``)."""
    from orchestrator.console.terminal import quiet_terminal, run_log_path
    from results_contract.experiments import (
        default_store_uri,  # the same URI, without importing MLflow
    )

    study = dataclasses.replace(load_study_file(study_file, profile), reuse=reuse and not restart, retrain_stale=retrain_stale)
    if study.spec.search:
        refuse_all_for_a_search(show_all, study)
    root = study.results_root(results)
    uri = tracking_uri or default_store_uri(results)
    if restart and not yes and not typer.confirm(
        f"--restart deletes {root / study.name} and the MLflow runs of experiment {study.experiment!r} "
        f"in {uri}, then trains all {study.trial_count} trials again. Go on?", err=True,
    ):
        err.print("not restarted; nothing was changed")
        raise typer.Exit(ExitCode.FAILED)
    err.print(f"study [bold]{study.name}[/bold]: {study.trial_count} trials -> {root / study.name}, "
              f"MLflow {uri} (experiment {study.experiment})", highlight=False)
    say_if_moved(uri)
    context = RunContext(root, uri, address=address, console=err, restart=restart,
                         sync=sync_command(study_file, profile, results, tracking_uri))
    again = continue_command(study_file, profile, results, tracking_uri, address)
    if verbose:
        run_and_report(study, study_file, context, log=None, show_all=show_all, again=again)
        return
    log = run_log_path(root, study.name)
    with contextlib.ExitStack() as stack:
        try:
            quiet = stack.enter_context(quiet_terminal(log, [out, err], say_on=err))
        except OSError as error:  # no log file in a read-only, full or vanished results folder
            raise storage_fault_exit(error, context, study.name, again) from None
        err.print(f"Ray's, Tune's and MLflow's messages: {log} (--verbose prints them here)", highlight=False)
        try:
            run_and_report(study, study_file, context, log, show_all, again)
        except typer.Exit as stop:
            if stop.exit_code == ExitCode.BAD_INPUT:  # refused before anything ran
                quiet.discard = True
            raise


def run_and_report(study, study_file: Path, context: RunContext, log: Path | None, show_all: bool = False,
         again: str = "") -> None:
    """The body of `run`: the study's trials (or its search, or its seed rounds) under
    the context's results root (its profile's), what became of them, the table, and the
    exit code. ``again`` is the command that continues the run."""
    from orchestrator.console.render import (
        best_point,
        interrupted_line,
        mlflow_lag_line,
        run_summary,
        search_points,
    )
    from orchestrator.console.run_table import read_summary
    from orchestrator.running.dispatch import run_study
    from orchestrator.running.search import SearchSummary
    from orchestrator.running.tune_runner import ResourceError, StaleScience
    from orchestrator.store.search_store import SearchChanged
    from orchestrator.store.study_locks import StudyBusy
    from results_contract.layout import list_studies

    root = context.results_root
    try:
        summary = run_study(study, context)
    except (ResourceError, StaleScience) as error:
        raise bad_input(f"{study_file}: {error}") from None
    except (StudyBusy, SearchChanged) as error:
        raise bad_input(str(error)) from None
    except KeyboardInterrupt:
        err.print("[yellow]interrupted[/yellow]: run the same command again to resume "
                  "(unfinished trials continue from their last checkpoint)")
        raise typer.Exit(ExitCode.INTERRUPTED) from None
    except Exception as error:  # noqa: BLE001 (re-raised unless a storage fault: a full disk)
        raise storage_fault_exit(error, context, study.name, again) from None
    for line in run_summary(summary):
        err.print(line, highlight=False)
    if isinstance(summary, SearchSummary):
        state = summary.state
        pruned = f", {summary.points_pruned} pruned" if summary.points_pruned else ""
        err.print(f"search {state.name}: {summary.scored} points scored by this run{pruned}, "
                  f"{len(state.points)} of {study.spec.search.points} in all")
        out.print(search_points(state, top=5, total=study.spec.search.points))
        if state.points:
            out.print(best_point(state), highlight=False)
    elif study.name in list_studies(root):
        with results_warnings():
            summary_tables = read_summary(root, study.name, study).tables(show_all)
        for table in summary_tables:
            out.print(table)
    if summary.mlflow_lag is not None:  # a warning: the exit code is the training's
        err.print(mlflow_lag_line(summary.mlflow_lag, root / study.name, context.sync), highlight=False)
    if summary.interrupted:
        err.print(interrupted_line(summary))
        raise typer.Exit(ExitCode.INTERRUPTED)
    if summary.failed:
        err.print("[red]failed trials:[/red]")
        for line in summary.failed:
            err.print(f"  {line}", highlight=False)
        if log is not None:
            err.print(f"Ray's and Tune's messages of this run: {log}", highlight=False)
        raise typer.Exit(ExitCode.FAILED)


# --- a run stopped by its storage (a full disk) ---------------------------------------------


def storage_fault_exit(error: Exception, context, study: str, again: str) -> typer.Exit:
    """`run`'s exit when ``error`` is a storage fault (orchestrator.store.storage_faults):
    what failed and where, what was kept, the command that continues; else ``error``
    is raised again."""
    from orchestrator.mlflow_tracking.mlflow_store import sqlite_database
    from orchestrator.store.storage_faults import fault_of, words

    fault = fault_of(error, context.results_root, sqlite_database(context.tracking_uri))
    if fault is None:
        raise error
    first, *rest = words(fault, _kept(context.results_root, study, fault.kind), again)
    err.print(f"[red]stopped:[/red] {first}", highlight=False)
    for line in rest:
        err.print(f"  {line}", highlight=False)
    return typer.Exit(ExitCode.STORAGE)


def _kept(root: Path, study: str, kind: str) -> str:
    """What a run stopped by a storage fault of ``kind`` left, in words."""
    from orchestrator.store.results_store import read_trial_statuses
    from results_contract.trial_status import FINISHED, TrialStatus

    try:
        statuses = {} if kind == "gone" else read_trial_statuses(root, study)
    except OSError:
        kind = "gone"
    if kind == "gone":
        return ("what the folder held when it went away: every file whole (lg-study writes by rename), each "
                "trial's rows up to its last checkpoint")
    finished = sum(status in FINISHED for status in statuses.values())
    stopped = sum(status == TrialStatus.RUNNING for status in statuses.values())
    return (f"{finished} finished trials, and {stopped} interrupted ones with their rows up to their last "
            "checkpoint; no half-written file is visible, and the MLflow runs catch up from the rows next time")


# --- results an earlier lg-study wrote ------------------------------------------------------


def migrate_results(study_file: Path | None, profile: str | None, results: Path, tracking_uri: str | None) -> None:
    """`lg-study migrate`: every trials row under ``results`` given its configuration
    group, and (``profile``) that profile's trials moved into its own folder."""
    from orchestrator.running.migrate import migrate_group_columns
    from orchestrator.store.study_locks import StudyBusy
    from results_contract.experiments import default_store_uri

    if profile is not None and study_file is None:
        raise bad_input("--profile moves the trials of a study's profile: name the study's YAML file")
    uri = tracking_uri or default_store_uri(results)
    say_if_moved(uri)
    try:
        upgraded = migrate_group_columns(results, uri, load_study_file(study_file, None) if study_file else None)
    except StudyBusy as error:
        raise bad_input(str(error)) from None
    for folder, count in upgraded.items():
        out.print(f"{count} trials rows of {folder} given their configuration group", highlight=False)
    if profile is None:
        if not upgraded:
            out.print(f"every trials row under {results} has its configuration group already", highlight=False)
        return
    migrate_profile_of(study_file, profile, results, uri)


def migrate_profile_of(study_file: Path, profile: str, results: Path, uri: str) -> None:
    """`lg-study migrate STUDY.yaml --profile P`: move the profile's trials, and say what moved."""
    from orchestrator.running.migrate import migrate_profile
    from orchestrator.store.study_locks import StudyBusy
    from orchestrator.studies.study import StudyError

    profiled, unprofiled = load_study_file(study_file, profile), load_study_file(study_file, None)
    try:
        done = migrate_profile(profiled, unprofiled, results, uri)
    except (StudyError, StudyBusy) as error:
        raise bad_input(str(error)) from None
    target = profiled.results_root(results) / profiled.name
    out.print(f"{len(done.moved)} trials moved and {len(done.copied)} copied (the unprofiled design has them "
              f"too) to {target}; {len(done.dropped)} already there removed from {results / profiled.name}; "
              f"{done.deleted_runs} MLflow runs deleted from experiment {unprofiled.experiment!r}", highlight=False)
    if done.moved or done.copied:
        out.print(f"next: lg-study run {study_file} --profile {profile} --results {results} makes their runs in "
                  f"experiment {profiled.experiment!r} and trains only the unfinished ones", highlight=False)



# --- MLflow runs behind their rows ----------------------------------------------------------


def sync_study_file(study_file: Path, profile: str | None, results: Path, tracking_uri: str | None) -> None:
    """`lg-study sync`: the study's MLflow runs brought up to date with its rows, as the
    next `run` would before training; exit 1 when MLflow does not answer."""
    from orchestrator.console.render import mlflow_lag_line
    from orchestrator.mlflow_tracking.sync_runs import sync_runs
    from orchestrator.running.group_answers import handed
    from orchestrator.store.study_locks import StudyBusy, study_lock
    from results_contract.experiments import default_store_uri

    study = load_study_file(study_file, profile)
    root = study.results_root(results)
    uri = tracking_uri or default_store_uri(results)
    if not (root / study.name).is_dir():
        raise bad_input(f"no results of study {study.name!r} under {root}: no MLflow run to bring up to date")
    say_if_moved(uri)
    try:
        with study_lock(root, study.name):
            synced = sync_runs(uri, study.experiment, root, study.name, run_names_of(study), handed(study, root))
    except StudyBusy as error:
        raise bad_input(str(error)) from None
    if synced.fault is not None:
        err.print(f"[red]stopped:[/red] {synced.fault}", highlight=False)
        raise typer.Exit(ExitCode.STORAGE)
    if synced.lag.behind:
        err.print(mlflow_lag_line(synced.lag, root / study.name, sync_command(study_file, profile, results, tracking_uri)),
                  highlight=False)
        raise typer.Exit(ExitCode.FAILED)
    out.print(f"MLflow at {uri}, experiment {study.experiment}: {len(synced.trials)} trials' runs brought up to "
              f"date with their rows, every other run was already; {len(synced.groups)} configuration groups' "
              f"parent runs given their current numbers and {len(synced.figures)} their figures", highlight=False)


def run_names_of(study) -> dict[str, str]:
    """trial id -> its MLflow run's name, as `run` names it (orchestrator.running.tune_runner.trial_params)."""
    from results_contract.groups import run_name

    return {config.trial_id: run_name(config.to_dict(), study.short_label(config)) for config in study.trials}
