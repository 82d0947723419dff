"""The `lg-study` command line: parses options and calls library functions, nothing more.

Exit codes: 0 success, 1 a study that ran but had failed trials, 2 bad input.
"""

from __future__ import annotations

import contextlib
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    help="Robustness studies of length generalization in arithmetic transformers: "
    "Ray Tune trials, MLflow runs, Parquet results, DuckDB SQL.",
)
# wide tables stay readable when stdout is a file or a pipe (rich would assume 80 columns)
out = Console(width=None if sys.stdout.isatty() else 160)
err = Console(stderr=True, width=None if sys.stderr.isatty() else 160)

ResultsOption = Annotated[Path, typer.Option("--results", help="Results root folder.")]
ProfileOption = Annotated[str | None, typer.Option("--profile", "-p", help="Named override set from the study file.")]
TrackingOption = Annotated[
    str | None, typer.Option("--tracking-uri", help="MLflow tracking URI (default: SQLite beside the results).")
]
DEFAULT_RESULTS = Path("results")


def _bad_input(message: str) -> typer.Exit:
    err.print(f"[red]error:[/red] {message}", highlight=False)
    return typer.Exit(2)


@contextlib.contextmanager
def _results_warnings() -> Iterator[None]:
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


def _load(study_file: Path, profile: str | None):
    from orchestrator.study import StudyError, load_study

    try:
        return load_study(study_file, profile)
    except StudyError as error:
        raise _bad_input(str(error)) from None


@app.command()
def validate(study_file: Annotated[Path, typer.Argument(help="Study YAML file.")], profile: ProfileOption = None):
    """Check a study file; print the number of trials and what varies."""
    study = _load(study_file, profile)
    search = study.spec.search
    count = f"{study.trial_count} trials"
    if search:
        count += f" ({search.points} points x {len(search.repeat_settings())} seeds)"
    out.print(f"[green]ok[/green] {study_file}: study [bold]{study.name}[/bold]"
              f"{f' (profile {profile})' if profile else ''}, {count}", highlight=False)
    if study.spec.source:
        out.print(f"source: {study.spec.source}")
    for axis, values in study.spec.axes.items():
        out.print(f"  {axis}: {', '.join(map(str, values))}")
    if search:
        out.print(f"  search: {search.sampler}, {search.parallel_points} point(s) at a time, "
                  f"maximizing the mean {search.metric} over seeds", highlight=False)
        for key, param in search.params.items():
            out.print(f"  {key}: {param}", highlight=False)
        for key, values in search.repeat.items():
            out.print(f"  {key} (at every point): {', '.join(map(str, values))}", highlight=False)


@app.command()
def run(
    study_file: Annotated[Path, typer.Argument(help="Study YAML file.")],
    profile: ProfileOption = None,
    address: Annotated[str | None, typer.Option("--address", help="Ray cluster address (default: local Ray).")] = None,
    results: ResultsOption = DEFAULT_RESULTS,
    tracking_uri: TrackingOption = None,
    restart: Annotated[bool, typer.Option(
        "--restart", help="Delete the study's results and MLflow runs, then run every trial afresh.")] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask before --restart deletes.")] = False,
    verbose: Annotated[bool, typer.Option(
        "--verbose", "-v", help="Print Ray's, Tune's and MLflow's own messages here, not in the run's log file.")] = False,
):
    """Run a study; re-running resumes it (finished trials are not run again, interrupted
    ones continue from their last checkpoint). Ctrl-C or SIGTERM stops it cleanly (exit 130).
    Ray's, Tune's and MLflow's messages go to a log file under the study's results folder."""
    from analysis.mlflow_ui import default_store_uri  # the same URI, without importing MLflow
    from orchestrator.terminal import quiet_terminal, run_log_path

    study = _load(study_file, profile)
    uri = tracking_uri or default_store_uri(results)
    if restart and not yes and not typer.confirm(
        f"--restart deletes {results / study.name} and the MLflow runs of study {study.name!r} "
        f"in {uri}, then runs all {study.trial_count} trials again. Go on?", err=True,
    ):
        err.print("not restarted; nothing was changed")
        raise typer.Exit(1)
    err.print(f"study [bold]{study.name}[/bold]: {study.trial_count} trials -> {results / study.name}, MLflow {uri}")
    if verbose:
        _run(study, study_file, results, uri, address, restart, log=None)
        return
    log = run_log_path(results, study.name)
    with quiet_terminal(log, [out, err], say_on=err) as quiet:
        err.print(f"Ray's, Tune's and MLflow's messages: {log} (--verbose prints them here)", highlight=False)
        try:
            _run(study, study_file, results, uri, address, restart, log)
        except typer.Exit as stop:
            if stop.exit_code == 2:  # refused before anything ran
                quiet.discard = True
            raise


