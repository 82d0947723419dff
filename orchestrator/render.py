"""Terminal rendering of results (rich tables)."""

from __future__ import annotations

import math

import pyarrow as pa
from rich.table import Table


def arrow_table(table: pa.Table, title: str | None = None, max_rows: int = 200) -> Table:
    out = Table(title=title, show_lines=False)
    for name in table.column_names:
        out.add_column(name, overflow="fold")
    for row in table.slice(0, max_rows).to_pylist():
        out.add_row(*(_cell(v) for v in row.values()))
    if table.num_rows > max_rows:
        out.caption = f"{max_rows} of {table.num_rows} rows shown; use --format csv for all"
    return out


def _cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return "nan" if math.isnan(value) else f"{value:.3f}"
    return str(value)


def search_points(state, top: int, total: int | None = None) -> Table:
    """The best scored points of a search (orchestrator.search.SearchState): the values
    of each point and its metric's mean, spread and range over its seed-trials."""
    names = sorted({key for point in state.points for key in point.params})
    scored = f"{len(state.points)}{f' of {total}' if total else ''} points scored"
    others = ", ".join(f"{n} {what}" for n, what in ((state.open, "open"), (state.refused, "refused")) if n)
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
