"""Terminal rendering of results (rich tables)."""

from __future__ import annotations

import math

import pyarrow as pa
from rich.table import Table

from results_contract.trial_status import FINISHED, TrialStatus


def arrow_table(table: pa.Table, title: str | None = None, max_rows: int = 200) -> Table:
    out = Table(title=title, show_lines=False)
    for name in table.column_names:
        out.add_column(name, overflow="fold")
    for row in table.slice(0, max_rows).to_pylist():
        out.add_row(*(_cell(v) for v in row.values()))
    if table.num_rows > max_rows:
        out.caption = f"{max_rows} of {table.num_rows} rows shown; use --format csv for all"
    return out


def problem_tables(failures: pa.Table, environments: pa.Table) -> list[Table]:
    """What `status` shows beyond the counts: failed and diverged trials (failures.sql), and
    groups that ran in more than one environment (environments.sql); empty ones left out."""
    tables = []
    if failures.num_rows:
        tables.append(arrow_table(failures, "failed and diverged trials"))
    if environments.num_rows:
        tables.append(arrow_table(
            environments.drop_columns(["study", "environments_in_group"]),
            "configuration groups whose trials ran in more than one environment: their seed variance "
            "includes floating-point chaos (environments.sql)",
        ))
    return tables


def _cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return "nan" if math.isnan(value) else f"{value:.3f}"
    return str(value)


def run_summary(summary) -> list[str]:
    """What became of a run's trials (orchestrator.running.run_context.RunSummary), one line
    each, in rich markup; `lg-study run` prints them before its table."""
    lines = []
    if summary.skipped:
        lines.append(f"{summary.skipped} of {summary.total} trials had already finished and were not run again")
    if summary.reused:
        sources = sorted(set(summary.reused.values()))
        lines.append(f"{len(summary.reused)} of {summary.total} trials were reused, not trained: they had "
                     f"finished in {', '.join(sources)} under the same results folder (--no-reuse trains them)")
    if summary.resumed:
        lines.append(f"{len(summary.resumed)} trials had been interrupted or had failed and were run again "
                     "(from their last checkpoint where they had one)")
    if summary.killed_runs:
        lines.append(f"{len(summary.killed_runs)} MLflow runs of interrupted trials were ended as KILLED")
    repaired = [trial_id for trial_id in summary.repaired_runs if trial_id not in summary.reused]
    if repaired:  # a reused trial's run is made from its rows too, and said above
        lines.append(f"{len(repaired)} MLflow runs of finished trials were completed from the results")
    if summary.ran:
        pruned = f", {len(summary.pruned)} pruned (stopped early by the search's pruner)" if summary.pruned else ""
        lines.append(f"ran {summary.ran} trials in {summary.wall_s:.0f} s, {len(summary.failed)} failed{pruned}")
    return lines


def progress_line(statuses: dict[str, str], planned: list[str] | None, total: int | None) -> str:
    """How far a study is, for `lg-study status`: its planned trials (``planned``: a grid's
    trial ids) finished and not started, and the trials in its folder that are not
    among them (another design's); a search gives only its ``total``. Empty when neither
    is known (the study given by name)."""
    if planned is not None:
        finished = sum(statuses.get(trial_id) in FINISHED for trial_id in planned)
        not_started = sum(trial_id not in statuses for trial_id in planned)
        line = f"{finished} of {len(planned)} finished, {not_started} not started"
        others = len(set(statuses) - set(planned))
        return line + (f"; {others} trials in the folder are not in this study's design" if others else "")
    if total is not None:
        finished = sum(status in FINISHED for status in statuses.values())
        pruned = sum(status == TrialStatus.PRUNED for status in statuses.values())
        stopped = f", {pruned} pruned" if pruned else ""  # a search's pruner stopped them: not run again
        return f"{finished} of {total} finished{stopped}, {max(0, total - len(statuses))} not started"
    return ""


def trial_list(study) -> Table:
    """The trials of a study (orchestrator.studies.study.Study) with their index, as
    `lg-study trial STUDY.yaml --trial INDEX` takes it, and their axis values."""
    axes = list(study.spec.axes)
    out = Table(title=f"{study.name}: {len(study.trials)} trials")
    for name in ("index", "trial id", *axes):
        out.add_column(name, overflow="fold")
    for index, (config, values) in enumerate(zip(study.trials, study.axis_values, strict=True)):
        out.add_row(str(index), config.trial_id, *(_value(values.get(axis)) for axis in axes))
    return out


def interrupted_line(summary) -> str:
    return (f"[yellow]interrupted[/yellow]: {len(summary.interrupted)} of {summary.total} trials not "
            "finished; run the same command again to resume them")


def search_points(state, top: int, total: int | None = None) -> Table:
    """The best scored points of a search (orchestrator.running.search.SearchState): the values
    of each point and its metric's mean, spread and range over its seed-trials."""
    names = sorted({key for point in state.points for key in point.params})
    scored = f"{len(state.points)}{f' of {total}' if total else ''} points scored"
    others = ", ".join(f"{n} {what}" for n, what in ((state.open, "open"), (state.pruned, "pruned"),
                                                           (state.refused, "refused")) if n)
    out = Table(title=f"search {state.name}: best points by mean {state.metric} over seeds",
                caption=f"{scored}{'; ' + others if others else ''}; sd = sample standard deviation over seeds")
    for name in ("rank", "point", *names, "mean", "sd", "min", "max", "seeds"):
        out.add_column(name, justify="left" if name in names else "right", overflow="fold")
    for rank, point in enumerate(state.points[:top], 1):
        values = list(point.scores.values())
        out.add_row(str(rank), str(point.number), *(_value(point.params.get(n)) for n in names),
                    *(_cell(v) for v in (point.mean, point.sd, min(values), max(values))), str(len(values)))
    return out


def best_point(state) -> str:
    """One line naming the best point of a search, its values and its score over seeds."""
    best = state.points[0]
    values = ", ".join(f"{key}={_value(value)}" for key, value in best.params.items())
    return (f"best point {best.number}: {values}: {state.metric} {best.mean:.3f} "
            f"(sd {_cell(best.sd)}) over {len(best.scores)} seeds")


def _value(value) -> str:
    """A searched value: learning rates need significant digits, not three decimals."""
    return f"{value:.3g}" if isinstance(value, float) else _cell(value)


def mlflow_lag_line(lag, folder, command: str, driven: bool = False) -> str:
    """The warning a run or `status` gives while a study's MLflow runs lag its rows
    (orchestrator.mlflow_tracking.lag_ledger.Lag): which server, since when and why,
    how many trials, that the rows are safe, and what catches the runs up (``driven``:
    a driver runs the study now, and syncs them once the server answers)."""
    from datetime import datetime

    since = f"{datetime.fromisoformat(lag.down_since):%Y-%m-%d %H:%M:%S} UTC" if lag.down_since else ""
    down = f"unreachable since {since} ({lag.reason})" if since else "behind"
    owed = f"the runs of {len(lag.trials)} trials lag their rows" if lag.trials else "its runs lag their rows"
    later = ("the running lg-study syncs them once it answers" if driven else
             f"they catch up at the next  lg-study run  of the study, or with  {command}")
    return f"[yellow]warning:[/yellow] MLflow at {lag.tracking_uri} was {down}: {owed}, which are safe in {folder}; {later}"