def _run(study, study_file: Path, results: Path, uri: str, address: str | None, restart: bool,
         log: Path | None) -> None:
    """The body of `run`: the study's trials (or its search), then what became of them."""
    from analysis.query import list_studies, open_results, run_sql_file
    from orchestrator.recovery import StudyBusy
    from orchestrator.render import best_point, search_points
    from orchestrator.run_table import run_table
    from orchestrator.search import run_search
    from orchestrator.search_store import SearchChanged
    from orchestrator.tune_runner import ResourceError, run_study

    searched = None
    try:
        if study.spec.search:
            searched = run_search(study, results, uri, address=address, console=err, restart=restart)
            summary = searched.run
        else:
            summary = run_study(study, results, uri, address=address, console=err, restart=restart)
    except ResourceError as error:
        raise _bad_input(f"{study_file}: {error}") from None
    except (StudyBusy, SearchChanged) as error:
        raise _bad_input(str(error)) from None
    except KeyboardInterrupt:
        err.print("[yellow]interrupted[/yellow]: run the same command again to resume "
                  "(unfinished trials continue from their last checkpoint)")
        raise typer.Exit(130) from None
    if summary.skipped:
        err.print(f"{summary.skipped} of {summary.total} trials had already finished and were not run again")
    if summary.resumed:
        err.print(f"{len(summary.resumed)} trials had been interrupted or had failed and were run again "
                  "(from their last checkpoint where they had one)")
    if summary.killed_runs:
        err.print(f"{len(summary.killed_runs)} MLflow runs of interrupted trials were ended as KILLED")
    if summary.repaired_runs:
        err.print(f"{len(summary.repaired_runs)} MLflow runs of finished trials were completed from the results")
    if summary.ran:
        err.print(f"ran {summary.ran} trials in {summary.wall_s:.0f} s, {len(summary.failed)} failed")
    if searched:
        state = searched.state
        err.print(f"search {state.name}: {searched.scored} points scored by this run, "
                  f"{len(state.points)} of {study.spec.search.points} in all")
        out.print(search_points(state, top=5, total=study.spec.search.points))
        if state.points:
            out.print(best_point(state), highlight=False)
    elif study.name in list_studies(results):
        with _results_warnings(), open_results(results, study.name) as con:
            rows = run_sql_file(con, _sql("run_table.sql"))
        out.print(run_table(study, rows))
    if summary.interrupted:
        err.print(f"[yellow]interrupted[/yellow]: {len(summary.interrupted)} of {summary.total} trials not "
                  "finished; run the same command again to resume them")
        raise typer.Exit(130)
    if summary.failed:
        err.print("[red]failed trials:[/red]")
        for line in summary.failed:
            err.print(f"  {line}", highlight=False)
        if log is not None:
            err.print(f"Ray's and Tune's messages of this run: {log}", highlight=False)
        raise typer.Exit(1)


