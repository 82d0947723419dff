"""The `lg-study` command line: parses options and calls library functions, nothing more.

Exit codes: 0 success, 1 a study that ran but had failed trials, 2 bad input (nothing
run), 74 a run stopped because its results could not be written (a full disk, a read-only
or vanished results folder: orchestrator.store.storage_faults; nothing lost, run again once
it is fixed), 130 a run stopped by Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
from pathlib import Path
from typing import Annotated

import typer

from orchestrator.cli_support import (
    DEFAULT_RESULTS,
    AllOption,
    Benchmark,
    OutputFormat,
    ParamOption,
    ProfileOption,
    ResultsOption,
    SummaryFormat,
    TrackingOption,
    bad_input,
    continue_command,
    err,
    load_study_file,
    migrate_profile_of,
    out,
    parse_params,
    print_drivers,
    print_summary,
    refuse_all_for_a_search,
    results_warnings,
    run_and_report,
    say_if_moved,
    storage_fault_exit,
    study_argument,
)
from orchestrator.running.run_context import RunContext

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    # docstrings are wrapped at 100 columns; markdown joins their lines into paragraphs
    rich_markup_mode="markdown",
    help="Robustness studies of length generalization in arithmetic transformers: "
    "Ray Tune trials, MLflow runs, Parquet results, DuckDB SQL.",
)
@app.command()
def validate(
    study_file: Annotated[Path, typer.Argument(help="Study YAML file.")],
    profile: ProfileOption = None,
    trials: Annotated[bool, typer.Option("--trials", help="List every trial: index, trial id, axis values.")] = False,
    results: ResultsOption = DEFAULT_RESULTS,
):
    """Check a study file; print the number of trials and what varies, and for a study
    on GPUs its size in GPU-hours (at the rate `lg-study bench --only gpu` measured
    into the results folder, else an estimate)."""
    study = load_study_file(study_file, profile)
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
    if study.spec.resources.gpus_per_trial > 0:
        from orchestrator.studies.study_scale import study_size_words

        out.print(f"size: {study_size_words(study, results)}", highlight=False)
    if trials:
        from orchestrator.console.render import trial_list

        out.print(trial_list(study))


@app.command()
def run(
    study_file: Annotated[Path, typer.Argument(help="Study YAML file.")],
    profile: ProfileOption = None,
    address: Annotated[str | None, typer.Option("--address", help="Ray cluster address (default: local Ray).")] = None,
    results: ResultsOption = DEFAULT_RESULTS,
    tracking_uri: TrackingOption = None,
    restart: Annotated[bool, typer.Option(
        "--restart", help="Delete the study's results and MLflow runs, then train every trial afresh.")] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask before --restart deletes.")] = False,
    reuse: Annotated[bool, typer.Option(
        "--reuse/--no-reuse", help="Reuse trials already finished in another study or profile under "
        "--results (their rows and MLflow run are copied, not retrained).")] = True,
    retrain_stale: Annotated[bool, typer.Option("--retrain-stale", help="Retrain trials whose numbers a later "
        "science version moved (old rows kept in STUDY/_superseded/); without it they are refused.")] = False,
    verbose: Annotated[bool, typer.Option(
        "--verbose", "-v", help="Print Ray's, Tune's and MLflow's own messages here, not in the run's log file.")] = False,
    show_all: AllOption = False,
):
    """Run a study; re-running resumes it (finished trials are not run again, interrupted
    ones continue from their last checkpoint, trials finished in another study or profile
    are reused). Ctrl-C or SIGTERM stops it cleanly (exit 130); so does a full disk, or a read-only
    or vanished results folder (exit 74: no trial is retried on it; run again once it is fixed).
    Ray's, Tune's and MLflow's messages go to a log file under the study's results folder."""
    from analysis.mlflow_ui import default_store_uri  # the same URI, without importing MLflow
    from orchestrator.console.terminal import quiet_terminal, run_log_path

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
        raise typer.Exit(1)
    err.print(f"study [bold]{study.name}[/bold]: {study.trial_count} trials -> {root / study.name}, "
              f"MLflow {uri} (experiment {study.experiment})", highlight=False)
    say_if_moved(uri)
    context = RunContext(root, uri, address=address, console=err, restart=restart)
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
            if stop.exit_code == 2:  # refused before anything ran
                quiet.discard = True
            raise


@app.command()
def migrate(
    study_file: Annotated[Path | None, typer.Argument(help="Study YAML file (its groups' labels; needed with --profile).")] = None,
    profile: Annotated[str | None, typer.Option("--profile", "-p", help="The profile whose trials to move.")] = None,
    results: ResultsOption = DEFAULT_RESULTS,
    tracking_uri: TrackingOption = None,
):
    """Bring results an earlier lg-study wrote up to date: trials rows written before each row stored its
    configuration group get it (and their MLflow runs the same tags), in every study under RESULTS. With
    --profile, also move that profile's trials written into RESULTS/STUDY (before profiles were kept apart)
    into the profile's own folder, with their checkpoints; their MLflow runs leave experiment STUDY, and the
    next `lg-study run --profile` makes them in STUDY/PROFILE (training only what was unfinished)."""
    from analysis.mlflow_ui import default_store_uri
    from orchestrator.running.migrate import migrate_group_columns
    from orchestrator.running.recovery import StudyBusy

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


@app.command()
def status(
    study: Annotated[str, typer.Argument(help="Study name, or its YAML file (to count trials not started).")],
    profile: ProfileOption = None,
    results: ResultsOption = DEFAULT_RESULTS,
    top: Annotated[int, typer.Option("--top", help="Best points of a search to list.", min=1)] = 5,
    show_all: AllOption = False,
    output_format: Annotated[SummaryFormat, typer.Option(
        "--format", help="table: everything below as tables; csv, json, markdown: the table's summary, one row per "
        "configuration group and test length, on stdout (the rest on stderr).")] = SummaryFormat.table,
):
    """Trials by status, progress, failures with their reasons, the table `lg-study run` prints at the
    end (by configuration group: seed pairs, mean and its interval, min, max, the share that succeeds,
    the best seed pair), a search's best points, and where each group of a seeds-until study stopped."""
    from analysis.layout import profile_root
    from analysis.query import open_results, read_once, run_sql_file, sql_file
    from orchestrator.console.render import problem_tables, progress_line, search_points
    from orchestrator.store.search_store import search_name, search_states
    from orchestrator.store.seed_plan import planned_trials
    from orchestrator.store.study_locks import driver_of
    from orchestrator.store.trial_status import TrialStatus, shown_status

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
        searched = search_states(root, study, only)
        for state in searched:
            say.print(search_points(state, top, points))
        if not searched or output_format is not SummaryFormat.table:
            print_summary(root, study, spec, show_all, output_format, con, driven=driver is not None)


