"""What the `lg-study` commands share: the consoles, the option types and choices, and
the helpers that turn a command's arguments into library calls or a clear refusal
(exit code 2). orchestrator.cli holds the commands themselves."""

from __future__ import annotations

import contextlib
import sys
import warnings
from collections.abc import Iterator
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from orchestrator.console.run_table import LISTED_AT_MOST
from orchestrator.running.run_context import RunContext

# wide tables stay readable when stdout is a file or a pipe (rich would assume 80 columns)
out = Console(width=None if sys.stdout.isatty() else 160)
err = Console(stderr=True, width=None if sys.stderr.isatty() else 160)

ResultsOption = Annotated[Path, typer.Option("--results", help="Results root folder.")]
ProfileOption = Annotated[str | None, typer.Option(
    "--profile", "-p", help="Named override set from the study file; its trials live apart, in "
    "RESULTS/_profiles/PROFILE/STUDY and MLflow experiment STUDY/PROFILE.")]
TrackingOption = Annotated[
    str | None, typer.Option("--tracking-uri", help="MLflow tracking URI (default: SQLite beside the results).")
]
ParamOption = Annotated[list[str] | None, typer.Option(
    "--param", metavar="NAME=VALUE", help="A value for $NAME or getvariable('NAME') in the SQL (repeatable).")]
DEFAULT_RESULTS = Path("results")


class OutputFormat(str, Enum):
    """What `query` prints or writes: a rich table, or a file format."""

    table = "table"
    csv = "csv"
    json = "json"
    markdown = "markdown"
    parquet = "parquet"


class SummaryFormat(str, Enum):
    """What `status` prints of the study's trials: the table, or its summary's numbers
    (one row per configuration group and test length) as text."""

    table = "table"
    csv = "csv"
    json = "json"
    markdown = "markdown"


AllOption = Annotated[bool, typer.Option(
    "--all", help=f"List every seed pair of every group; without it a group of more than {LISTED_AT_MOST} "
    "trials shows its summary only (mean, interval, min, max, the share that succeeds, the best seed pair).")]


#: the keys of orchestrator.benchmarks.bench.BENCHMARKS (a test checks), named here so that `--help`
#: lists them without loading torch
Benchmark = Enum("Benchmark", {name: name for name in (
    "evaluation", "training", "bucketing", "flops", "data", "overhead", "report", "scale", "scale_run",
    "gpu", "seeds", "seed_numbers", "seeds_run")}, type=str)


def bad_input(message: str) -> typer.Exit:
    err.print(f"[red]error:[/red] {message}", highlight=False)
    return typer.Exit(2)


@contextlib.contextmanager
def results_warnings() -> Iterator[None]:
    """Print the results files that reading skipped (damaged, foreign) on stderr."""
    from results_contract.damaged import DamagedResultsWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", DamagedResultsWarning)
        try:
            yield
        finally:
            for warning in caught:
                if issubclass(warning.category, DamagedResultsWarning):
                    err.print(f"[yellow]warning:[/yellow] {warning.message}", highlight=False)
                else:
                    warnings.showwarning(warning.message, warning.category, warning.filename, warning.lineno)


def say_if_moved(tracking_uri: str) -> None:
    """Re-point a moved local MLflow store's artifact locations at the folder it is in
    now (orchestrator.mlflow_tracking.moved_store), and say so; silent when nothing moved."""
    import sqlite3

    from orchestrator.mlflow_tracking.moved_store import repoint_moved_artifacts, sqlite_database

    try:
        repointed = repoint_moved_artifacts(tracking_uri)
    except (OSError, sqlite3.Error) as error:  # a read-only copy: it can be read, not re-pointed
        err.print(f"[yellow]warning:[/yellow] the MLflow store {sqlite_database(tracking_uri)} may have moved, and "
                  f"its artifact locations could not be re-pointed here ({error}): its runs may list no artifacts",
                  highlight=False)
        return
    for moved in repointed:
        err.print(f"the MLflow store {sqlite_database(tracking_uri)} was moved: the artifacts of its experiment at "
                  f"{moved.new} and of its {moved.runs} runs are now found there (they named {moved.old}); "
                  "nothing else was changed", highlight=False)


