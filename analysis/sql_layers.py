"""The SQL files of analysis/sql, by layer, and the order they load in.

Three layers, one folder each: ``staging`` (views over the results files and the views
derived from them: trials, groups, final_eval, ...), ``macros`` (formulas and table
macros that take their rows as an argument) and ``questions`` (what a user asks: the
files `lg-study query` and the report run). A file is known by its bare name
(``lucky_tickets.sql``), unique across the layers.

Every file opens with a ``-- reads:`` line naming the views, macros and functions of
other files it uses; a file defines what its ``create ... view|macro|table`` statements
name. The load order of the staging and macro files is a topological sort of those
declarations (DuckDB binds a scalar macro's functions when it is created, so a file
must load after the files it reads), never a list kept by hand.
tests/test_sql_layers.py checks each declaration against the file's text.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path

LAYERS = ("staging", "macros", "questions")
#: the layers whose files every connection loads (the questions are run on demand)
DEFINITION_LAYERS = ("staging", "macros")
#: the staging file of the views over the results files (analysis/query.py points each
#: at the files it lists) and the file of their empty stand-ins for a table with no file
FILE_VIEWS_FILE = "tables.sql"
EMPTY_TABLES = "empty_tables.sql"
#: what analysis/query.py's prepare_connection defines in Python on every connection
PYTHON_DEFINED = ("chi2_quantile", "f_quantile", "t_quantile", "t_cdf", "share_intervals",
                  "success_difference_p", "analysis_reads")

_READS = re.compile(r"^-- reads:(.*)$", re.MULTILINE)
_DEFINES = re.compile(
    r"^create\s+(?:or\s+replace\s+)?(?:temp(?:orary)?\s+)?(view|macro|table)\s+(\w+)",
    re.IGNORECASE | re.MULTILINE,
)


class SqlLayerError(RuntimeError):
    """SQL files whose declarations do not give a load order (an unknown name, a cycle,
    a name defined twice): a bug in analysis/sql, found when a connection is opened."""


@dataclass(frozen=True)
class SqlFile:
    name: str  # e.g. "lucky_tickets.sql"
    layer: str
    path: Path
    reads: tuple[str, ...]
    defines: tuple[str, ...]  # views, macros and tables, in the file's order
    views: tuple[str, ...]  # those of them that are views


def sql_root() -> Path:
    """analysis/sql as installed with the package."""
    return Path(str(files("analysis") / "sql"))


def parse(path: Path, layer: str) -> SqlFile:
    """One file's declarations: its ``-- reads:`` line (required) and what it creates."""
    text = path.read_text()
    declared = _READS.findall(text)
    if len(declared) != 1:
        raise SqlLayerError(f"{path}: needs exactly one '-- reads: name, ...' line naming what it "
                            f"reads of the other SQL files (found {len(declared)})")
    reads = tuple(name.strip() for name in declared[0].split(",") if name.strip())
    created = _DEFINES.findall(text)
    defines = tuple(dict.fromkeys(name.lower() for _, name in created))
    views = tuple(dict.fromkeys(name.lower() for kind, name in created if kind.lower() == "view"))
    return SqlFile(path.name, layer, path, reads, defines, views)


@functools.cache
def sql_files() -> dict[str, SqlFile]:
    """Every SQL file by bare name, layer by layer."""
    found: dict[str, SqlFile] = {}
    for layer in LAYERS:
        for path in sorted((sql_root() / layer).glob("*.sql")):
            if path.name in found:
                raise SqlLayerError(f"{path}: the name {path.name} is also {found[path.name].path}; "
                                    "a file is known by its bare name, so names are unique across layers")
            found[path.name] = parse(path, layer)
    return found


def sql_file(name: str) -> Path:
    """The path of the SQL file called ``name`` (e.g. "variance.sql"), in whichever layer."""
    known = sql_files()
    if name not in known:
        raise LookupError(f"no SQL file {name!r} under {sql_root()}; known: {', '.join(sorted(known))}")
    return known[name].path


def shown_path(name: str) -> str:
    """Where the SQL file called ``name`` sits in the source tree, as the report names it
    (e.g. "analysis/sql/questions/variance.sql")."""
    return sql_file(name).relative_to(sql_root().parent.parent).as_posix()


def definers() -> dict[str, str]:
    """Each name a staging or macro file defines -> that file (empty_tables.sql's stand-ins
    left out: they replace tables.sql's views, they are not another definition)."""
    owner: dict[str, str] = {}
    for sql in sql_files().values():
        if sql.layer not in DEFINITION_LAYERS or sql.name == EMPTY_TABLES:
            continue
        for name in sql.defines:
            if name in owner:
                raise SqlLayerError(f"{sql.path}: {name} is already defined by {owner[name]}")
            owner[name] = sql.name
    return owner


def depends_on(sql: SqlFile, owner: dict[str, str]) -> set[str]:
    """The files ``sql`` reads from, by its declaration; an unknown name is an error."""
    files_read = set()
    for name in sql.reads:
        if name in PYTHON_DEFINED or name in sql.defines:
            continue
        if name not in owner:
            raise SqlLayerError(f"{sql.path}: '-- reads:' names {name!r}, which no staging or macro file "
                                f"defines; known: {', '.join(sorted([*owner, *PYTHON_DEFINED]))}")
        files_read.add(owner[name])
    return files_read


@functools.cache
def load_order(layer: str) -> tuple[str, ...]:
    """The files of ``layer`` in an order where each loads after the files it reads
    (Kahn's algorithm, ties by name so the order is the same on every machine)."""
    owner = definers()
    members = [sql for sql in sql_files().values() if sql.layer == layer and sql.name != EMPTY_TABLES]
    waiting = {sql.name: depends_on(sql, owner) & {m.name for m in members} for sql in members}
    order: list[str] = []
    while waiting:
        ready = sorted(name for name, needs in waiting.items() if not needs)
        if not ready:
            cycle = ", ".join(f"{name} reads {sorted(needs)}" for name, needs in sorted(waiting.items()))
            raise SqlLayerError(f"analysis/sql/{layer}: the '-- reads:' declarations form a cycle: {cycle}")
        order.append(ready[0])
        del waiting[ready[0]]
        for needs in waiting.values():
            needs.discard(ready[0])
    return tuple(order)


def question_path(given: Path) -> Path:
    """The file `lg-study query --file` runs: ``given`` where it exists, else the SQL file of
    that bare name (``lucky_tickets.sql``, or ``lucky_tickets``), so a question runs by its
    name from any folder, and paths of the flat layout (``analysis/variance.sql``) still work."""
    given = Path(given)
    if given.exists():
        return given
    name = given.name if given.suffix == ".sql" else f"{given.name}.sql"
    return sql_files()[name].path if name in sql_files() else given
