"""The questions asked of a study's results: `lg-study query` (DuckDB SQL), `report`
(the HTML page), `plan` (seeds for a target interval or a comparison), `replay` (a
pruner over a finished or simulated search) and `ui` (the MLflow UI)."""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import typer

from orchestrator.cli_support import (
    OutputFormat,
    bad_input,
    err,
    load_study_file,
    out,
    parse_params,
    results_warnings,
    say_if_moved,
    study_argument,
)


def query_results(sql: str | None, study: str | None, profile: str | None, file: Path | None,
                  output_format: OutputFormat, param: list[str] | None, out_file: Path | None,
                  results: Path) -> None:
    """`lg-study query`: ``sql`` (or ``file``'s) over the results, printed or written."""
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
    from results_contract.layout import profile_root

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
            table = run_query(con, text, params, streamed=True)
            left_out = _pruned_left_out(con, text)
    except (QueryError, LookupError) as error:
        raise bad_input(str(error)) from None
    if left_out:
        err.print(f"{left_out} trials stopped early by a search's pruner (status pruned) are left out: this "
                  "question compares finished trials, and a seed stopped early is no sample of the final "
                  "accuracy", highlight=False)
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


def _pruned_left_out(con, text: str) -> int:
    """How many pruned trials a query over the finished trials' views (finished_trials,
    finished_eval, ...: variance, lucky tickets) leaves out; 0 for any other query."""
    from analysis.query import run_sql_file
    from analysis.sql_layers import sql_file

    if "finished_" not in text:
        return 0
    counts = {r["status"]: r["trials"] for r in run_sql_file(con, sql_file("status_counts.sql")).to_pylist()}
    return counts.get("pruned", 0)


def write_report(study: str, profile: str | None, out_dir: Path | None, param: list[str] | None,
                 results: Path) -> None:
    """`lg-study report`: the study's HTML page and its plots; the page's path on stdout."""
    params = parse_params(param)
    from analysis.query import QueryError
    from analysis.report import build_report
    from orchestrator.running.seed_answers import seed_states
    from orchestrator.store.seed_plan import state_rows
    from results_contract.layout import profile_root

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


def plan_seeds(study: str, metric: str, half_width: float, digits: int | None, data_seeds: int | None,
               threshold: float, profile: str | None, results: Path) -> None:
    """`lg-study plan`: the seed plans of a pilot study, as a table."""
    import pyarrow as pa

    from analysis.study_plan import plan_study
    from orchestrator.console.render import arrow_table
    from results_contract.layout import profile_root

    study, _ = study_argument(study, profile)
    try:
        with results_warnings():
            rows = plan_study(profile_root(results, profile), study, metric, half_width, digits, data_seeds, threshold)
    except (ValueError, LookupError) as error:
        raise bad_input(str(error)) from None
    out.print(arrow_table(pa.Table.from_pylist(rows), f"Seed plans for {study}: the mean half width of "
                          "the interval over 256 studies simulated from each group's fit (docs/analysis.md)"))


def plan_comparison_seeds(study: str, compare: str | None, difference: float | None, power: float, level: float,
                          digits: int | None, data_seeds: int | None, profile: str | None, results: Path) -> None:
    """`lg-study plan --compare`: the seeds a comparison of two groups needs, as a table."""
    import pyarrow as pa

    from analysis.comparison_planning import STUDIES, plan_study_comparison
    from orchestrator.console.render import arrow_table
    from results_contract.layout import profile_root

    if compare is None or difference is None:
        raise bad_input("--compare GROUP_A,GROUP_B and --difference go together: give both")
    study, _ = study_argument(study, profile)
    pair = [name.strip() for name in compare.split(",")]
    try:
        with results_warnings():
            row = plan_study_comparison(profile_root(results, profile), study, pair, difference, power, digits,
                                        data_seeds, level)
    except (ValueError, LookupError) as error:
        raise bad_input(str(error)) from None
    out.print(arrow_table(pa.Table.from_pylist([row]), f"Seeds to compare two groups of {study}: the paired "
                          f"test at level {level}, power over {STUDIES:,} studies simulated from the fit of "
                          "their difference (docs/analysis.md)"))


def serve_ui(study: str | None, profile: str | None, port: int, results: Path, tracking_uri: str | None) -> None:
    """`lg-study ui`: the MLflow UI served until Ctrl-C; exits with the server's code."""
    from analysis.mlflow_ui import UiError, serve, start
    from results_contract.experiments import default_store_uri, experiment_name

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


