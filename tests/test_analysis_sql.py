"""The analysis SQL files against synthetic Parquet with known answers, each compared
with an independent numpy computation: seed variance, lucky tickets (variance shares,
Kendall's W), carry cascades, error anatomy, training curves, configuration groups."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import duckdb
import numpy as np
import pytest
from analysis_rows import (
    EARLY,
    FINAL,
    LENGTHS,
    OOD,
    STUDY,
    Truth,
    build_study,
    canonical,
    config,
    run,
    write_trial,
)
from typer.testing import CliRunner

from analysis.query import QueryError, open_results, run_query, sql_file
from analysis.questions import report_files
from analysis.sql_layers import load_order, sql_root
from orchestrator.cli import app
from results_contract import identity
from results_contract.trial_status import FINISHED, TrialStatus


@pytest.fixture(scope="module")
def study(tmp_path_factory) -> tuple[Path, Truth]:
    root = tmp_path_factory.mktemp("results")
    return root, build_study(root)


@pytest.fixture(scope="module")
def con(study):
    root, _ = study
    with open_results(root, STUDY) as connection:
        yield connection


def group_ids(con, truth: Truth) -> dict[str, str]:
    """group name (in Truth) -> group_id (from the view)."""
    mapping = {r["trial_id"]: r["group_id"] for r in
               run_query(con, "select trial_id, group_id from groups").to_pylist()}
    ids = {}
    for tid, trial in truth.trials.items():
        assert ids.setdefault(trial["group"], mapping[tid]) == mapping[tid]
    return ids


# --- groups -------------------------------------------------------------------------------


def test_groups_join_trials_that_differ_only_by_seeds(con, study) -> None:
    _, truth = study
    rows = run_query(con, "select * from groups").to_pylist()
    by_trial = {r["trial_id"]: r for r in rows}
    assert len(rows) == len(truth.trials) + 1  # the failed trial has a group too
    ids = group_ids(con, truth)
    assert len(set(ids.values())) == 4
    for tid, trial in truth.trials.items():
        # these configs are no TrialConfig: their rows carry the group of their stored
        # config (groups.StoredConfig), the id such rows had before the group columns
        assert by_trial[tid]["group_id"] == legacy_group_id(trial["cfg"])
        assert by_trial[tid]["trials_in_group"] == len(truth.group(trial["group"])) + (
            trial["group"] == "many")
    labels = {name: by_trial[next(iter(truth.group(name)))]["group_label"] for name in ids}
    assert labels == {
        "cross": "addition/fire/tiny/uniform_length train.lr=0.00001",
        "exact": "addition/rope/tiny/uniform_length",
        "many": "addition/nope/tiny/uniform_length",
        "lr": "addition/fire/tiny/uniform_length train.lr=0.0003",
    }


def legacy_group_id(cfg: dict) -> str:
    """The group id before the group columns (the previous analysis/groups.py): the
    canonical config JSON with its seeds cut down to the eval seed, hashed."""
    kept = {**cfg, "seeds": {"eval": cfg["seeds"]["eval"]}}
    return hashlib.sha256(canonical(kept).encode()).hexdigest()[:12]


def test_legacy_group_id_ignores_weight_and_data_seed_only() -> None:
    base = legacy_group_id(config("fire", 0, 0))
    assert legacy_group_id(config("fire", 5, 9)) == base
    other_eval = config("fire", 0, 0)
    other_eval["seeds"]["eval"] = 1
    assert legacy_group_id(other_eval) != base
    assert legacy_group_id(config("rope", 0, 0)) != base


def test_views_sql_with_groups_loads_as_the_cli_client_runs_it(study) -> None:
    root, _ = study
    con = duckdb.connect()
    con.execute(f"SET VARIABLE results_glob_root = '{root / STUDY}';")
    # the seed columns, as docs/analysis.md writes them out for the client
    con.execute(f"SET VARIABLE seeds_apart = {identity.apart_columns()};")
    con.execute(f"SET VARIABLE seeds_listed = {identity.listed_columns()};")
    con.execute(sql_file("identity.sql").read_text())
    con.execute(sql_file("last_steps.sql").read_text())  # the macros the staging views use
    for name in load_order("staging"):  # in the order their declarations give
        con.execute(sql_file(name).read_text())
    assert con.sql("select count(distinct group_id) from groups").fetchall() == [(4,)]
    # and an analysis file runs there too, after the plain-SQL formulas, with its
    # parameter set as the CLI client would
    con.execute(sql_file("formulas.sql").read_text())
    con.execute("SET VARIABLE level = 0.9;")
    result = con.sql(sql_file("final_accuracy.sql").read_text())
    column = [c[0] for c in result.description].index("level")
    rows = result.fetchall()
    assert rows and all(row[column] == 0.9 for row in rows)
    # the intervals over seeds need the functions lg-study registers and the macros it
    # defines over them (lucky_tickets.sql's questions, seed_*.sql), and say so
    with pytest.raises(duckdb.CatalogException, match="(subgrid_coverage|seed_statistics) does not exist"):
        con.sql(sql_file("lucky_tickets.sql").read_text()).fetchall()
    with pytest.raises(duckdb.CatalogException, match="wilson_low does not exist"):
        con.sql(sql_file("success.sql").read_text()).fetchall()
    with pytest.raises(duckdb.CatalogException, match="seed_mean_interval does not exist"):
        con.sql(sql_file("cascade.sql").read_text()).fetchall()


def test_finished_trials_are_the_finished_statuses(tmp_path: Path) -> None:
    """The view the analysis files read holds the trials of TrialStatus.FINISHED, the
    statuses `lg-study run` skips; the SQL files repeat no status list of their own."""
    ids = {status: write_trial(tmp_path, "statuses", config("fire", i, 0), None, status=status)
           for i, status in enumerate(TrialStatus)}
    with open_results(tmp_path, "statuses") as con:
        rows = run_query(con, "select trial_id from finished_trials").to_pylist()
    assert {r["trial_id"] for r in rows} == {ids[s] for s in FINISHED}
    for name in ANALYSIS_FILES:
        assert "'done'" not in sql_file(f"{name}.sql").read_text(), name


# --- variance -----------------------------------------------------------------------------


def test_variance_matches_numpy(con, study) -> None:
    _, truth = study
    ids = group_ids(con, truth)
    rows = {(r["group_id"], r["digits"]): r for r in run(con, "variance")}
    assert len(rows) == 4 * len(LENGTHS)
    for name, gid in ids.items():
        trials = truth.group(name)
        n = len(trials)
        means = {tid: np.mean(list(t["final"].values())) for tid, t in trials.items()}
        best = min(trials, key=lambda tid: (-means[tid], tid))
        for d in LENGTHS:
            acc = np.array([t["final"][d] for t in trials.values()])
            row = rows[(gid, d)]
            assert row["n_trials"] == n
            assert row["in_distribution"] == (d <= 4)
            assert row["mean"] == pytest.approx(acc.mean())
            assert row["sd"] == pytest.approx(acc.std(ddof=1), abs=1e-12)
            assert (row["min"], row["max"]) == (pytest.approx(acc.min()), pytest.approx(acc.max()))
            assert row["median"] == pytest.approx(np.median(acc))
            assert row["best_trial_id"] == best
            assert row["best_of_n"] == pytest.approx(trials[best]["final"][d])
            # the trial bootstrap stays within the trials' range; two trials: exactly it
            # (replicate means x1, (x1 + x2)/2, x2 with chances 1/4, 1/2, 1/4)
            low, high = row["mean_boot_low"], row["mean_boot_high"]
            assert acc.min() - 1e-12 <= low <= row["mean"] + 1e-12 <= high + 2e-12
            assert high <= acc.max() + 1e-12
            if n == 2:
                assert (low, high) == (pytest.approx(acc.min()), pytest.approx(acc.max()))


# --- lucky tickets ------------------------------------------------------------------------


def average_ranks(values: np.ndarray) -> np.ndarray:
    ranks = np.empty(len(values))
    ranks[np.argsort(values, kind="stable")] = np.arange(1, len(values) + 1)
    for v in np.unique(values):
        ranks[values == v] = ranks[values == v].mean()
    return ranks


def anova_and_w(y: np.ndarray) -> dict[str, float]:
    """Two-way ANOVA without replication (rows: weight seeds, columns: data seeds) and
    Kendall's W of the rows ranked within each column, with the tie correction."""
    a, b = y.shape
    m = y.mean()
    ss_w = b * ((y.mean(axis=1) - m) ** 2).sum()
    ss_d = a * ((y.mean(axis=0) - m) ** 2).sum()
    ss_t = ((y - m) ** 2).sum()
    ranks = np.column_stack([average_ranks(y[:, j]) for j in range(b)])
    s = ((ranks.sum(axis=1) - b * (a + 1) / 2) ** 2).sum()
    ties = sum(((c := np.unique(y[:, j], return_counts=True)[1]) ** 3 - c).sum()
               for j in range(b))
    return {"ss_share_weight": ss_w / ss_t, "ss_share_data": ss_d / ss_t,
            "ss_share_residual": (ss_t - ss_w - ss_d) / ss_t,
            "kendall_w": 12 * s / (b**2 * (a**3 - a) - b * ties)}