@app.command()
def status(
    study: Annotated[str, typer.Argument(help="Study name, or its YAML file (to count trials not started).")],
    profile: ProfileOption = None,
    results: ResultsOption = DEFAULT_RESULTS,
    top: Annotated[int, typer.Option("--top", help="Best points of a search to list.", min=1)] = 5,
):
    """Trials by status, progress, failures with their reasons, and a search's best points."""
    import pyarrow as pa

    from analysis.query import open_results, run_sql_file
    from orchestrator.render import arrow_table, search_points
    from orchestrator.search_store import search_name, search_states
    from orchestrator.seed_target import planned_trials, seed_states, state_rows

    total, only, points, spec = None, None, None, None
    if study.endswith((".yaml", ".yml")):
        spec = _load(Path(study), profile)
        study, total = spec.name, spec.trial_count
        if spec.spec.search:
            only, points = search_name(spec), spec.spec.search.points
        if spec.spec.seeds.until:  # its design, and the seeds added so far
            total = len(planned_trials(spec, results))
    try:
        with _results_warnings():
            con = open_results(results, study)
    except LookupError as error:
        raise _bad_input(str(error)) from None
    with con:
        counts = {r["status"]: r["trials"] for r in run_sql_file(con, _sql("status_counts.sql")).to_pylist()}
        failures = run_sql_file(con, _sql("failures.sql"))
    finished = counts.get("done", 0) + counts.get("diverged", 0)
    line = ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "no trials yet"
    if total is not None:
        line += f"; {finished} of {total} finished, {total - sum(counts.values())} not started"
    out.print(f"study [bold]{study}[/bold]: {line}")
    if failures.num_rows:
        out.print(arrow_table(failures, "failed and diverged trials"))
    for state in search_states(results, study, only):
        out.print(search_points(state, top, points))
    targeted = seed_states(results, study, spec)
    if targeted:
        target, states = targeted
        out.print(arrow_table(pa.Table.from_pylist(state_rows(states)), target.words()))


@app.command()
def trial(
    config_file: Annotated[Path, typer.Argument(help="One trial config (a study's `base` block) as YAML.")],
    device: Annotated[str | None, typer.Option("--device", help="cpu or cuda (default: cuda if available).")] = None,
):
    """Train and evaluate one trial in this process, without Ray or MLflow (for debugging)."""
    from lengthgen import train
    from orchestrator.study import StudyError, load_trial_config

    try:
        config = load_trial_config(config_file)
    except StudyError as error:
        raise _bad_input(str(error)) from None
    out.print(f"trial {config.trial_id}: {config.task.name}, {config.model.arch} {config.model.size}, pe {config.model.pe}")

    def on_report(report):
        parts = [f"step {report.step:>6}"]
        if report.train:
            parts.append(f"loss {report.train.loss:.4f}")
        parts += [f"{r.digits}d {r.accuracy:.3f}" for r in report.eval]
        out.print("  ".join(parts), highlight=False)

    result = train(config, on_report=on_report, device=device)
    out.print(f"status {result.status}; " + ", ".join(f"{k} {v:.3f}" for k, v in result.summary.items()))


@app.command()
def query(
    sql: Annotated[str | None, typer.Argument(help="SQL over the views trials, train, eval, samples.")] = None,
    study: Annotated[str | None, typer.Option("--study", help="Study name (default: every study).")] = None,
    file: Annotated[Path | None, typer.Option("--file", "-f", help="Run a .sql file instead.")] = None,
    output_format: Annotated[str, typer.Option("--format", help="table, csv, json, markdown or parquet.")] = "table",
    param: Annotated[list[str] | None, typer.Option("--param", help="name=value for $name in the SQL.")] = None,
    out_file: Annotated[Path | None, typer.Option("--out", help="Output file (required for parquet).")] = None,
    results: ResultsOption = DEFAULT_RESULTS,
):
    """Ask DuckDB SQL over the study's Parquet results."""
    from analysis.query import (
        QueryError,
        open_results,
        run_query,
        to_csv,
        to_json,
        to_markdown,
        write_parquet,
    )
    from orchestrator.render import arrow_table

    formats = {"table": None, "csv": to_csv, "json": to_json, "markdown": to_markdown, "parquet": None}
    if output_format not in formats:
        raise _bad_input(f"--format {output_format!r}: choose one of {', '.join(formats)}")
    if (sql is None) == (file is None):
        raise _bad_input("give either SQL or --file, not both and not neither")
    if output_format == "parquet" and out_file is None:
        raise _bad_input("--format parquet needs --out FILE")
    params = {}
    for item in param or []:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise _bad_input(f"--param {item!r}: expected name=value")
        params[name] = value
    try:
        text = file.read_text() if file else sql
    except OSError as error:
        raise _bad_input(f"{file}: {error.strerror}") from None
    try:
        with _results_warnings(), open_results(results, study) as con:
            table = run_query(con, text, params)
    except (QueryError, LookupError) as error:
        raise _bad_input(str(error)) from None
    if output_format == "table":
        out.print(arrow_table(table))
        return
    if output_format == "parquet":
        write_parquet(table, out_file)
        err.print(f"wrote {table.num_rows} rows to {out_file}")
        return
    text = formats[output_format](table)
    if out_file:
        out_file.write_text(text)
    else:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")


