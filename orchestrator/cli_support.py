"""What the `lg-study` commands share: the consoles, the option types and choices, and
the helpers that turn a command's arguments into library calls or a clear refusal
(exit code 2). orchestrator.cli holds the commands' options, orchestrator.commands
their bodies."""

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
from orchestrator.exit_codes import ExitCode

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
    "evaluation", "training", "bucketing", "flops", "quickstart_step", "data", "overhead", "report", "scale",
    "scale_run",
    "gpu", "seeds", "seed_numbers", "seeds_run")}, type=str)


def bad_input(message: str) -> typer.Exit:
    err.print(f"[red]error:[/red] {message}", highlight=False)
    return typer.Exit(ExitCode.BAD_INPUT)


@contextlib.contextmanager
def results_warnings() -> Iterator[None]:
    """Print the results files that reading skipped (damaged, foreign) on stderr."""
    from results_contract.damaged import DamagedResultsWarning

    caught: list[warnings.WarningMessage] = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", DamagedResultsWarning)
            yield
    finally:
        # shown once recording has stopped: inside it, showwarning appends to `caught`
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
        if not moved.brought:
            err.print(f"[yellow]warning:[/yellow] the MLflow store {sqlite_database(tracking_uri)} was moved "
                      f"without the artifacts of its experiment at {moved.old}, whose folder is gone: its {moved.runs} "
                      f"runs list no artifacts, and new ones are written to {moved.new}", highlight=False)
            continue
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



def refuse_all_for_a_search(show_all: bool, spec) -> None:
    if show_all:
        raise bad_input(f"--all lists the seed pairs of a grid study's table; {spec.file} is a search "
                         "(its best points are listed instead: --top N)")


def continue_command(study_file: Path, profile: str | None, results: Path, tracking_uri: str | None,
                     address: str | None) -> str:
    """The `lg-study run` command that continues a stopped run (never with --restart)."""
    return _study_command("run", study_file, profile, results, tracking_uri, address)


def sync_command(study_file: Path, profile: str | None, results: Path, tracking_uri: str | None) -> str:
    """The `lg-study sync` command that brings the study's MLflow runs up to date."""
    return _study_command("sync", study_file, profile, results, tracking_uri, None)


def _study_command(verb: str, study_file: Path, profile: str | None, results: Path, tracking_uri: str | None,
                   address: str | None) -> str:
    import shlex

    words = ["lg-study", verb, str(study_file), "--results", str(results)]
    for option, value in (("--profile", profile), ("--tracking-uri", tracking_uri), ("--address", address)):
        if value is not None:
            words += [option, value]
    return shlex.join(words)
