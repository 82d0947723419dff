"""DuckDB over the results store: open the views, run SQL, format what comes back.

The views and macros themselves live in analysis/sql's staging and macros folders
(analysis/sql_layers.py: the layers and the load order their files declare), so the
DuckDB command-line client can load the same definitions.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import math
import re
import threading
import warnings
from collections.abc import Collection
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from analysis.compare_interval import register_comparison_functions
from analysis.quantiles import register_quantiles
from analysis.questions import reads_table
from analysis.share_intervals import register_share_intervals
from analysis.sql_layers import EMPTY_TABLES, FILE_VIEWS_FILE, load_order, sql_file, sql_files
from results_contract import identity
from results_contract.damaged import DamagedResultsWarning
from results_contract.layout import (
    COMPACTED,
    PARTITION_KEY,
    TABLES,
    generation_of,
    list_profiles,
    list_studies,
    profile_root,
    results_roots,
)

#: tables.sql's views that read a table's files besides the table's own view: the eval
#: files hold eval.grid's rows too, which grid_eval shows and eval leaves out
FILE_VIEWS = {"eval": ("grid_eval",)}
#: the staging files that derive views from tables.sql's, in the order their
#: declarations give (analysis/sql_layers.py)
DERIVED_FILES = tuple(name for name in load_order("staging") if name != FILE_VIEWS_FILE)
#: what those files define over the tables, in load order: views (e.g. groups,
#: final_eval) and the table macro trial_identity, which binds the groups view when it
#: is created, so it comes after it rather than with tables.sql's macros
DERIVED_VIEWS = tuple(defined for name in DERIVED_FILES for defined in sql_files()[name].defines)
HIDDEN_ROWS = "hidden_rows"  # tables.sql's view of the compacted rows that readers skip
ROOT_VARIABLE = "results_glob_root"  # the DuckDB variable tables.sql reads
MACROS = "macros"  # _statements_by_view's key for a file's statements that define no view
#: the files of macros (and formulas) that prepare_connection defines after the
#: registered functions, in the order their declarations give
MACRO_FILES = load_order("macros")
#: the files that define views, macros or functions rather than answer a question
DEFINITION_FILES = (EMPTY_TABLES, *load_order("staging"), *MACRO_FILES)

# duckdb 2.0.1 keeps the comments before a statement in its extracted text; 2.0.0 drops them.
_VIEW_NAME = re.compile(
    r"(?:\s*--[^\n]*\n|\s*/\*.*?\*/)*\s*create\s+(?:or\s+replace\s+)?(?:temp(?:orary)?\s+)?view\s+(\w+)",
    re.IGNORECASE | re.DOTALL,
)
_DEFINITION_NAME = re.compile(
    r"(?:\s*--[^\n]*\n|\s*/\*.*?\*/)*\s*create\s+(?:or\s+replace\s+)?(?:temp(?:orary)?\s+)?(?:view|macro)\s+(\w+)",
    re.IGNORECASE | re.DOTALL,
)
_GETVARIABLE = re.compile(r"getvariable\(\s*'(\w+)'\s*\)", re.IGNORECASE)


class QueryError(ValueError):
    """SQL that DuckDB refused; the message is DuckDB's own."""


class MigrationNeeded(LookupError):
    """Results that an older lg-study wrote and `lg-study migrate` upgrades (trials rows
    without the group columns). A LookupError, as for an unknown study: the commands
    that read results say it and stop."""


# Statements that write files or reach outside the in-memory database: `query` and the
# analysis files only read the results (write a result with --format ... --out FILE).
WRITING_STATEMENTS = {
    duckdb.StatementType.COPY, duckdb.StatementType.COPY_DATABASE, duckdb.StatementType.EXPORT,
    duckdb.StatementType.ATTACH, duckdb.StatementType.DETACH, duckdb.StatementType.LOAD,
    duckdb.StatementType.EXTENSION, duckdb.StatementType.VACUUM,
}
_PARTITION = re.compile(rf"{PARTITION_KEY}=[^/]+")
_TABLE_GLOB = re.compile(r"getvariable\(\s*'results_glob_root'\s*\)\s*\|\|\s*'/\w+/\*\*/\*\.parquet'")


