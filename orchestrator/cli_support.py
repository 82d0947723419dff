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

from orchestrator.console.run_table import LISTED_AT_MOST

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
    "gpu")}, type=str)


def bad_input(message: str) -> typer.Exit:
    err.print(f"[red]error:[/red] {message}", highlight=False)
    return typer.Exit(2)


@contextlib.contextmanager
def results_warnings() -> Iterator[None]:
    """Print the results files that reading skipped (damaged, foreign) on stderr."""
    from analysis.query import DamagedResultsWarning

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
    from orchestrator.running.recovery import StudyBusy
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


def print_summary(root: Path, study: str, spec, show_all: bool, output_format: SummaryFormat, con=None) -> None:
    """`status`'s table of the study's trials (orchestrator.console.run_table), or its summary's
    rows as csv, json or markdown on stdout."""
    from analysis.query import QueryError
    from orchestrator.console.run_table import read_summary

    try:
        with results_warnings():
            summary = read_summary(root, study, spec, con)
    except (QueryError, LookupError) as error:
        raise bad_input(str(error)) from None
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
    first, *rest = words(fault, _kept(context.results_root, study), again)
    err.print(f"[red]stopped:[/red] {first}", highlight=False)
    for line in rest:
        err.print(f"  {line}", highlight=False)
    return typer.Exit(EXIT_CODE)


def _kept(root: Path, study: str) -> str:
    """What a run stopped by a storage fault left, in words."""
    from orchestrator.store.results_store import read_trial_statuses
    from orchestrator.store.trial_status import FINISHED, TrialStatus

    try:
        statuses = read_trial_statuses(root, study)
    except OSError:
        return "whatever the folder held when it went away (each file is whole: lg-study writes by rename)"
    finished = sum(status in FINISHED for status in statuses.values())
    stopped = sum(status == TrialStatus.RUNNING for status in statuses.values())
    return (f"{finished} finished trials, and {stopped} interrupted ones with their rows up to their last "
            "checkpoint; no half-written file is visible, and the MLflow runs catch up from the rows next time")