def replay_pruner(study_file: Path, profile: str | None, pruner: str | None, resamples: int, seed: int,
                  simulate: str | None, draws: int, results: Path) -> None:
    """`lg-study replay`: a pruner replayed over a finished search (or simulated ones), as a table."""
    import pyarrow as pa

    from orchestrator.console.render import arrow_table

    study = load_study_file(study_file, profile)
    search = study.spec.search
    if search is None:
        raise bad_input(f"{study_file} has no search block: a pruner stops a search's points")
    spec = _pruner_option(pruner) if pruner is not None else search.pruner
    if not spec.prunes:
        raise bad_input(f"{study_file}: search.pruner is none; name one with --pruner (e.g. --pruner median)")
    if draws > 1 and simulate is None:
        raise bad_input(f"--draws {draws}: draws are simulated searches; give --simulate (a stored search is one)")
    try:
        summaries, what = _replays(study, spec, resamples, seed, simulate, draws, results)
    except LookupError as error:
        raise bad_input(str(error)) from None
    row = {"pruner": str(spec), "search": what, **(_one_row(summaries.draws[0]) if draws == 1
                                                   else _draws_row(summaries, resamples))}
    out.print(arrow_table(pa.Table.from_pylist([row]), f"Pruner replayed over {what}: full seed-steps / "
                          "seed-steps with pruning, and the resamples that kept the best point (docs/search.md)"))


def _one_row(summary) -> dict:
    """One search's replays: compute saved over them all, and the resamples that kept the best."""
    low, high = summary.kept_interval()
    first = summary.replays[0]
    return {"resamples": len(summary.replays), "compute_saved": round(summary.saved, 2),
            "best_kept": f"{summary.kept}/{len(summary.replays)}", "best_kept_95ci": f"{low:.3f}-{high:.3f}",
            "points_pruned_first": len(first.pruned),
            # the first replay is over the seeds as stored (or the first draw of a simulation)
            "best_point_first": first.best, "best_pruned_first_at": first.pruned.get(first.best)}


def _draws_row(summaries, resamples: int) -> dict:
    """Several simulated searches: the median and the worst search, of the compute saved and
    of the share of its resamples that kept the best point, and the searches that kept it in 95 %."""
    kept, saved = summaries.kept_shares, summaries.saved
    return {"draws": len(kept), "resamples_each": resamples,
            "compute_saved_median": round(statistics.median(saved), 2), "compute_saved_worst": round(saved[0], 2),
            "best_kept_median": round(statistics.median(kept), 3), "best_kept_worst": round(kept[0], 3),
            "draws_kept_95": f"{summaries.kept_at_least(0.95)}/{len(kept)}"}


def _pruner_option(text: str):
    """--pruner: a name (median) or a YAML mapping ({name: median, n_warmup_steps: 1000})."""
    import pydantic
    import yaml

    from orchestrator.studies.config_paths import reason
    from orchestrator.studies.pruners import PrunerSpec

    try:
        return PrunerSpec.model_validate(yaml.safe_load(text))
    except (yaml.YAMLError, pydantic.ValidationError) as error:
        why = reason(error.errors()[0], PrunerSpec) if isinstance(error, pydantic.ValidationError) else str(error)
        raise bad_input(f"--pruner {text!r}: {why}") from None


def _replays(study, spec, resamples: int, seed: int, simulate: str | None, draws: int, results: Path):
    """The replays over the stored search's bootstraps, or over simulated searches' seed draws."""
    from orchestrator.store.search_curves import stored_curves
    from orchestrator.store.search_store import search_name
    from orchestrator.studies.pruner_replay import (
        DrawsSummary,
        PointCurves,
        SimulatedSearch,
        replay_draws,
        replay_over,
        stored_resamples,
    )
    from results_contract.layout import profile_root

    config = study.config_with({})
    if simulate is not None:
        points, _, seeds = simulate.partition("x")
        if not (points.isdigit() and seeds.isdigit() and int(points) >= 2 and int(seeds) >= 1):
            raise bad_input(f"--simulate {simulate!r}: expected POINTSxSEEDS, e.g. 100x3")
        every, last = config.eval.every, config.train.steps
        steps = sorted({*range(every, last + 1, every), last}) if every else [last]
        simulated = SimulatedSearch(points=int(points), seeds=int(seeds))
        what = (f"{'a simulated search' if draws == 1 else f'{draws} simulated searches'} of {points} points x "
                f"{seeds} seeds, evaluated at {len(steps)} steps")
        return replay_draws(simulated, steps, draws, resamples, seed, spec.make, spec.point_value), what
    stored = stored_curves(profile_root(results, study.profile), study.name, search_name(study),
                           study.spec.search.metric)
    points = [PointCurves(number, curves) for number, curves in stored]
    what = f"search {search_name(study)} ({len(points)} scored points, their seeds bootstrapped)"
    return DrawsSummary([replay_over(stored_resamples(points, resamples, seed), spec.make, spec.point_value)]), what
