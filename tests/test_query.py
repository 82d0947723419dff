"""DuckDB views over real Parquet written by the results store, and query output."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from analysis.query import (
    _VIEW_NAME,
    QueryError,
    open_results,
    run_query,
    run_sql_file,
    sql_file,
    to_csv,
    to_json,
    write_parquet,
)
from orchestrator.store.results_store import write_trial_table
from results_contract.layout import list_studies

STARTED = datetime(2025, 1, 2, 3, 4, 5, tzinfo=timezone.utc)


def add_trial(root: Path, study: str, trial_id: str, accuracies: dict[int, float],
              samples: bool = True, **config: object) -> None:
    """One finished trial: a trials row, two train steps, eval at steps 50 and 100."""
    write_trial_table(root, study, "trials", trial_id, [{
        "status": "done", "config_json": json.dumps(config), "n_params": 10,
        "device": "cpu", "started_at": STARTED, "group_id": f"group-{trial_id}",
        "group_label": str(config.get("pe")), **config,
    }])
    write_trial_table(root, study, "train", trial_id, [
        {"step": s, "loss": 1.0 / s, "lr": 1e-3, "tokens": 64 * s, "wall_s": 0.1 * s}
        for s in (50, 100)
    ])
    # Step 50 is deliberately worse: the final_eval view must keep only the final step.
    write_trial_table(root, study, "eval", trial_id, [
        {"step": step, "digits": d, "n": 4, "correct": round(4 * acc * step / 100),
         "accuracy": acc * step / 100, "in_distribution": d <= 5}
        for step in (50, 100) for d, acc in accuracies.items()
    ])
    if samples:
        write_trial_table(root, study, "samples", trial_id, [
            {"step": 100, "digits": 3, "idx": 0, "cascade": 1, "correct": False,
             "wrong_digits": 1, "first_wrong": 2, "target": "123", "prediction": "133"},
        ])


def seeds(pe: str, weight: int, **more: object) -> dict[str, object]:
    return {"task": "addition", "pe": pe, "weight_seed": weight, "data_seed": 0, **more}


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """Study 'alpha': three trials with different config columns; no samples yet."""
    add_trial(tmp_path, "alpha", "00001234", {5: 1.0, 10: 0.5}, samples=False,
              **seeds("fire", 0, size="tiny"))
    add_trial(tmp_path, "alpha", "b2", {5: 1.0, 10: 0.0}, samples=False,
              **seeds("fire", 0, size="small"))
    add_trial(tmp_path, "alpha", "c3", {5: 0.75, 10: 0.25}, samples=False,
              **seeds("rope", 1, attn_window=8))
    return tmp_path


def rows(con: duckdb.DuckDBPyConnection, sql: str) -> list[tuple]:
    return con.sql(sql).fetchall()


def test_views_sql_loads_as_the_cli_client_runs_it(root: Path) -> None:
    add_trial(root, "beta", "d4", {5: 1.0}, **seeds("nope", 0))
    con = duckdb.connect()
    # The two statements a CLI user types; the variable holds a path relative to cwd.
    con.execute(f"SET VARIABLE results_glob_root = '{root / 'beta'}';")
    con.execute(sql_file("tables.sql").read_text())

    assert rows(con, "select trial_id, pe from trials") == [("d4", "nope")]
    assert rows(con, "select count(*) from eval") == [(2,)]
    assert rows(con, "select prediction from samples") == [("133",)]
    assert rows(con, "select max(step) from train") == [(100,)]


def test_views_sql_fails_on_a_table_without_files(root: Path) -> None:
    # Why query.py swaps in empty_tables.sql: read_parquet refuses an empty glob.
    con = duckdb.connect()
    con.execute(f"SET VARIABLE results_glob_root = '{root / 'alpha'}';")
    with pytest.raises(duckdb.IOException, match="No files found"):
        con.execute(sql_file("tables.sql").read_text())


@pytest.mark.parametrize("leading", [
    "",  # duckdb 2.0.0 drops the comments before a statement it extracts
    "-- the trials view\n-- read by every analysis\n\n",  # duckdb 2.0.1 keeps them
    "/* a block\n comment */\n",
])
def test_a_view_is_named_after_any_comments_before_it(leading: str) -> None:
    statement = f"{leading}create or replace view final_eval as select 1 -- view other"
    assert _VIEW_NAME.match(statement).group(1) == "final_eval"
    assert _VIEW_NAME.match("-- create view commented_out\nselect 1") is None


def test_trials_with_different_config_columns_union(root: Path) -> None:
    con = open_results(root, "alpha")

    assert rows(con, "select trial_id, pe, size, attn_window from trials order by trial_id") == [
        ("00001234", "fire", "tiny", None),
        ("b2", "fire", "small", None),
        ("c3", "rope", None, 8),
    ]


def test_all_digit_trial_id_stays_text(root: Path) -> None:
    con = open_results(root, "alpha")

    assert rows(con, "select typeof(trial_id) from eval group by all") == [("VARCHAR",)]
    assert rows(con, "select count(*) from eval join trials using (trial_id)") == [(12,)]


def test_table_without_files_gives_an_empty_typed_view(root: Path) -> None:
    con = open_results(root, "alpha")

    assert rows(con, "select count(*) from samples") == [(0,)]
    assert [c[0] for c in con.sql("select * from samples").description] == [
        "study", "trial_id", "step", "digits", "idx", "cascade", "correct", "wrong_digits",
        "first_wrong", "target", "prediction", "carry_in", "wrong_places",
    ]


def test_empty_views_match_the_written_schemas(root: Path, tmp_path_factory) -> None:
    # empty_tables.sql copies the writer's columns by hand; this keeps them in step.
    other = tmp_path_factory.mktemp("other")
    add_trial(other, "full", "t1", {5: 1.0}, **seeds("fire", 0))
    written = open_results(other, "full")
    empty = duckdb.connect()
    empty.execute(sql_file("empty_tables.sql").read_text())
    for table in ("train", "eval", "samples"):
        assert rows(empty, f"describe {table}") == rows(written, f"describe {table}"), table
    core = "select column_name, column_type from (describe trials) limit 10"
    assert rows(empty, core) == rows(written, core)


def test_all_studies_at_once(root: Path) -> None:
    add_trial(root, "beta", "d4", {5: 1.0}, **seeds("nope", 0))
    (root / "mlflow.db").write_text("not a study")
    con = open_results(root, None)

    assert rows(con, "select study, count(*) from trials group by study order by study") == [
        ("alpha", 3), ("beta", 1),
    ]
    # Samples exist in beta only: the view reads them although alpha has none.
    assert rows(con, "select trial_id from samples") == [("d4",)]


def test_views_see_trials_written_after_opening(root: Path) -> None:
    con = open_results(root, "alpha")
    add_trial(root, "alpha", "e5", {5: 1.0}, samples=False, **seeds("alibi", 2))

    assert rows(con, "select count(*) from trials") == [(4,)]


def test_list_studies_and_unknown_study(root: Path) -> None:
    add_trial(root, "beta", "d4", {5: 1.0}, **seeds("nope", 0))
    (root / "mlruns").mkdir()  # not a study: no results table inside
    (root / "mlflow.db").write_text("")

    assert list_studies(root) == ["alpha", "beta"]
    assert list_studies(root / "missing") == []
    with pytest.raises(LookupError, match="'gamma'.*studies there: alpha, beta"):
        open_results(root, "gamma")


def test_run_table_sql_gives_each_trial_its_final_step_accuracy(root: Path) -> None:
    """The end-of-run rows: one per trial and length at the last evaluation, never an
    average of trials that share task, encoding and seeds (tiny and small stay apart)."""
    con = open_results(root, "alpha")
    table = run_sql_file(con, sql_file("run_table.sql"))

    assert table.column_names == ["trial_id", "status", "digits", "in_distribution", "accuracy", "checkpoint"]
    assert [tuple(r.values()) for r in table.to_pylist()] == [
        ("00001234", "done", 5, True, 1.0, "final"),
        ("00001234", "done", 10, False, 0.5, "final"),
        ("b2", "done", 5, True, 1.0, "final"),
        ("b2", "done", 10, False, 0.0, "final"),
        ("c3", "done", 5, True, 0.75, "final"),
        ("c3", "done", 10, False, 0.25, "final"),
    ]


def test_named_parameters_are_bound(root: Path) -> None:
    con = open_results(root, "alpha")
    sql = "select trial_id from eval where step = 100 and accuracy >= $threshold order by 1"

    # Unused parameters are dropped, so one --param set can serve any query.
    got = run_query(con, sql, {"threshold": "0.75", "unused": "x"})
    assert got.column("trial_id").to_pylist() == ["00001234", "b2", "c3"]
    got = run_query(con, sql, {"threshold": "0.9"})
    assert got.column("trial_id").to_pylist() == ["00001234", "b2"]
    with pytest.raises(QueryError, match=r"\$threshold"):
        run_query(con, sql)


def test_sql_file_with_several_statements_returns_the_last(root: Path, tmp_path: Path) -> None:
    con = open_results(root, "alpha")
    script = tmp_path / "two.sql"
    script.write_text(
        "-- a comment; with a semicolon\n"
        "create temp table best as select trial_id from eval where accuracy = $top;\n"
        "select count(distinct trial_id) as n from best;\n"
    )

    assert run_sql_file(con, script, {"top": "1.0"}).to_pylist() == [{"n": 2}]


@pytest.mark.parametrize("sql", ["select nonexistent from trials", "selec 1", "-- nothing"])
def test_sql_errors_become_query_errors(root: Path, sql: str) -> None:
    con = open_results(root, "alpha")
    with pytest.raises(QueryError) as caught:
        run_query(con, sql)
    assert isinstance(caught.value, ValueError)
    assert str(caught.value)


def result_table() -> pa.Table:
    return pa.table({
        "name": ["a,b", None],
        "n": [1, 2],
        "acc": [0.5, float("nan")],
        "ok": [True, False],
        "at": pa.array([STARTED, None], pa.timestamp("us", tz="UTC")),
    })


def test_to_csv() -> None:
    assert to_csv(result_table()) == (
        "name,n,acc,ok,at\n"
        '"a,b",1,0.5,true,2025-01-02T03:04:05+00:00\n'
        ",2,nan,false,\n"
    )


def test_to_json() -> None:
    assert json.loads(to_json(result_table())) == [
        {"name": "a,b", "n": 1, "acc": 0.5, "ok": True, "at": "2025-01-02T03:04:05+00:00"},
        {"name": None, "n": 2, "acc": None, "ok": False, "at": None},
    ]


def test_timestamps_from_duckdb_are_utc_iso(root: Path) -> None:
    con = open_results(root, "alpha")
    got = json.loads(to_json(run_query(con, "select started_at from trials limit 1")))
    assert got == [{"started_at": "2025-01-02T03:04:05+00:00"}]


def test_write_parquet_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "out" / "result.parquet"
    write_parquet(result_table(), path)
    assert pq.read_table(path).column("n").to_pylist() == [1, 2]


def test_markdown_output_is_a_table_with_one_row_per_result_row() -> None:
    from analysis.query import to_markdown

    table = pa.table({"pe": ["rope", "a|b", None], "accuracy": [0.5, float("nan"), 1 / 3]})
    assert to_markdown(table).splitlines() == [
        "| pe | accuracy |",
        "|---|---|",
        "| rope | 0.500 |",
        "| a\\|b |  |",
        "|  | 0.333 |",
    ]


def test_connections_share_the_macros_and_nothing_else(root: Path, tmp_path_factory) -> None:
    """Every connection is a cursor of one database per process (analysis_connection):
    connections over two results folders, open together and read from two threads, each
    see their own trials, and one's tables loaded by read_once stay its own."""
    from concurrent.futures import ThreadPoolExecutor

    from analysis.query import read_once

    other = tmp_path_factory.mktemp("other")
    add_trial(other, "beta", "d4", {5: 0.5}, samples=False, **seeds("alibi", 2))
    alpha, beta = open_results(root, "alpha"), open_results(other, "beta")
    just_c3 = open_results(root, "alpha", trial_ids=["c3"])  # views over c3's files by name
    alpha_b2, alpha_c3 = open_results(root, "alpha"), open_results(root, "alpha")
    read_once(alpha_b2, groups=["group-b2"])
    read_once(alpha_c3, groups=["group-c3"])

    def trials(con: duckdb.DuckDBPyConnection) -> list[str]:
        return [row[0] for row in rows(con, "select trial_id from trials order by 1")]

    with ThreadPoolExecutor(3) as pool:
        seen = list(pool.map(trials, [alpha, beta, just_c3, alpha_b2, alpha_c3]))
    assert seen == [["00001234", "b2", "c3"], ["d4"], ["c3"], ["b2"], ["c3"]]
    assert rows(beta, "select wilson_centre(0.25, 4, 1.96) > 0.25") == [(True,)]