def open_results(root: Path, study: str | None = None,
                 trial_ids: Collection[str] | None = None) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB with the four results views over one study, or all if None.
    ``trial_ids`` (with a study): the views read those trials' own files and the
    compacted ones alone, so that a few trials of a study not yet compacted cost their
    files rather than the study's (listing and opening 40,000 files at 10,000 trials)."""
    root = Path(root).resolve()
    studies = list_studies(root)
    if study is not None and study not in studies:
        known = ", ".join(studies) or "none"
        profiles = [p for p in list_profiles(root) if study in list_studies(profile_root(root, p))]
        hint = f"; it has results under --profile {', '.join(profiles)}" if profiles else ""
        raise LookupError(f"no study {study!r} under {root}; studies there: {known}{hint}")
    # Every study is the glob root/*; the folder names then only reach SQL via trials.study.
    glob_root = root / study if study is not None else root / "*"
    file_glob = "{table}/**/*.parquet" if study is not None else "*/{table}/**/*.parquet"
    search_root = root / study if study is not None else root

    con = analysis_connection()
    views = _statements_by_view(con, (FILE_VIEWS_FILE, *DERIVED_FILES))
    empties = _statements_by_view(con, (EMPTY_TABLES,))
    try:
        for statement in views[MACROS]:  # the views read through tables.sql's macros
            con.execute(statement)
        con.execute("set TimeZone = 'UTC'")  # timestamps print the same on every machine
        # a file's footer is read once per connection, not once per query that names its table
        con.execute("set parquet_metadata_cache = true")
        con.execute(f"set variable {ROOT_VARIABLE} = ?", [glob_root.as_posix()])
        con.execute(views[HIDDEN_ROWS])  # which compacted rows a trial's own file replaces
        if trial_ids is not None:
            # listed once, with the few files the views read: its glob lists every trial's
            # files (1-2 s at 10,000 trials), at each query that reads a table otherwise
            con.execute(f"create temp table listed_{HIDDEN_ROWS} as select * from {HIDDEN_ROWS}")
            con.execute(f"create or replace temp view {HIDDEN_ROWS} as select * from listed_{HIDDEN_ROWS}")
        for table in TABLES:
            if trial_ids is not None and study is not None:
                files = _trials_files(search_root / table, trial_ids)
            else:
                files = sorted(search_root.glob(file_glob.format(table=table)))
            files = [path for path in files if _current(path)]
            footers = {path: _footer(path, table) for path in files}
            good = [path for path, footer in footers.items() if footer is not None]
            if table == "trials":
                _refuse_rows_without_groups(root, [p for p in good if "group_id" not in footers[p].schema.names])
            for view in (table, *FILE_VIEWS.get(table, ())):
                if not good:
                    con.execute(empties[view])
                elif len(good) == len(files) and trial_ids is None:
                    con.execute(views[view])  # the glob: later files show up too
                else:  # the good files by name, fixed for this connection
                    con.execute(_view_over_files(views[view], table, good))
        for name in DERIVED_VIEWS:  # views over the tables, e.g. groups
            con.execute(views[name])
    except MigrationNeeded:
        con.close()
        raise
    except duckdb.Error as error:
        con.close()
        raise QueryError(str(error)) from error
    return con


def _trials_files(folder: Path, trial_ids: Collection[str]) -> list[Path]:
    """A table's compacted files and the own files of ``trial_ids``, under its ``folder``."""
    own = [path for trial_id in sorted(trial_ids)
           for path in sorted((folder / f"{PARTITION_KEY}={trial_id}").glob("*.parquet"))]
    return sorted((folder / COMPACTED).glob("*.parquet")) + own


def _current(path: Path) -> bool:
    """Not an older compacted generation (a compaction's leftover, which no reader reads)."""
    generation = generation_of(path)
    if generation is None:
        return True
    return generation == max(g for other in path.parent.glob("gen-*.parquet") if (g := generation_of(other)) is not None)