@app.command()
def compact(
    study: Annotated[str, typer.Argument(help="Study name (its folder under --results), or its YAML file.")],
    profile: ProfileOption = None,
    results: ResultsOption = DEFAULT_RESULTS,
):
    """Merge the finished trials' result files of a study into one file per table (`lg-study run` does it
    when it ends); readers see the same rows before, during and after, and a running study is refused."""
    from analysis.layout import list_studies, profile_root
    from orchestrator.running.recovery import StudyBusy, study_lock
    from orchestrator.store.compaction import UnmigratedRows, compact_study

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


@app.command()
def trial(
    config_file: Annotated[Path, typer.Argument(
        help="A study file (with --trial), or one trial config (a study's `base` block) as YAML.")],
    trial_id: Annotated[str | None, typer.Option(
        "--trial", "-t", help="Which trial of the study file: its trial id, or its index from "
        "`lg-study validate --trials` (0-based); not needed for a study of one trial.")] = None,
    profile: ProfileOption = None,
    device: Annotated[str | None, typer.Option("--device", help="cpu or cuda (default: cuda if available).")] = None,
):
    """Train and evaluate one trial in this process, without Ray or MLflow (for debugging);
    nothing is written under the results folder."""
    from lengthgen import train
    from orchestrator.studies.study import StudyError, load_trial

    try:
        config = load_trial(config_file, trial_id, profile)
    except StudyError as error:
        raise bad_input(str(error)) from None
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
    profile: ProfileOption = None,
    file: Annotated[Path | None, typer.Option("--file", "-f", help="Run a .sql file instead: a path, or the name of one of lg-study's questions (e.g. lucky_tickets.sql).")] = None,
    output_format: Annotated[OutputFormat, typer.Option("--format", help="How to print or write the result.")]
    = OutputFormat.table,
    param: ParamOption = None,
    out_file: Annotated[Path | None, typer.Option("--out", help="Output file (required for parquet).")] = None,
    results: ResultsOption = DEFAULT_RESULTS,
):
    """Ask DuckDB SQL over the study's Parquet results (a profile's: --profile)."""
    from analysis.layout import profile_root
    from analysis.query import (
        QueryError,
        open_results,
        run_query,
        to_csv,
        to_json,
        to_markdown,
        write_parquet,
    )
    from analysis.sql_layers import question_path
    from orchestrator.console.render import arrow_table

    if (sql is None) == (file is None):
        raise bad_input("give either SQL or --file, not both and not neither")
    if output_format is OutputFormat.parquet and out_file is None:
        raise bad_input("--format parquet needs --out FILE")
    params = parse_params(param)
    try:
        text = question_path(file).read_text() if file else sql
    except OSError as error:
        raise bad_input(f"{file}: {error.strerror}") from None
    try:
        with results_warnings(), open_results(profile_root(results, profile), study) as con:
            table = run_query(con, text, params)
    except (QueryError, LookupError) as error:
        raise bad_input(str(error)) from None
    if output_format is OutputFormat.table:
        out.print(arrow_table(table))
        return
    if output_format is OutputFormat.parquet:
        write_parquet(table, out_file)
        err.print(f"wrote {table.num_rows} rows to {out_file}")
        return
    writers = {OutputFormat.csv: to_csv, OutputFormat.json: to_json, OutputFormat.markdown: to_markdown}
    text = writers[output_format](table)
    if out_file:
        out_file.write_text(text)
    else:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")