def load_study_file(study_file: Path, profile: str | None):
    from orchestrator.studies.study import StudyError, load_study

    try:
        return load_study(study_file, profile)
    except StudyError as error:
        raise bad_input(str(error)) from None


def study_argument(study: str, profile: str | None):
    """A command's study argument is the study's name or its YAML file: the name, and
    the loaded file (None for a name)."""
    if study.endswith((".yaml", ".yml")):
        loaded = load_study_file(Path(study), profile)
        return loaded.name, loaded
    return study, None


def parse_params(items: list[str] | None) -> dict[str, str]:
    """The --param NAME=VALUE options of `query` and `report` as a mapping."""
    params = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise bad_input(f"--param {item!r}: expected NAME=VALUE")
        params[name] = value
    return params


# --- what migrate and status print ----------------------------------------------------------


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


def refuse_all_for_a_search(show_all: bool, spec) -> None:
    if show_all:
        raise bad_input(f"--all lists the seed pairs of a grid study's table; {spec.file} is a search "
                         "(its best points are listed instead: --top N)")


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


# --- a run stopped by its storage (a full disk) ----------------------------------------------


def continue_command(study_file: Path, profile: str | None, results: Path, tracking_uri: str | None,
                     address: str | None) -> str:
    """The `lg-study run` command that continues a stopped run (never with --restart)."""
    import shlex

    words = ["lg-study", "run", str(study_file), "--results", str(results)]
    for option, value in (("--profile", profile), ("--tracking-uri", tracking_uri), ("--address", address)):
        if value is not None:
            words += [option, value]
    return shlex.join(words)


def storage_fault_exit(error: Exception, context, study: str, again: str) -> typer.Exit:
    """`run`'s exit when ``error`` is a storage fault (orchestrator.store.storage_faults):
    what failed and where, what was kept, the command that continues; else ``error``
    is raised again."""
    from orchestrator.mlflow_tracking.mlflow_store import sqlite_database
    from orchestrator.store.storage_faults import EXIT_CODE, fault_of, words

    fault = fault_of(error, context.results_root, sqlite_database(context.tracking_uri))
    if fault is None:
        raise error
    first, *rest = words(fault, _kept(context.results_root, study, fault.kind), again)
    err.print(f"[red]stopped:[/red] {first}", highlight=False)
    for line in rest:
        err.print(f"  {line}", highlight=False)
    return typer.Exit(EXIT_CODE)


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


def run_and_report(study, study_file: Path, context: RunContext, log: Path | None, show_all: bool = False,
         again: str = "") -> None:
    """The body of `run`: the study's trials (or its search, or its seed rounds) under
    the context's results root (its profile's), what became of them, the table, and the
    exit code. ``again`` is the command that continues the run."""
    from orchestrator.console.render import best_point, interrupted_line, run_summary, search_points
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
        raise typer.Exit(130) from None
    except Exception as error:  # noqa: BLE001 (re-raised unless a storage fault: a full disk)
        raise storage_fault_exit(error, context, study.name, again) from None
    for line in run_summary(summary):
        err.print(line, highlight=False)
    if isinstance(summary, SearchSummary):
        state = summary.state
        err.print(f"search {state.name}: {summary.scored} points scored by this run, "
                  f"{len(state.points)} of {study.spec.search.points} in all")
        out.print(search_points(state, top=5, total=study.spec.search.points))
        if state.points:
            out.print(best_point(state), highlight=False)
    elif study.name in list_studies(root):
        with results_warnings():
            summary_tables = read_summary(root, study.name, study).tables(show_all)
        for table in summary_tables:
            out.print(table)
    if summary.interrupted:
        err.print(interrupted_line(summary))
        raise typer.Exit(130)
    if summary.failed:
        err.print("[red]failed trials:[/red]")
        for line in summary.failed:
            err.print(f"  {line}", highlight=False)
        if log is not None:
            err.print(f"Ray's and Tune's messages of this run: {log}", highlight=False)
        raise typer.Exit(1)