def read_once(con: duckdb.DuckDBPyConnection, tables: tuple[str, ...] = ("trials", "eval"),
              groups: Collection[str] | None = None, groups_of: Collection[str] | None = None) -> None:
    """Load ``tables`` into memory and point their views at the copies, for a connection
    that runs many files (the report): each query that names a table otherwise lists
    and reads its files again (at 10,000 trials, 9-27 s a file before any arithmetic;
    docs/performance.md). The views over them (groups, final_eval, ...) bind by name, so
    they read the copies too. `samples` stays on disk: it can hold millions of rows.

    ``groups`` (group ids) and ``groups_of`` (trial ids: their groups): only the rows of
    those configuration groups' trials are loaded, so that every file then answers for
    those groups alone, at their cost rather than the study's (the MLflow parents of the
    groups whose trials just finished: orchestrator.running.group_answers)."""
    some = groups is not None or groups_of is not None
    if some:
        con.execute("create or replace temp table kept_trials as select trial_id from trials "
                    "where group_id in (select unnest(?::varchar[])) or group_id in "
                    "(select group_id from trials where trial_id in (select unnest(?::varchar[])))",
                    [sorted(groups or []), sorted(groups_of or [])])
    for table in tables:
        kept = " where trial_id in (select trial_id from kept_trials)" if some else ""
        con.execute(f"create or replace temp table loaded_{table} as select * from {table}{kept}")
        con.execute(f"create or replace temp view {table} as select * from loaded_{table}")


def _footer(path: Path, table: str) -> pq.FileMetaData | None:
    """The footer of ``path`` if the views can read it; if not, warn naming it and why."""
    in_layout = _PARTITION.fullmatch(path.parent.name) or generation_of(path) is not None
    if path.parent.parent.name != table or not in_layout:
        reason = f"not in the results layout {table}/{PARTITION_KEY}=<id>/*.parquet or {table}/{COMPACTED}/"
    else:
        try:
            return pq.read_metadata(path)  # a truncated or foreign file has no valid footer
        except (OSError, pa.ArrowException) as error:
            reason = str(error).split(". ")[0]
    warnings.warn(f"skipping damaged results file {path}: {reason}", DamagedResultsWarning, stacklevel=3)
    return None


def _refuse_rows_without_groups(root: Path, files: list[Path]) -> None:
    """Rows written before the group columns (issue 13) have no group; the staging views keep
    one definition of a group, so they are upgraded once rather than read differently.
    Reading never writes (a run may hold the study), so the upgrade is asked for."""
    if files:
        studies = sorted({path.parents[2].name for path in files})
        raise MigrationNeeded(
            f"{len(files)} trials rows of {', '.join(studies)} under {root} were written before lg-study "
            f"stored each trial's configuration group (e.g. {files[0]}); run `lg-study migrate --results "
            f"{results_roots(root)[0]}` once to add it")


def _view_over_files(statement: str, table: str, files: list[Path]) -> str:
    listed = "[" + ", ".join("'" + p.as_posix().replace("'", "''") + "'" for p in files) + "]"
    view, count = _TABLE_GLOB.subn(lambda _: listed, statement)
    if count != 1:
        raise RuntimeError(f"{sql_file(FILE_VIEWS_FILE)}: view {table} reads no results_glob_root glob")
    return view


def run_query(
    con: duckdb.DuckDBPyConnection, sql: str, params: dict[str, str] | None = None,
    *, streamed: bool = False,
) -> pa.Table:
    """Run one or more statements; return the last one's result.

    DuckDB runs the last statement at once and hands over the rows it holds, or with
    ``streamed`` (a user's SQL, whose rows may be too many to hold twice) builds a lazy
    relation that streams them into Arrow. The relation binds the statement twice,
    once for its columns and once to run it: 13-21 % of an analysis file's time on a
    small store (docs/performance.md, "DuckDB's share of the default tier").

    ``params`` fill the SQL's parameters, given as text. A parameter is either a
    ``$name`` placeholder, which must be given, or a DuckDB variable read with
    ``getvariable('name')``, which the SQL may default when it is not given (the
    analysis files do; the DuckDB command-line client sets the same variables with
    ``SET VARIABLE``). Variables are set for this call only. Each statement gets only
    the parameters it uses and the rest are dropped, so one set of parameters can
    serve any query.
    """
    params = params or {}
    try:
        statements = con.extract_statements(sql)
        if not statements:
            raise QueryError("no SQL statement to run")
        for statement in statements:
            try:
                kind = statement.type
            except ValueError:  # a statement type this duckdb's Python enum does not know
                kind = None
            if kind is None or kind in WRITING_STATEMENTS:
                what = f"{kind.name} statements are" if kind else "this statement is"
                raise QueryError(
                    f"{what} refused: queries read the results and write nothing "
                    "(save a result with --format csv/json/parquet --out FILE)"
                )
        variables = _variables(sql)  # the statements are parsed once, above
        set_variables = sorted(params.keys() & variables)
        for name in set_variables:
            con.execute(f"set variable {name} = ?", [params[name]])
        try:
            *before, last = statements
            for statement in before:
                con.execute(statement.query, _bound(statement, params))
            if streamed:
                result = con.sql(last.query, params=_bound(last, params))
                # Reading statements are lazy: errors in the last one surface here.
                return result.to_arrow_table() if result is not None else pa.table({})
            con.execute(last.query, _bound(last, params))
            return _held_rows(con) if con.description else pa.table({})
        finally:
            for name in set_variables:
                con.execute(f"reset variable {name}")
    except duckdb.Error as error:
        raise QueryError(str(error)) from error


