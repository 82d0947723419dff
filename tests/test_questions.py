"""The report's question records (analysis/questions.py) are the one list: the files the
report runs, what coverage.sql says each file leaves out, and the drawing functions
the figures name all come from them, and what a record says a file reads is true of
the file's SQL."""

from __future__ import annotations

import functools
import importlib
import re
from pathlib import Path

from analysis_rows import STUDY, config, write_trial

from analysis.query import MACRO_FILES, open_results, run_sql_file, sql_file
from analysis.questions import QUESTIONS, report_files
from analysis.report_parts import Plot

#: the tables whose rows a file must have to count a trial, by the kind coverage.sql names
READS_BY_TABLE = {"accuracies": re.compile(r"\b(from|join)\s+(final_|finished_)?eval\b"),
                  "samples": re.compile(r"\b(from|join)\s+(finished_|final_)?samples\b")}


def declared(kind: str) -> list[str]:
    return [f.name for q in QUESTIONS for f in q.files if kind in dict(f.reads)]


def test_every_file_the_report_runs_is_an_analysis_file_named_once() -> None:
    files = report_files()
    assert len(files) == len(set(files))
    for name in files:
        assert sql_file(f"{name}.sql").exists(), name


@functools.cache
def macro_sources() -> tuple[dict[str, str], re.Pattern]:
    """Each table macro's file's SQL, by macro, and a pattern finding a call of any of them."""
    macros = {}
    for name in MACRO_FILES:
        source = sql_file(name).read_text()
        for macro in re.findall(r"create\s+(?:or\s+replace\s+)?macro\s+(\w+)", source, re.IGNORECASE):
            macros[macro] = source
    return macros, re.compile(rf"\b({'|'.join(map(re.escape, macros))})\s*\(")


def with_macros(text: str) -> str:
    """A file's SQL and that of every table macro it calls, and that they call: each
    macro file's SQL added once, however many of its macros are called (added once a
    macro, the text grew to megabytes and the searches took 20 s)."""
    macros, call = macro_sources()
    seen: set[str] = set()
    added: set[str] = set()
    while True:
        called = set(call.findall(text)) - seen
        if not called:
            return text
        seen |= called
        new = {macros[m] for m in called} - added
        added |= new
        text += "".join(sorted(new))


def test_what_a_record_says_a_file_reads_is_what_its_sql_reads() -> None:
    for kind, pattern in READS_BY_TABLE.items():
        reading = [name for name in report_files()
                   if pattern.search(with_macros(sql_file(f"{name}.sql").read_text()))
                   and name != "coverage"]  # coverage reads every table to find what lacks
        assert sorted(declared(kind)) == sorted(reading), kind


def test_every_figure_names_a_drawing_function_that_exists() -> None:
    plots = [p for q in QUESTIONS for p in q.parts if isinstance(p, Plot)]
    assert plots
    for plot in plots:
        module, function = plot.draw.rsplit(".", 1)
        assert callable(getattr(importlib.import_module(f"analysis.{module}"), function)), plot.draw


def test_coverage_lists_the_files_the_records_say_leave_a_trial_out(tmp_path: Path) -> None:
    write_trial(tmp_path, STUDY, config("fire", 0, 0), {2: 1.0, 6: 0.5})
    no_eval = write_trial(tmp_path, STUDY, config("fire", 1, 0), None, status="diverged")
    with open_results(tmp_path, STUDY) as con:
        rows = run_sql_file(con, sql_file("coverage.sql")).to_pylist()
    lacking = {(r["trial_id"], r["missing"]): r["left_out_of"] for r in rows}
    assert lacking[(no_eval, "accuracies")] == ", ".join(declared("accuracies"))
    assert lacking[(no_eval, "samples")] == ", ".join(declared("samples"))
    assert "variance" in declared("accuracies") and "cascade" in declared("samples")
