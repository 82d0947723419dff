"""The `lg-study` command line: parses options and calls library functions, nothing more.

Exit codes: orchestrator.exit_codes (0 success, 1 failed trials, 2 bad input, 74 results
that could not be written, 130 stopped by Ctrl-C or SIGTERM), listed in
docs/reference/cli.md.
"""

from __future__ import annotations

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
)
from orchestrator.commands.answers import (
    plan_comparison_seeds,
    plan_seeds,
    query_results,
    replay_pruner,
    serve_ui,
    write_report,
)
from orchestrator.commands.bench import run_bench
from orchestrator.commands.running import migrate_results, run_study_file, sync_study_file
from orchestrator.commands.slurm import write_slurm_job
from orchestrator.commands.status import compact_study_files, study_status
from orchestrator.commands.study_files import train_one_trial, validate_study

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
    validate_study(study_file, profile, trials, results)


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
    run_study_file(study_file, profile, address, results, tracking_uri, restart, yes, reuse, retrain_stale, verbose,
                   show_all)


@app.command()
def slurm(
    study_file: Annotated[Path, typer.Argument(help="Study YAML file.")],
    nodes: Annotated[int, typer.Option("--nodes", help="Nodes of the allocation; one Ray node on each.")],
    gpus_per_node: Annotated[int, typer.Option("--gpus-per-node", help="GPUs each node gives the study (0: none).")],
    cpus_per_node: Annotated[int, typer.Option("--cpus-per-node", help="CPU cores each node gives the study.")],
    time: Annotated[str, typer.Option("--time", help="Slurm's time limit: minutes, HH:MM:SS or D-HH:MM:SS.")],
    partition: Annotated[str | None, typer.Option("--partition", help="Slurm partition.")] = None,
    account: Annotated[str | None, typer.Option("--account", help="Slurm account to charge.")] = None,
    profile: ProfileOption = None,
    results: Annotated[Path, typer.Option("--results", help="Results root, on the filesystem every node sees "
                                          "(checked on each node before Ray starts).")] = DEFAULT_RESULTS,
    tracking_uri: TrackingOption = None,
    setup: Annotated[Path | None, typer.Option("--setup", help="A bash file sourced before Ray starts: the site's "
                                               "modules, a conda or venv activation.")] = None,
    grace: Annotated[int, typer.Option("--grace", help="Seconds before the time limit at which the study is "
                                       "asked to stop (its trials keep their checkpoints).")] = 120,
    submit: Annotated[bool, typer.Option("--submit", help="Submit the script with sbatch; print the job id "
                                         "and how to follow it.")] = False,
):
    """Write an sbatch script that runs the study as one Slurm job: one Ray cluster over the
    allocation (token authentication), `lg-study run` on its head, Ray stopped at the end. It
    asks Slurm to requeue the job on preemption or node failure (the study resumes) and to warn
    it before the time limit (the study stops cleanly). The script is printed and kept in the
    study's results folder (STUDY/_slurm/job.sbatch); docs/how-to/slurm.md explains it."""
    write_slurm_job({"study_file": study_file, "profile": profile, "nodes": nodes, "gpus_per_node": gpus_per_node,
                     "cpus_per_node": cpus_per_node, "time": time, "grace": grace, "partition": partition,
                     "account": account, "results": results, "tracking_uri": tracking_uri, "setup": setup}, submit)


@app.command()
def sync(
    study_file: Annotated[Path, typer.Argument(help="Study YAML file.")],
    profile: ProfileOption = None,
    results: ResultsOption = DEFAULT_RESULTS,
    tracking_uri: TrackingOption = None,
):
    """Bring the study's MLflow runs up to date with its results (what `run` does before training, without
    training): after a tracking server was down, or to fill another store. Exit 1 when MLflow does not answer."""
    sync_study_file(study_file, profile, results, tracking_uri)


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
    migrate_results(study_file, profile, results, tracking_uri)


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
    study_status(study, profile, results, top, show_all, output_format)


@app.command()
def compact(
    study: Annotated[str, typer.Argument(help="Study name (its folder under --results), or its YAML file.")],
    profile: ProfileOption = None,
    results: ResultsOption = DEFAULT_RESULTS,
):
    """Merge the finished trials' result files of a study into one file per table (`lg-study run` does it
    when it ends); readers see the same rows before, during and after, and a running study is refused."""
    compact_study_files(study, profile, results)


@app.command()
def trial(
    config_file: Annotated[Path, typer.Argument(
        help="A study file (with --trial), or one trial config (a study's `base` block) as YAML.")],
    trial_id: Annotated[str | None, typer.Option(
        "--trial", "-t", help="Which trial of the study file: its trial id, or its index from "
        "`lg-study validate --trials` (0-based); not needed for a study of one trial.")] = None,
    # not ProfileOption: `trial` writes no results, so it has no profile folder to name
    profile: Annotated[str | None, typer.Option(
        "--profile", "-p", help="Named override set from the study file, applied to the trial's "
        "config (it picks and trains the profile's trial; nothing is written).")] = None,
    device: Annotated[str | None, typer.Option("--device", help="cpu or cuda (default: cuda if available).")] = None,
):
    """Train and evaluate one trial in this process, without Ray or MLflow (for debugging);
    nothing is written under the results folder."""
    train_one_trial(config_file, trial_id, profile, device)