def _bound(statement: duckdb.Statement, params: dict[str, str]) -> dict[str, str] | None:
    """The parameters ``statement`` names, from ``params``; QueryError for one not given."""
    used = statement.named_parameters
    missing = sorted(used - params.keys())
    if missing:
        names = ", ".join(f"${name}" for name in missing)
        raise QueryError(f"no value given for parameter {names}")
    return {name: params[name] for name in used} or None


def _held_rows(con: duckdb.DuckDBPyConnection) -> pa.Table:
    """The rows of the statement ``con`` just ran, as Arrow. DuckDB 2 warns that this
    copies them, which run_query chooses for results it knows are small; the warning is
    silenced here alone (catch_warnings is process-wide: at worst a thread running SQL
    at the same moment keeps this one filter)."""
    fetch = getattr(con, "fetch_arrow_table", None)  # DuckDB 1.x's name, without the warning
    if fetch is not None:
        return fetch()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Arrow output on a DB-API result", category=UserWarning)
        return con.to_arrow_table()


def sql_parameters(con: duckdb.DuckDBPyConnection, sql: str) -> tuple[set[str], set[str]]:
    """The parameters ``sql`` takes: ($name placeholders, getvariable('name') variables)."""
    try:
        statements = con.extract_statements(sql)
    except duckdb.Error as error:
        raise QueryError(str(error)) from error
    placeholders = set().union(*(statement.named_parameters for statement in statements))
    return placeholders, _variables(sql)


def _variables(sql: str) -> set[str]:
    """The DuckDB variables ``sql`` reads with getvariable('name'), less the results root."""
    return set(_GETVARIABLE.findall(sql)) - {ROOT_VARIABLE}


def run_sql_file(
    con: duckdb.DuckDBPyConnection, path: Path, params: dict[str, str] | None = None
) -> pa.Table:
    """Run the statements of a .sql file; return the last one's result."""
    return run_query(con, Path(path).read_text(), params)


def to_csv(table: pa.Table) -> str:
    """CSV with a header row; nulls are empty cells, timestamps ISO 8601."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(table.column_names)
    columns = [column.to_pylist() for column in table.columns]
    for row in zip(*columns):
        writer.writerow([_csv_cell(value) for value in row])
    return out.getvalue()


def to_markdown(table: pa.Table) -> str:
    """A GitHub-flavoured Markdown table (for docs); floats to 3 decimals, nulls empty."""
    def cell(value: Any) -> str:
        if isinstance(value, float):
            return "" if math.isnan(value) else f"{value:.3f}"
        return _csv_cell(value).replace("|", "\\|")

    lines = ["| " + " | ".join(table.column_names) + " |", "|" + "---|" * table.num_columns]
    columns = [column.to_pylist() for column in table.columns]
    lines += ["| " + " | ".join(cell(value) for value in row) + " |" for row in zip(*columns)]
    return "\n".join(lines) + "\n"


def to_json(table: pa.Table) -> str:
    """A JSON array of row objects; timestamps ISO 8601, NaN and infinities null."""
    return json.dumps([_jsonable(row) for row in table.to_pylist()])


def write_parquet(table: pa.Table, path: Path) -> None:
    """Write a query result to one Parquet file, creating its folder."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)


def prepare_connection(con: duckdb.DuckDBPyConnection) -> None:
    """Make ``con``, a connection of a database of its own, one that the analysis files
    run on: the database's planning (skip_slow_planning), functions and macros
    (_define_functions_and_macros), then the connection's own settings (_set_up_connection)."""
    skip_slow_planning(con)
    _define_functions_and_macros(con)
    _set_up_connection(con)