@app.command()
def report(
    study: Annotated[str, typer.Argument(help="Study name (its folder under --results), or its YAML file.")],
    profile: ProfileOption = None,
    out_dir: Annotated[
        Path | None, typer.Option("--out", help="Output folder (default: the study's results folder/report).")
    ] = None,
    param: ParamOption = None,
    results: ResultsOption = DEFAULT_RESULTS,
):
    """One HTML page of the study's analysis: seed variance, lucky tickets, cascades, errors, training."""
    params = parse_params(param)
    from analysis.layout import profile_root
    from analysis.query import QueryError
    from analysis.report import build_report
    from orchestrator.store.seed_plan import seed_states, state_rows

    root = profile_root(results, profile)
    study, _ = study_argument(study, profile)
    try:
        with results_warnings():
            targeted = seed_states(root, study)
            seeds = (targeted[0].words(), state_rows(targeted[1])) if targeted else None
            built = build_report(root, study, out_dir, params, seeds, profile=profile)
    except (QueryError, LookupError) as error:
        raise bad_input(str(error)) from None
    err.print(f"{len(built.figures)} plots beside it")
    out.print(str(built.page), highlight=False, soft_wrap=True)


@app.command()
def plan(
    study: Annotated[str, typer.Argument(help="The pilot study's name, or its YAML file.")],
    metric: Annotated[str, typer.Option(help="weight_share, mean_accuracy or success.")] = "weight_share",
    half_width: Annotated[float, typer.Option("--half-width", help="Target half width, in (0, 1).")] = 0.1,
    digits: Annotated[int | None, typer.Option(help="Plan at this test length (default: the mean over "
                                                    "the out-of-distribution lengths).")] = None,
    data_seeds: Annotated[int | None, typer.Option("--data-seeds", help="Fix the data seeds (default: the "
                                                                        "design with the fewest trials).")] = None,
    threshold: Annotated[float, typer.Option(help="success: accuracy that counts as a success.")] = 0.9,
    profile: ProfileOption = None,
    results: ResultsOption = DEFAULT_RESULTS,
):
    """How many weight x data seeds give a target half width, by simulation from each group's fit."""
    import pyarrow as pa

    from analysis.layout import profile_root
    from analysis.study_plan import plan_study
    from orchestrator.console.render import arrow_table

    study, _ = study_argument(study, profile)
    try:
        with results_warnings():
            rows = plan_study(profile_root(results, profile), study, metric, half_width, digits, data_seeds, threshold)
    except (ValueError, LookupError) as error:
        raise bad_input(str(error)) from None
    out.print(arrow_table(pa.Table.from_pylist(rows), f"Seed plans for {study}: the mean half width of "
                          "the interval over 256 studies simulated from each group's fit (docs/analysis.md)"))


