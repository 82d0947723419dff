"""`lg-study status` and `lg-study compact`: a study's trials by status, its problems,
who drives it, its table or summary rows, a search's best points; its result files merged."""

from __future__ import annotations

import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

from orchestrator.cli_support import (
    SummaryFormat,
    bad_input,
    continue_command,
    err,
    out,
    refuse_all_for_a_search,
    results_warnings,
    study_argument,
    sync_command,
)


def study_status(study: str, profile: str | None, results: Path, top: int, show_all: bool,
                 output_format: SummaryFormat) -> None:
    """`lg-study status`: trials by status and progress, failures, who drives the study,
    a search's best points and the table (or its summary rows in ``output_format``)."""
    from analysis.query import open_results, read_once, run_sql_file, sql_file
    from orchestrator.console.render import problem_tables, progress_line, search_points
    from orchestrator.running.seed_answers import planned_trials
    from orchestrator.store.search_store import search_name, search_states
    from orchestrator.store.study_locks import driver_of, shown_status
    from results_contract.layout import profile_root
    from results_contract.trial_status import TrialStatus

    if show_all and output_format is not SummaryFormat.table:
        raise bad_input(f"--all lists every seed pair in the table; --format {output_format.value} writes one "
                         "row per group and test length: leave one out (every trial's row: lg-study query --file "
                         f"run_table.sql --study STUDY --format {output_format.value})")
    root = profile_root(results, profile)
    planned, total, only, points = None, None, None, None
    study, spec = study_argument(study, profile)
    if spec is not None:
        if spec.spec.search:
            refuse_all_for_a_search(show_all, spec)
            only, points, total = search_name(spec), spec.spec.search.points, spec.trial_count
        elif spec.spec.seeds.until:  # its design, and the seeds added so far
            planned = [t.trial_id for t in planned_trials(spec, root)]
        else:
            planned = [t.trial_id for t in spec.trials]
    try:
        with results_warnings():
            con = open_results(root, study)
    except LookupError as error:
        raise bad_input(str(error)) from None
    with con:  # one read of the files for every table below (4.7 s -> 2.4 s at 1,000 trials)
        read_once(con)
        counts = {r["status"]: r["trials"] for r in run_sql_file(con, sql_file("status_counts.sql")).to_pylist()}
        problems = problem_tables(run_sql_file(con, sql_file("failures.sql")), run_sql_file(con, sql_file("environments.sql")))
        statuses = dict(con.sql("select trial_id, status from trials").fetchall())
        # `running` rows whose driver died are shown as interrupted
        driver = driver_of(root, study) if TrialStatus.RUNNING in statuses.values() else None
        line = ", ".join(f"{shown_status(k, driver is not None)} {v}" for k, v in sorted(counts.items())) \
            or "no trials yet"
        progress = progress_line(statuses, planned, total)
        where = f" (profile {profile})" if profile else ""
        say = out if output_format is SummaryFormat.table else err  # stdout keeps the rows alone
        say.print(f"study [bold]{study}[/bold]{where}: {line}{'; ' + progress if progress else ''}", highlight=False)
        for table in problems:
            say.print(table)
        again = continue_command(spec.file if spec else Path("STUDY.yaml"), profile, results, None, None)
        print_drivers(root, study, statuses, driver, again, say)
        print_mlflow_lag(root, study, spec, profile, results, driver is not None, say)
        searched = search_states(root, study, only)
        for state in searched:
            say.print(search_points(state, top, points))
        if not searched or output_format is not SummaryFormat.table:
            print_summary(root, study, spec, show_all, output_format, con, driven=driver is not None)