@app.command()
def query(
    sql: Annotated[str | None, typer.Argument(help="DuckDB SQL over the study's tables and views (every one, "
                                              "with its columns: docs/reference/tables.md).")] = None,
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
    query_results(sql, study, profile, file, output_format, param, out_file, results)


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
    write_report(study, profile, out_dir, param, results)


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
    compare: Annotated[str | None, typer.Option(
        "--compare", metavar="GROUP_A,GROUP_B", help="Plan a comparison of these two groups instead (group ids, "
        "labels or short labels): the seeds whose paired test detects --difference with --power.")] = None,
    difference: Annotated[float | None, typer.Option(
        "--difference", help="--compare: the difference of mean accuracy to detect, in (0, 1].")] = None,
    power: Annotated[float, typer.Option(help="--compare: the share of studies that must detect it.")] = 0.8,
    level: Annotated[float, typer.Option(help="--compare: the test's level (significant when p < 1 - level).")]
    = 0.95,
    profile: ProfileOption = None,
    results: ResultsOption = DEFAULT_RESULTS,
):
    """How many weight x data seeds give a target half width, by simulation from each group's fit; with
    --compare, how many detect a difference between two groups, by simulation from the fit of their
    paired difference (--metric, --half-width and --threshold do not apply)."""
    if compare is None and difference is None:
        plan_seeds(study, metric, half_width, digits, data_seeds, threshold, profile, results)
    else:
        plan_comparison_seeds(study, compare, difference, power, level, digits, data_seeds, profile, results)


@app.command()
def replay(
    study_file: Annotated[Path, typer.Argument(help="The search's study file.")],
    pruner: Annotated[str | None, typer.Option(
        "--pruner", help="The pruner to replay, as search.pruner is written: a name (median) or YAML "
        "('{name: median, n_warmup_steps: 1000}'); default: the study file's.")] = None,
    resamples: Annotated[int, typer.Option("--resamples", min=1, help="Replays: the stored seeds, then "
                                           "bootstraps of them (or draws of a simulated search's seeds).")] = 200,
    seed: Annotated[int, typer.Option("--seed", help="Seeds the resampling (and the simulation).")] = 0,
    simulate: Annotated[str | None, typer.Option(
        "--simulate", metavar="POINTSxSEEDS", help="Replay over a simulated search with a known best point "
        "(e.g. 100x3), evaluated at the study file's evaluation steps, instead of the stored one.")] = None,
    draws: Annotated[int, typer.Option("--draws", min=1, help="With --simulate: replay over this many "
                                       "simulated searches (seeds --seed, --seed + 1, ...), --resamples each, "
                                       "and print the median and the worst of them.")] = 1,
    profile: ProfileOption = None,
    results: ResultsOption = DEFAULT_RESULTS,
):
    """Replay a pruner over a finished search's stored evaluations: the compute it would have saved and
    how often it would have pruned the point that finished best, over resamples of the seeds."""
    replay_pruner(study_file, profile, pruner, resamples, seed, simulate, draws, results)


@app.command()
def ui(
    study: Annotated[str | None, typer.Option("--study", help="Print this study's experiment URL too.")] = None,
    profile: ProfileOption = None,
    port: Annotated[int, typer.Option("--port", help="Port on 127.0.0.1.")] = 5000,
    results: ResultsOption = DEFAULT_RESULTS,
    tracking_uri: TrackingOption = None,
):
    """The MLflow UI on 127.0.0.1 over the study's tracking store (Ctrl-C stops it)."""
    serve_ui(study, profile, port, results, tracking_uri)


@app.command()
def bench(
    only: Annotated[list[Benchmark] | None, typer.Option("--only", help="Run only these benchmarks (repeatable).")]
    = None,
    run_all: Annotated[bool, typer.Option("--all", help="Run every benchmark, the long ones too.")] = False,
    trials: Annotated[int | None, typer.Option(
        "--trials", min=25, help="scale_run: trials of its study (weight seeds x 25 data seeds; default 1,000).")] = None,
    results: Annotated[Path, typer.Option("--results", help="Results root where the gpu rows record their rates "
                                          "(gpu_rates.json), read by `validate --results` there.")] = DEFAULT_RESULTS,
):
    """Speed ratios, each measured against its reference in the same run. Without --only or --all, the quick
    rows only: it names the long ones it leaves out."""
    run_bench([b.value for b in only] if only else None, run_all, trials, results)


if __name__ == "__main__":
    app()