def crossed_table(truth: Truth, name: str, lengths=OOD) -> tuple[np.ndarray, list, list]:
    trials = truth.group(name).values()
    ws = sorted({t["w"] for t in trials})
    ds = sorted({t["d"] for t in trials})
    y = np.zeros((len(ws), len(ds)))
    for t in trials:
        y[ws.index(t["w"]), ds.index(t["d"])] = np.mean([t["final"][n] for n in lengths])
    return y, ws, ds


def test_lucky_tickets_match_numpy(con, study) -> None:
    _, truth = study
    ids = group_ids(con, truth)
    rows = run(con, "lucky_tickets")
    # only the two fully crossed groups; `many` and `lr` have a single data seed
    assert {r["group_id"] for r in rows} == {ids["cross"], ids["exact"]}
    for name in ("cross", "exact"):
        y, ws, ds = crossed_table(truth, name)
        mine = sorted((r for r in rows if r["group_id"] == ids[name]),
                      key=lambda r: r["weight_seed"])
        expected = anova_and_w(y)
        assert [r["weight_seed"] for r in mine] == ws
        for i, row in enumerate(mine):
            assert (row["n_weight_seeds"], row["n_data_seeds"]) == y.shape
            assert row["measured_digits"] == list(OOD)
            assert row["data_seeds"] == ds
            assert row["accuracy_by_data_seed"] == pytest.approx(y[i].tolist())
            assert row["measured_kind"] == "out-of-distribution"
            assert row["mean"] == pytest.approx(y[i].mean())
            assert (row["min"], row["max"]) == (pytest.approx(y[i].min()), pytest.approx(y[i].max()))
            assert row["threshold"] == 0.9
            assert row["lucky"] == bool(y[i].min() > 0.9)
            for key, value in expected.items():
                assert row[key] == pytest.approx(value, abs=1e-9), (name, key)
            assert row["ss_share_weight"] + row["ss_share_data"] + row["ss_share_residual"] == pytest.approx(1)


