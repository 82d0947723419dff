"""analysis/sql's layers: every file declares what it reads (its `-- reads:` line, checked
here against the file's text both ways), the load order follows from the declarations
(an unknown name or a cycle is an error that names the file), questions run by their
bare name, and the installed package ships every layer."""

from __future__ import annotations

import re
from importlib.resources import files
from pathlib import Path

import pytest
from typer.testing import CliRunner

from analysis import sql_layers
from analysis.query import DERIVED_VIEWS, MACRO_FILES, prepare_connection, sql_file
from analysis.sql_layers import (
    LAYERS,
    PYTHON_DEFINED,
    SqlLayerError,
    definers,
    load_order,
    question_path,
    sql_files,
    sql_root,
)

ROOT = Path(__file__).parents[1]


def code_of(text: str) -> str:
    """The SQL without comments, and with string literals blanked except a bare name
    (``last_steps('eval')`` reads the view eval)."""
    text = re.sub(r"--[^\n]*", "", text)
    return re.sub(r"'(?:[^']|'')*'", lambda m: m.group(0) if re.fullmatch(r"'\w+'", m.group(0)) else "''", text)


def uses(code: str, name: str) -> bool:
    """Whether ``code`` calls ``name`` (a macro or function) or reads it (a view or table)."""
    return bool(re.search(rf"(?<![\w.]){name}\s*\(|(?:from|join)\s+{name}\b|(?<![\w.]){name}\.\w|'{name}'",
                          code, re.IGNORECASE))


@pytest.mark.parametrize("name", sorted(sql_files()), ids=str)
def test_each_file_declares_exactly_what_it_reads(name: str) -> None:
    sql = sql_files()[name]
    code = code_of(sql.path.read_text())
    known = set(definers()) | set(PYTHON_DEFINED)
    used = {other for other in known - set(sql.defines) if uses(code, other)}
    assert set(sql.reads) == used, f"{sql.path}: declare '-- reads: {', '.join(sorted(used))}'"


def test_the_layers_are_folders_and_names_are_unique() -> None:
    assert sorted(p.name for p in sql_root().iterdir() if p.is_dir()) == sorted(LAYERS)
    on_disk = [p.name for p in sql_root().glob("*/*.sql")]
    assert sorted(on_disk) == sorted(sql_files()) and len(set(on_disk)) == len(on_disk)
    assert not list(Path(str(files("analysis"))).glob("*.sql")), "no SQL outside its layer"


def test_the_load_order_puts_every_file_after_what_it_reads() -> None:
    owner = definers()
    for layer in ("staging", "macros"):
        order = load_order(layer)
        for position, name in enumerate(order):
            earlier = set(order[:position])
            read_here = {owner[r] for r in sql_files()[name].reads if r in owner}
            assert {f for f in read_here if sql_files()[f].layer == layer} - {name} <= earlier, name
    assert load_order("staging")[0] == "tables.sql"
    # trial_identity, a table macro, binds the groups view when it is created: after it
    assert DERIVED_VIEWS == ("finished_trials", "groups", "trial_identity", "last_eval", "final_eval",
                             "finished_eval", "finished_samples", "final_samples")
    assert set(MACRO_FILES) == {n for n, s in sql_files().items() if s.layer == "macros"}


def fake_layers(tmp_path: Path, monkeypatch, texts: dict[str, str]) -> None:
    for layer in LAYERS:
        (tmp_path / layer).mkdir()
    for name, text in texts.items():
        (tmp_path / name).write_text(text)
    monkeypatch.setattr(sql_layers, "sql_root", lambda: tmp_path)
    sql_layers.sql_files.cache_clear()  # and again after the test (clear_caches)
    sql_layers.load_order.cache_clear()


@pytest.fixture
def clear_caches():
    yield
    sql_layers.sql_files.cache_clear()
    sql_layers.load_order.cache_clear()


def test_a_cycle_is_an_error_naming_the_files(tmp_path, monkeypatch, clear_caches) -> None:
    fake_layers(tmp_path, monkeypatch, {
        "macros/a.sql": "-- reads: b_macro\ncreate or replace macro a_macro(x) as b_macro(x);\n",
        "macros/b.sql": "-- reads: a_macro\ncreate or replace macro b_macro(x) as a_macro(x);\n",
    })
    with pytest.raises(SqlLayerError, match=r"cycle: a\.sql reads \['b\.sql'\], b\.sql reads \['a\.sql'\]"):
        load_order("macros")


def test_an_unknown_name_is_an_error_naming_the_file(tmp_path, monkeypatch, clear_caches) -> None:
    fake_layers(tmp_path, monkeypatch, {
        "macros/a.sql": "-- reads: nowhere\ncreate or replace macro a_macro(x) as nowhere(x);\n",
    })
    with pytest.raises(SqlLayerError, match=r"a\.sql: '-- reads:' names 'nowhere'.*known: a_macro"):
        load_order("macros")


def test_a_file_without_its_declaration_is_refused(tmp_path, monkeypatch, clear_caches) -> None:
    fake_layers(tmp_path, monkeypatch, {"questions/q.sql": "-- a question\nselect 1\n"})
    with pytest.raises(SqlLayerError, match=r"q\.sql: needs exactly one '-- reads:"):
        sql_files()


def test_the_order_follows_the_declarations_not_the_names(tmp_path, monkeypatch, clear_caches) -> None:
    fake_layers(tmp_path, monkeypatch, {
        "macros/a.sql": "-- reads: z_macro\ncreate or replace macro a_macro(x) as z_macro(x) + 1;\n",
        "macros/z.sql": "-- reads:\ncreate or replace macro z_macro(x) as x;\n",
    })
    assert load_order("macros") == ("z.sql", "a.sql")


def test_prepare_connection_loads_the_macros_in_that_order() -> None:
    import duckdb

    with duckdb.connect() as con:
        prepare_connection(con)  # a scalar macro binds what it calls when created
        assert con.sql("select resample_count(null), bootstrap_seed('7')").fetchall() == [(1000, 7)]


def test_a_question_runs_by_its_bare_name(tmp_path: Path) -> None:
    assert question_path(Path("lucky_tickets.sql")) == sql_file("lucky_tickets.sql")
    assert question_path(Path("lucky_tickets")) == sql_file("lucky_tickets.sql")
    assert question_path(Path("analysis/variance.sql")) == sql_file("variance.sql")  # the flat layout's paths
    mine = tmp_path / "variance.sql"
    mine.write_text("select 1")
    assert question_path(mine) == mine  # a file of the user's own comes first
    with pytest.raises(LookupError, match="no SQL file 'nope.sql'.*known: cascade.sql"):
        sql_file("nope.sql")


def test_query_names_a_missing_question_file(tmp_path: Path) -> None:
    from orchestrator.cli import app

    result = CliRunner().invoke(app, ["query", "--file", "no_such_question.sql", "--results", str(tmp_path)])
    assert result.exit_code == 2 and "no_such_question.sql" in result.output


def test_the_package_data_ships_every_layer() -> None:
    """pyproject's package-data globs (what setuptools copies into the wheel) match every
    SQL file of every layer."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    package_data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    analysis = Path(str(files("analysis")))
    shipped = {path for pattern in package_data["analysis"] for path in analysis.glob(pattern)}
    assert shipped == {sql.path for sql in sql_files().values()}
