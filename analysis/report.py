"""`lg-study report`: the analysis SQL files run over one study, as one HTML page.

The page holds the key numbers as HTML tables and the plots as PNG files (written
beside it and embedded in it, so the page also stands alone). Every number comes from
one of the analysis/sql/questions files; this module only runs the files the questions of
analysis/questions.py name and renders each question's record.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from analysis import report_html as rendering
from analysis import report_sections
from analysis.query import (
    QueryError,
    open_results,
    read_once,
    run_sql_file,
    sql_file,
    sql_parameters,
)
from analysis.questions import QUESTIONS, report_files
from analysis.report_parts import Canvas
from results_contract.layout import REPORT

SQL_FILES = report_files()


@dataclass
class Report:
    page: Path
    figures: list[Path] = field(default_factory=list)
    tables: dict[str, list[dict[str, Any]]] = field(default_factory=dict)


def sql_path(name: str) -> Path:
    return sql_file(f"{name}.sql")


def build_report(
    results_root: Path,
    study: str,
    out_dir: Path | None = None,
    params: dict[str, str] | None = None,
    seeds: tuple[str, list[dict[str, Any]]] | None = None,
    profile: str | None = None,
) -> Report:
    """Run the analysis files over ``study`` and write ``index.html`` plus PNGs to
    ``out_dir`` (default ``<results_root>/<study>/report``). ``seeds``: a `seeds.until`
    study's target in words and where each group stands (orchestrator.running.seed_answers).
    ``results_root`` is the profile's when the study ran under one (analysis.query.
    profile_root); ``profile`` names it on the page.

    ``params`` go to the files that take them (e.g. ``threshold`` to lucky_tickets.sql);
    a parameter no file takes is refused. Raises LookupError for an unknown study and
    QueryError for SQL that DuckDB refuses.
    """
    results_root = Path(results_root)
    out_dir = Path(out_dir) if out_dir is not None else results_root / study / REPORT
    params = params or {}
    with open_results(results_root, study) as con:
        read_once(con)
        texts = {name: sql_path(name).read_text() for name in SQL_FILES}
        taken = {name: set().union(*sql_parameters(con, text)) for name, text in texts.items()}
        unused = sorted(set(params) - set().union(*taken.values()))
        if unused:
            accepted = ", ".join(sorted(set().union(*taken.values())))
            raise QueryError(f"no analysis file takes parameter {', '.join(unused)}; "
                             f"they take: {accepted}")
        tables = {
            name: run_sql_file(
                con, sql_path(name), {k: v for k, v in params.items() if k in taken[name]}
            ).to_pylist()
            for name in SQL_FILES
        }
    out_dir.mkdir(parents=True, exist_ok=True)
    report = Report(page=out_dir / "index.html", tables=tables)
    shown, key = rendering.short_labelled(tables)
    sections = [rendering.label_key(key), *_sections(shown, out_dir, report)]
    if seeds is not None:
        sections.insert(0, report_sections.seeds_section(*seeds))
    contents = [(q.anchor, q.nav) for q in QUESTIONS if q.nav]
    report.page.write_text(rendering.page(study, results_root, tables, sections, params, profile,
                                          [("groups", "groups"), *contents]))
    return report


# --- the sections ---------------------------------------------------------------------


def _sections(tables: dict[str, list[dict]], out_dir: Path, report: Report) -> list[str]:
    canvas = Canvas(out_dir)
    sections = [html for question in QUESTIONS for html in question.render(tables, canvas)]
    report.figures += canvas.figures
    return sections