def print_drivers(root: Path, study: str, statuses: dict[str, str], driver: str | None, again: str,
                  say: Console) -> None:
    """`status`'s word on the study's `running` trials: who runs them (``driver``,
    store.study_locks.driver_of), or (no driver holds the study's locks: it died) that they were
    interrupted, when each last wrote, and the command that resumes them."""
    from orchestrator.store.results_store import read_trial_row, read_trial_rows
    from results_contract.layout import table_path
    from results_contract.trial_status import TrialStatus

    running = sorted(trial_id for trial_id, status in statuses.items() if status == TrialStatus.RUNNING)
    if not running or driver is not None:
        if driver is not None:
            say.print(f"running: {len(running)} trials, driven by lg-study {driver}", highlight=False)
        return
    table = Table(title=f"interrupted: {len(running)} trials marked running, but no lg-study process holds "
                        f"the study (its driver died or was killed)")
    for column in ("trial", "started (UTC)", "last written (UTC)", "rows up to step"):
        table.add_column(column)
    for trial_id in running:
        row = read_trial_row(root, study, trial_id) or {}
        written = [table_path(root, study, name, trial_id) for name in ("trials", "train", "eval")]
        last = max((path.stat().st_mtime for path in written if path.exists()), default=None)
        steps = [r["step"] for r in read_trial_rows(root, study, "eval", trial_id)]
        table.add_row(trial_id, _utc(row.get("started_at")), _utc(last), str(max(steps, default="-")))
    say.print(table)
    say.print(f"resume them (each from its last checkpoint): {again}", highlight=False)


def print_mlflow_lag(root: Path, study: str, spec, profile: str | None, results: Path, driven: bool,
                     say: Console) -> None:
    """`status`'s word on the study's MLflow runs that lag its rows, as its driver last
    left it (orchestrator.mlflow_tracking.lag_ledger): MLflow itself is not asked."""
    from orchestrator.console.render import mlflow_lag_line
    from orchestrator.mlflow_tracking.lag_ledger import read_lag
    from results_contract.experiments import default_store_uri

    lag = read_lag(root, study)
    if lag is None or not lag.behind:
        return
    uri = None if lag.tracking_uri == default_store_uri(results) else lag.tracking_uri
    command = sync_command(spec.file if spec else Path("STUDY.yaml"), profile, results, uri)
    say.print(mlflow_lag_line(lag, root / study, command, driven), highlight=False)


def _utc(moment) -> str:
    """A timestamp (a datetime or seconds since the epoch) as `YYYY-MM-DD HH:MM:SS`."""
    from datetime import datetime, timezone

    if moment is None:
        return "-"
    if not isinstance(moment, datetime):
        moment = datetime.fromtimestamp(moment, timezone.utc)
    return f"{moment.astimezone(timezone.utc):%Y-%m-%d %H:%M:%S}"


def print_summary(root: Path, study: str, spec, show_all: bool, output_format: SummaryFormat, con=None,
                  driven: bool = True) -> None:
    """`status`'s table of the study's trials (orchestrator.console.run_table), or its summary's
    rows as csv, json or markdown on stdout. Not ``driven`` (no driver holds the study), its
    `running` trials show as interrupted."""
    from analysis.query import QueryError
    from orchestrator.console.run_table import read_summary
    from orchestrator.store.study_locks import shown_status

    try:
        with results_warnings():
            summary = read_summary(root, study, spec, con)
    except (QueryError, LookupError) as error:
        raise bad_input(str(error)) from None
    shown = summary.results.status
    shown.update({trial_id: shown_status(status, driven) for trial_id, status in shown.items()})
    if output_format is SummaryFormat.table:
        for table in summary.tables(show_all):
            out.print(table)
        return
    for table in summary.tables()[1:]:  # a seeds-until study's groups, beside the rows
        err.print(table)
    sys.stdout.write(summary.text(output_format.value))


# --- compact ---------------------------------------------------------------------------------


def compact_study_files(study: str, profile: str | None, results: Path) -> None:
    """`lg-study compact`: the finished trials' files of a study merged, one file per table."""
    from orchestrator.store.compaction import UnmigratedRows, compact_study
    from orchestrator.store.study_locks import StudyBusy, study_lock
    from results_contract.layout import list_studies, profile_root

    root = profile_root(results, profile)
    study, _ = study_argument(study, profile)
    if study not in list_studies(root):
        raise bad_input(f"no study {study!r} under {root}; studies there: {', '.join(list_studies(root)) or 'none'}")
    try:
        with study_lock(root, study):
            done = compact_study(root, study)
    except (StudyBusy, UnmigratedRows) as error:
        raise bad_input(str(error)) from None
    merged = ", ".join(f"{table} {len(ids)}" for table, ids in done.merged.items()) or "none"
    out.print(f"study {study}: trial files merged into the compacted files: {merged}", highlight=False)