def test_weight_only_effect_is_all_weight_share_and_full_concordance(con, study) -> None:
    _, truth = study
    rows = [r for r in run(con, "lucky_tickets") if r["group_id"] == group_ids(con, truth)["exact"]]
    row = rows[0]
    assert row["ss_share_weight"] == pytest.approx(1)
    assert row["ss_share_data"] == pytest.approx(0, abs=1e-12)
    assert row["ss_share_residual"] == pytest.approx(0, abs=1e-12)
    # no residual: the components put everything on the weight seed too
    assert row["component_share_weight"] == pytest.approx(1)
    assert row["sigma2_data"] == pytest.approx(0, abs=1e-12)
    assert row["kendall_w"] == pytest.approx(1)
    assert [r["lucky"] for r in rows] == [True, False, False]  # min 0.95 > 0.9


def test_lucky_ticket_threshold_and_lengths_are_parameters(con, study) -> None:
    _, truth = study
    exact = group_ids(con, truth)["exact"]
    rows = [r for r in run(con, "lucky_tickets", threshold=0.4) if r["group_id"] == exact]
    assert [r["lucky"] for r in rows] == [True, True, False]
    assert {r["threshold"] for r in rows} == {0.4}
    # one test length only: the cross group's table is then its accuracy at 8 digits
    cross = group_ids(con, truth)["cross"]
    rows = [r for r in run(con, "lucky_tickets", digits="8") if r["group_id"] == cross]
    y, _, _ = crossed_table(truth, "cross", lengths=(8,))
    assert rows[0]["measured_digits"] == [8]
    assert rows[0]["ss_share_weight"] == pytest.approx(anova_and_w(y)["ss_share_weight"])