@app.command()
def report(
    study: Annotated[str, typer.Argument(help="Study name (its folder under --results).")],
    out_dir: Annotated[
        Path | None, typer.Option("--out", help="Output folder (default: RESULTS/STUDY/report).")
    ] = None,
    param: Annotated[
        list[str] | None, typer.Option("--param", help="name=value for the analysis files, e.g. threshold=0.8.")
    ] = None,
    results: ResultsOption = DEFAULT_RESULTS,
):
    """One HTML page of the study's analysis: seed variance, lucky tickets, cascades, errors, training."""
    from analysis.query import QueryError
    from analysis.report import build_report
    from orchestrator.seed_target import seed_states, state_rows

    try:
        with _results_warnings():
            targeted = seed_states(results, study)
            seeds = (targeted[0].words(), state_rows(targeted[1])) if targeted else None
            built = build_report(results, study, out_dir, _params(param), seeds)
    except (QueryError, LookupError) as error:
        raise _bad_input(str(error)) from None
    err.print(f"{len(built.figures)} plots beside it")
    out.print(str(built.page), highlight=False, soft_wrap=True)


@app.command()
def ui(
    study: Annotated[str | None, typer.Option("--study", help="Print this study's experiment URL too.")] = None,
    port: Annotated[int, typer.Option("--port", help="Port on 127.0.0.1.")] = 5000,
    results: ResultsOption = DEFAULT_RESULTS,
    tracking_uri: TrackingOption = None,
):
    """The MLflow UI on 127.0.0.1 over the study's tracking store (Ctrl-C stops it)."""
    from analysis.mlflow_ui import UiError, default_store_uri, serve, start

    uri = tracking_uri or default_store_uri(results)
    try:
        server = start(uri, port, study)
    except UiError as error:
        raise _bad_input(str(error)) from None
    if server.process is not None:
        err.print(f"MLflow UI over {uri} (server pid {server.process.pid}, log {server.log});"
                  " Ctrl-C stops it", highlight=False)
    out.print(f"MLflow UI: {server.url}", highlight=False, soft_wrap=True)
    if server.experiment_url:
        out.print(f"experiment {study}: {server.experiment_url}", highlight=False, soft_wrap=True)
    sys.stdout.flush()
    raise typer.Exit(serve(server))


def _params(items: list[str] | None) -> dict[str, str]:
    params = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise _bad_input(f"--param {item!r}: expected name=value")
        params[name] = value
    return params


@app.command()
def bench(
    only: Annotated[list[str] | None, typer.Option("--only", help="Run only these benchmarks (repeatable).")] = None,
):
    """Speed ratios, each measured against its reference in the same run."""
    from rich.table import Table

    from orchestrator.bench import BENCHMARKS, machine
    from orchestrator.bench import run as run_benchmarks

    unknown = sorted(set(only or []) - set(BENCHMARKS))
    if unknown:
        raise _bad_input(f"--only {', '.join(unknown)}: choose from {', '.join(BENCHMARKS)}")
    table = Table(title=f"lg-study bench: {machine()}")
    for column in ("measurement", "ratio", "target", "met", "measured"):
        table.add_column(column, overflow="fold")

    def show(m):
        ratio = "-" if m.ratio is None else f"{m.ratio:.2f}"
        err.print(f"{m.name}: {ratio} ({m.detail})", highlight=False)
        table.add_row(m.name, ratio, m.target, {True: "yes", False: "no", None: "-"}[m.met], m.detail)

    run_benchmarks(only, on_result=show)
    out.print(table)


def _sql(name: str) -> Path:
    from importlib.resources import files

    return Path(str(files("analysis") / name))


if __name__ == "__main__":
    app()
