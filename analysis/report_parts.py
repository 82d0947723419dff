"""The record types of `lg-study report`: a question (one section of the page: the SQL
files it runs and the rows each reads) and the parts it shows, tables, figures and
prose, each rendered by one generic method.

A part's text may depend on the rows (a threshold, an interval's level), so captions
and columns are either text or a function of the tables. Figures name their drawing
function as "module.function" of analysis/ and resolve it when drawn, so that reading
the records (analysis.query does, for coverage.sql) does not import matplotlib.
"""

from __future__ import annotations

import html
import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from analysis import report_html as rendering
from analysis.report_html import MAX_GROUPS, Figure

Rows = list[dict[str, Any]]
Tables = dict[str, Rows]
Text = str | Callable[[Tables], str]
Columns = tuple[tuple[str, str], ...] | Callable[[Tables], tuple[tuple[str, str], ...]]


def always(tables: Tables) -> bool:
    return True


def text(value: Text, tables: Tables) -> str:
    return value(tables) if callable(value) else value


def n_groups(tables: Tables) -> int:
    """Configuration groups with finished trials: what a figure of every group draws."""
    return len({r["group_id"] for r in tables["final_accuracy"]})


@dataclass
class Canvas:
    """Where figures go, and the list the report keeps of them."""

    out_dir: Path
    figures: list[Path] = field(default_factory=list)


@dataclass(frozen=True)
class Prose:
    html: Text  # already HTML: a paragraph that explains the section
    when: Callable[[Tables], bool] = always

    def render(self, tables: Tables, canvas: Canvas) -> list[str]:
        return [text(self.html, tables)]


@dataclass(frozen=True)
class Table:
    rows: Callable[[Tables], Rows]
    columns: Columns
    caption: Text
    collapsed: bool = False
    when: Callable[[Tables], bool] = always
    #: columns behind the table's "all columns" <details> only
    more: Columns = ()

    def render(self, tables: Tables, canvas: Canvas) -> list[str]:
        columns = self.columns(tables) if callable(self.columns) else self.columns
        more = self.more(tables) if callable(self.more) else self.more
        return [rendering.table(self.rows(tables), list(columns), text(self.caption, tables),
                                collapsed=self.collapsed, more=list(more))]


@dataclass(frozen=True)
class Plot:
    file: str  # the PNG's name beside the page
    title: str
    caption: Text
    sql: tuple[str, ...]  # the files its numbers come from, named in the caption
    draw: str  # "module.function" of analysis/, called as function(*args(tables), path)
    args: Callable[[Tables], tuple]
    groups: Callable[[Tables], int] = n_groups  # how many groups there are to draw
    when: Callable[[Tables], bool] = always
    #: the groups without the quantity drawn, said in the caption rather than drawn empty
    lacking: Callable[[Tables], str] = lambda tables: ""

    def render(self, tables: Tables, canvas: Canvas) -> list[str]:
        module, function = self.draw.rsplit(".", 1)
        draw = getattr(importlib.import_module(f"analysis.{module}"), function)
        path = draw(*self.args(tables), canvas.out_dir / self.file)
        if path is None:
            return [f"<p class='empty'>{html.escape(self.title)}: nothing to draw.</p>"]
        canvas.figures.append(path)
        groups = self.groups(tables)
        left_out = f" Only the first {MAX_GROUPS} of {groups} groups are drawn." if groups > MAX_GROUPS else ""
        figure = Figure(self.file, self.title, text(self.caption, tables) + self.lacking(tables), self.sql)
        return [rendering.figure_html(path, figure, left_out)]


@dataclass(frozen=True)
class Computed:
    """A part whose HTML needs more than rows, e.g. seed planning's simulations."""

    render_html: Callable[[Tables], list[str]]
    when: Callable[[Tables], bool] = always

    def render(self, tables: Tables, canvas: Canvas) -> list[str]:
        return self.render_html(tables)


Part = Prose | Table | Plot | Computed


@dataclass(frozen=True)
class SqlFile:
    """An analysis file a question runs, and the rows a finished trial must have for the
    file to count it (coverage.sql lists the trials each file leaves out): kind of rows ->
    what of the file still counts a trial without them ('' when nothing does)."""

    name: str
    reads: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Question:
    anchor: str  # the section's id on the page
    heading: str | None  # None: the file feeds the page's header, not a section
    files: tuple[SqlFile, ...]
    parts: tuple[Part, ...] = ()
    nav: str | None = None  # its name in the page's table of contents

    def render(self, tables: Tables, canvas: Canvas) -> list[str]:
        if self.heading is None:
            return []
        out = [f"<h2 id='{self.anchor}'>{self.heading}</h2>"]
        for part in self.parts:
            if part.when(tables):
                out += part.render(tables, canvas)
        return out