_SHARED: list[duckdb.DuckDBPyConnection] = []
_SHARED_LOCK = threading.Lock()


def analysis_connection() -> duckdb.DuckDBPyConnection:
    """A new connection that the analysis files run on: a cursor of one in-memory database
    per process, whose catalog holds the functions and macros, defined once (defining
    them cost 0.1-0.2 s a connection, paid by every query, report and MLflow parent's
    rewrite). Cursors share that catalog and nothing else: what a connection defines
    itself (the results views, tables loaded by read_once) is temporary, its own, so
    connections over different results folders, in different threads, never meet."""
    with _SHARED_LOCK:
        if not _SHARED:
            database = duckdb.connect()
            skip_slow_planning(database)
            _define_functions_and_macros(database)
            _SHARED.append(database)
        con = _SHARED[0].cursor()
    _set_up_connection(con)
    return con


#: optimizer passes that cost more to run than they save on the analysis files: without
#: them the files ran faster on small stores and no slower over 10,000 trials
#: (docs/performance.md, "DuckDB's share of the default tier"); the answers are the same
#: bits, as every float adds in a fixed order (tests/test_row_order.py)
SKIPPED_OPTIMIZERS = ("projection_pullup", "statistics_propagation")


def skip_slow_planning(database: duckdb.DuckDBPyConnection) -> None:
    """Disable SKIPPED_OPTIMIZERS that this DuckDB has (a setting of the whole database,
    so of every cursor over it)."""
    known = {name for (name,) in database.execute("select name from duckdb_optimizers()").fetchall()}
    skipped = [name for name in SKIPPED_OPTIMIZERS if name in known]
    if skipped:
        database.execute(f"set disabled_optimizers = '{','.join(skipped)}'")


def _define_functions_and_macros(con: duckdb.DuckDBPyConnection) -> None:
    """The functions the analysis files call: chi2_quantile and f_quantile
    (analysis/quantiles.py), share_intervals (analysis/share_intervals.py), then the
    macros of MACRO_FILES (e.g. formulas.sql's wilson_centre, mls_low, seed_components).
    identity.sql's macros read the seed columns from the connection's variables."""
    register_quantiles(con)
    register_share_intervals(con)
    register_comparison_functions(con)
    for name in MACRO_FILES:
        con.execute(sql_file(name).read_text())


def _set_up_connection(con: duckdb.DuckDBPyConnection) -> None:
    """What each connection holds for itself: the seed columns of a trial's identity
    (results_contract.identity), in the two variables identity.sql's macros read, and
    the table `analysis_reads`, which rows each file of the report reads (from
    analysis/questions.py), for coverage.sql."""
    con.execute("set variable seeds_apart = ?", [identity.apart_columns()])
    con.execute("set variable seeds_listed = ?", [identity.listed_columns()])
    con.execute("create or replace temp table analysis_reads "
                "(missing varchar, file varchar, still_counts varchar, file_order integer)")
    con.executemany("insert into analysis_reads values (?, ?, ?, ?)", reads_table())


def _statements_by_view(con: duckdb.DuckDBPyConnection, names: tuple[str, ...]) -> dict:
    """View name -> its statement, and MACROS -> the other statements, of the staging
    files ``names`` read in that order; a derived file's macros go by name too (they
    run in DERIVED_VIEWS' order, after the views they read)."""
    statements: dict = {MACROS: []}
    for name in names:
        named = _DEFINITION_NAME if name in DERIVED_FILES else _VIEW_NAME
        for statement in con.extract_statements(sql_file(name).read_text()):
            match = named.match(statement.query)
            if match:
                statements[match.group(1).lower()] = statement.query
            else:
                statements[MACROS].append(statement.query)
    wanted = (*TABLES, HIDDEN_ROWS, *DERIVED_VIEWS) if FILE_VIEWS_FILE in names else TABLES
    missing = [view for view in wanted if view not in statements]
    if missing:
        raise RuntimeError(f"analysis/sql/staging {', '.join(names)} define no view for {missing}")
    return statements


def _csv_cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, (list, dict)):
        return json.dumps(_jsonable(value))
    return str(value)


def _jsonable(value: Any) -> Any:
    # json.dumps would write NaN, which is not JSON, and cannot write datetimes.
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, bytes):
        return value.hex()
    return value