# --- cascade ------------------------------------------------------------------------------


def wilson(k: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def test_cascade_breakdown_matches_numpy(con, study) -> None:
    """Per trial: questions, right answers, accuracy and Wilson interval; per cell: the
    mean of the trials' accuracies (the trial is the unit) and pooled counts."""
    _, truth = study
    ids = group_ids(con, truth)
    rows = {(r["group_id"], r["digits"], r["cascade"]): r for r in run(con, "cascade")}
    expected: dict[tuple, dict[str, list[int]]] = {}
    for tid, rows_written in truth.samples.items():
        gid = ids[truth.trials[tid]["group"]]
        for s in rows_written:
            if s["step"] == FINAL:
                cell = expected.setdefault((gid, s["digits"], s["cascade"]), {})
                counts = cell.setdefault(tid, [0, 0])
                counts[0] += 1
                counts[1] += s["correct"]
    assert set(rows) == set(expected)
    for key, per_trial in expected.items():
        row = rows[key]
        n = sum(v[0] for v in per_trial.values())
        k = sum(v[1] for v in per_trial.values())
        per_length = sum(sum(v[0] for v in cell.values())
                         for kk, cell in expected.items() if kk[:2] == key[:2])
        assert (row["questions"], row["correct"]) == (n, k)
        assert row["n_trials"] == len(per_trial)
        assert row["accuracy"] == pytest.approx(np.mean([r / q for q, r in per_trial.values()]))
        assert row["share_of_questions"] == pytest.approx(n / per_length)
        assert row["in_distribution"] == (key[1] <= 4)
        by_trial = {t["trial_id"]: t for t in row["trials"]}
        assert set(by_trial) == set(per_trial)
        for tid, (q, r) in per_trial.items():
            low, high = wilson(r, q)
            assert (by_trial[tid]["questions"], by_trial[tid]["correct"]) == (q, r)
            assert by_trial[tid]["wilson95_low"] == pytest.approx(low, abs=1e-12)
            assert by_trial[tid]["wilson95_high"] == pytest.approx(high, abs=1e-12)
        if len(per_trial) >= 2:
            assert row["mean_low"] <= row["accuracy"] <= row["mean_high"]
        else:
            assert row["mean_low"] is None


# --- errors -------------------------------------------------------------------------------


def sample(idx, cascade, correct, wrong, first, target, prediction, step=FINAL, digits=3,
           carry_in=None, wrong_places=None):
    return {"step": step, "digits": digits, "idx": idx, "cascade": cascade, "correct": correct,
            "wrong_digits": wrong, "first_wrong": first, "target": target,
            "prediction": prediction, "carry_in": carry_in, "wrong_places": wrong_places}


def test_error_anatomy_counts_each_kind(tmp_path: Path) -> None:
    """One trial: places with and without a carry, every wrong place of the answers that
    end on time, wrong places per such answer, and how the wrong answers end. Targets
    are written least significant digit first, so place k is character k."""
    write_trial(tmp_path, "anatomy", config("fire", 0, 0), {3: 0.3, 5: 1.0}, samples=[
        sample(0, 0, True, 0, None, "321", "321", carry_in="000", wrong_places="000"),
        sample(1, 1, True, 0, None, "4321", "4321", carry_in="0100", wrong_places="0000"),
        sample(2, 0, False, 1, 1, "321", "331", carry_in="000", wrong_places="010"),
        sample(3, 2, False, 3, 1, "4321", "4000", carry_in="0110", wrong_places="0111"),
        sample(4, 1, False, 2, 2, "4321", "43", carry_in="0010", wrong_places="0011"),  # early
        sample(5, 1, False, 0, 3, "321", "3210", carry_in="010", wrong_places="000"),   # late
        sample(6, 0, False, 0, 3, "321", "321", carry_in="000", wrong_places="000"),    # no end
        sample(7, 0, False, 3, 0, "321", "999", step=EARLY, carry_in="000", wrong_places="111"),
        sample(0, 0, True, 0, None, "000001", "000001", digits=5, carry_in="000000",
               wrong_places="000000"),
    ])
    with open_results(tmp_path, "anatomy") as con:
        rows = run(con, "errors")
    got = {(r["digits"], r["facet"], r["bucket"]): r for r in rows}
    carry = {k[2]: (r["count"], r["total"], r["error_rate"], r["n_trials"])
             for k, r in got.items() if k[:2] == (3, "carry")}
    # places with a carry: 1 (sample 1), 2 (3), 1 (4), 1 (5) = 5, of which wrong 2 + 1 = 3
    assert carry == {"with carry": (3, 5, pytest.approx(3 / 5), 1),
                     "without carry": (3, 24 - 5, pytest.approx(3 / 19), 1)}
    ending = {k[2]: r["share_of_errors"] for k, r in got.items() if k[:2] == (3, "ending")}
    assert ending == {"on time": pytest.approx(2 / 5), "premature end": pytest.approx(1 / 5),
                      "late end": pytest.approx(2 / 5)}
    position = {k[2]: (r["count"], r["share_of_errors"])
                for k, r in got.items() if k[:2] == (3, "error_position")}
    assert position == {"1": (2, pytest.approx(2 / 4)), "2": (1, pytest.approx(1 / 4)),
                        "3": (1, pytest.approx(1 / 4))}
    count = {k[2]: r["count"] for k, r in got.items() if k[:2] == (3, "wrong_digits")}
    assert count == {"1": 1, "3": 1}
    for facet in ("ending", "error_position", "wrong_digits"):
        shares = [r["share_of_errors"] for k, r in got.items() if k[:2] == (3, facet)]
        assert sum(shares) == pytest.approx(1)
    assert got[(3, "error_position", "1")]["bucket_value"] == 1
    assert got[(3, "ending", "late end")]["bucket_value"] is None
    # a length without wrong answers: its places without carry, nothing else
    assert {k[1:] for k in got if k[0] == 5} == {("carry", "without carry")}
    assert got[(5, "carry", "without carry")]["error_rate"] == 0


# --- training -----------------------------------------------------------------------------


def test_training_curves_and_grokking_step(con, study) -> None:
    _, truth = study
    rows = run(con, "training")
    assert len(rows) == len(truth.trials) * 2 * len(LENGTHS)
    by_trial = {}
    for r in rows:
        by_trial.setdefault(r["trial_id"], []).append(r)
    for tid, trial in truth.trials.items():
        mine = by_trial[tid]
        expected = {"cross": FINAL, "exact": FINAL, "many": None, "lr": EARLY}[trial["group"]]
        assert {r["grok_step"] for r in mine} == {expected}
        factor = 1.0 if trial["group"] == "lr" else 0.5
        for r in mine:
            scale = 1.0 if r["step"] == FINAL else factor
            assert r["accuracy"] == pytest.approx(trial["final"][r["digits"]] * scale)
            assert r["in_distribution_accuracy"] == pytest.approx(
                scale * np.mean([trial["final"][d] for d in (2, 4)]))
            # the last training log at or before the evaluation step (logged at 30, 60, 90)
            assert r["loss"] == pytest.approx(1 / (30 if r["step"] == EARLY else 90))
    lower = {r["trial_id"]: r["grok_step"] for r in run(con, "training", grok_threshold=0.98)}
    assert {lower[t] for t in truth.group("many")} == {FINAL}


# --- every file ---------------------------------------------------------------------------

#: the report's files (analysis/questions.py) but those about every trial, not the finished
ANALYSIS_FILES = tuple(name for name in report_files() if name not in ("status_counts", "failures"))


@pytest.mark.parametrize("name", ANALYSIS_FILES)
def test_runs_without_parameters_on_a_study_with_no_results_yet(tmp_path: Path, name: str) -> None:
    write_trial(tmp_path, "fresh", config("fire", 0, 0), None, status="running")
    with open_results(tmp_path, "fresh") as con:
        assert run(con, name) == []


@pytest.mark.parametrize("name", sorted(sql_root().glob("*/*.sql")), ids=lambda path: path.name)
def test_sql_files_follow_the_house_style(name: Path) -> None:
    text = name.read_text()
    assert text.startswith("-- "), "a header comment says what the file answers"
    assert len(text.splitlines()) <= 300, "one question a file: shared steps go to views or macros"
    code = "\n".join(line.split("--")[0] for line in text.splitlines())
    if name.stem in ANALYSIS_FILES:
        assert re.search(r"\bfinal as \(", code) and re.search(r"from final\b", code)
    keywords = r"\b(SELECT|FROM|WHERE|GROUP|ORDER|JOIN|WITH|AS|AND|OR|CASE|WHEN)\b"
    assert not re.search(keywords, code), "lowercase SQL"


def test_a_parameter_that_is_not_a_number_is_refused(con) -> None:
    with pytest.raises(QueryError, match="Could not convert"):
        run(con, "lucky_tickets", threshold="high")


def test_parameters_are_set_for_one_query_only(con) -> None:
    run(con, "lucky_tickets", threshold=0.4)
    assert con.sql("select getvariable('threshold')").fetchall() == [(None,)]
    assert {r["threshold"] for r in run(con, "lucky_tickets")} == {0.9}


@pytest.mark.parametrize("question", [path.name for path in sorted((sql_root() / "questions").glob("*.sql"))])
def test_held_rows_are_the_streamed_rows(con, question: str) -> None:
    """run_query's two ways to Arrow (the rows DuckDB holds, one bind; a lazy relation
    streaming them, two binds) give the same table, types and all."""
    text = sql_file(question).read_text()
    held, streamed = run_query(con, text), run_query(con, text, streamed=True)
    assert held.schema == streamed.schema
    assert held.equals(streamed)


def test_query_command_runs_a_file_with_and_without_params(study) -> None:
    root, _ = study
    runner = CliRunner()
    path = "lucky_tickets.sql"  # a question runs by its bare name
    base = ["query", "--file", path, "--study", STUDY, "--results", str(root), "--format", "json"]
    plain = runner.invoke(app, base)
    assert plain.exit_code == 0, plain.output
    assert {r["threshold"] for r in json.loads(plain.stdout)} == {0.9}
    lowered = runner.invoke(app, [*base, "--param", "threshold=0.4"])
    assert lowered.exit_code == 0, lowered.output
    rows = json.loads(lowered.stdout)
    assert sum(r["lucky"] for r in rows) > sum(r["lucky"] for r in json.loads(plain.stdout))
    wrong = runner.invoke(app, [*base, "--param", "threshold=high"])
    assert wrong.exit_code == 2 and "Could not convert" in wrong.output