@app.command()
def ui(
    study: Annotated[str | None, typer.Option("--study", help="Print this study's experiment URL too.")] = None,
    profile: ProfileOption = None,
    port: Annotated[int, typer.Option("--port", help="Port on 127.0.0.1.")] = 5000,
    results: ResultsOption = DEFAULT_RESULTS,
    tracking_uri: TrackingOption = None,
):
    """The MLflow UI on 127.0.0.1 over the study's tracking store (Ctrl-C stops it)."""
    from analysis.mlflow_ui import UiError, default_store_uri, experiment_name, serve, start

    if profile is not None and study is None:
        raise bad_input("--profile names a study's experiment (STUDY/PROFILE): give --study too")
    experiment = experiment_name(study, profile) if study is not None else None
    uri = tracking_uri or default_store_uri(results)
    say_if_moved(uri)
    try:
        server = start(uri, port, experiment)
    except UiError as error:
        raise bad_input(str(error)) from None
    if server.process is not None:
        err.print(f"MLflow UI over {uri} (server pid {server.process.pid}, log {server.log});"
                  " Ctrl-C stops it", highlight=False)
    out.print(f"MLflow UI: {server.url}", highlight=False, soft_wrap=True)
    if server.experiment_url:
        out.print(f"experiment {experiment}: {server.experiment_url}", highlight=False, soft_wrap=True)
    sys.stdout.flush()
    raise typer.Exit(serve(server))


@app.command()
def bench(
    only: Annotated[list[Benchmark] | None, typer.Option("--only", help="Run only these benchmarks (repeatable).")]
    = None,
    run_all: Annotated[bool, typer.Option("--all", help="Run every benchmark, the long ones too.")] = False,
    trials: Annotated[int | None, typer.Option(
        "--trials", min=25, help="scale_run: trials of its study (weight seeds x 25 data seeds; default 1,000).")] = None,
):
    """Speed ratios, each measured against its reference in the same run. Without --only or --all, the quick
    rows only: it names the long ones it leaves out."""
    from rich.table import Table

    from orchestrator.benchmarks.bench import BENCHMARKS, default_names, left_out, machine
    from orchestrator.benchmarks.bench import run as run_benchmarks

    names = [b.value for b in only] if only else list(BENCHMARKS) if run_all else default_names()
    if trials is not None and ("scale_run" not in names or trials % 25):
        raise bad_input("--trials sizes the scale_run study (a multiple of 25: weight seeds x 25 data seeds): "
                        "give it with --only scale_run")
    table = Table(title=f"lg-study bench: {machine()}")
    for column in ("measurement", "ratio", "target", "met", "measured"):
        table.add_column(column, overflow="fold")

    def show(m):
        ratio = "-" if m.ratio is None else f"{m.ratio:.2f}"
        err.print(f"{m.name}: {ratio} ({m.detail})", highlight=False)
        table.add_row(m.name, ratio, m.target, {True: "yes", False: "no", None: "-"}[m.met], m.detail)

    for line in left_out(names):
        err.print(line, highlight=False)
    run_benchmarks(names, on_result=show, trials=trials)
    out.print(table)
    for line in left_out(names):
        out.print(line, highlight=False)


if __name__ == "__main__":
    app()
