"""Compaction (orchestrator/store/compaction.py): finished trials' files merged into one
file per table, without a reader ever seeing a row twice or missing one, whatever step
it is killed at; a compacted store reads as the per-trial store did (the output pins)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from analysis_rows import STUDY, build_study
from test_output_pins import (
    PINS_FILE,
    _exact,
    _rounded,
    digest,
    machine,
    report_outputs,
    sql_outputs,
)
from typer.testing import CliRunner

from analysis.query import open_results
from orchestrator.cli import app
from orchestrator.mlflow_tracking.group_runs import TRIAL_RUNS
from orchestrator.store.compaction import compact_study, compaction_plan, extract_trials
from orchestrator.store.results_store import (
    read_table_rows,
    read_trial_rows,
    read_trial_statuses,
    remove_temp_files,
    write_trial_table,
)
from orchestrator.store.science_versions import set_aside
from orchestrator.store.study_locks import study_lock
from results_contract.layout import TABLES, compacted_generations, trial_files


def _rows(root: Path) -> dict[str, list[str]]:
    """Every row of every view a reader sees, as sorted JSON text (a multiset: a row seen
    twice is there twice)."""
    with open_results(root, STUDY) as con:
        return {table: sorted(json.dumps(row, sort_keys=True, default=str)
                              for row in con.sql(f"select * from {table}").to_arrow_table().to_pylist())
                for table in (*TABLES, "grid_eval")}


def _python_rows(root: Path) -> dict[str, object]:
    """What the store's own readers (resume, reuse, migrate, MLflow's re-sync) see."""
    trials = sorted(read_trial_statuses(root, STUDY))
    return {
        "statuses": read_trial_statuses(root, STUDY),
        "trials": [row["trial_id"] for row in read_table_rows(root, STUDY, "trials")],
        **{table: {t: read_trial_rows(root, STUDY, table, t) for t in trials} for table in TABLES},
    }


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> Path:
    """build_study's store, half of it compacted once already, then a finished trial's
    eval rows written again (its own file now replaces its compacted rows) and a
    trial still running: what a second run leaves before its own compaction."""
    root = tmp_path_factory.mktemp("pristine") / "results"
    build_study(root)
    for trial_id in sorted(read_trial_statuses(root, STUDY))[6:]:  # six trials: a step count a test can afford
        for table in TABLES:
            shutil.rmtree(root / STUDY / table / f"trial_id={trial_id}", ignore_errors=True)
    finished = sorted(read_trial_statuses(root, STUDY))
    compact_study(root, STUDY, exclude=finished[: len(finished) // 2])
    again = finished[-1]
    write_trial_table(root, STUDY, "eval", again, read_trial_rows(root, STUDY, "eval", again)[:2])
    running = dict(read_table_rows(root, STUDY, "trials")[0], trial_id="running0001", status="running")
    write_trial_table(root, STUDY, "trials", "running0001", [running])
    return root


def _copy(pristine: Path, to: Path) -> Path:
    shutil.copytree(pristine, to)
    return to


def test_a_kill_at_any_step_loses_and_doubles_no_row(pristine: Path, tmp_path: Path) -> None:
    expected, expected_python = _rows(pristine), _python_rows(pristine)
    steps, _ = compaction_plan(pristine, STUDY, exclude=[sorted(read_trial_statuses(pristine, STUDY))[4]])
    assert len(steps) > 10 and any(step.what.startswith("extract") for step in steps)
    for killed_after in range(len(steps) + 1):
        root = _copy(pristine, tmp_path / f"k{killed_after}")
        steps, _ = compaction_plan(root, STUDY, exclude=[sorted(read_trial_statuses(root, STUDY))[4]])
        for step in steps[:killed_after]:
            step.action()
        # killed inside the next step, if it writes: its half-written file stays behind
        half = root / STUDY / "eval" / "_compacted" / f".gen-00000{killed_after}.parquet.tmp-1-dead"
        half.parent.mkdir(parents=True, exist_ok=True)
        half.write_bytes(b"PAR1 half a file")
        assert _rows(root) == expected, f"killed after step {killed_after}: {steps[killed_after - 1].what}"
        assert _python_rows(root) == expected_python, f"killed after step {killed_after}"
        remove_temp_files(root, STUDY)  # what the next run does first
        compact_study(root, STUDY)  # and the next compaction finishes the job
        assert _rows(root) == expected and _python_rows(root) == expected_python
        _assert_compacted(root)


def _assert_compacted(root: Path) -> None:
    """One generation per table, and no finished trial's own file left."""
    finished = {t for t, s in read_trial_statuses(root, STUDY).items() if s in ("done", "diverged")}
    for table in TABLES:
        assert len(compacted_generations(root, STUDY, table)) == 1, table
        assert not finished & set(trial_files(root, STUDY, table)), table


def test_a_running_trials_files_are_never_touched(pristine: Path, tmp_path: Path) -> None:
    root = _copy(pristine, tmp_path / "results")
    own = trial_files(root, STUDY, "trials")["running0001"]
    before = (own.read_bytes(), own.stat().st_mtime_ns)
    done = compact_study(root, STUDY)
    assert "running0001" not in done.merged["trials"]
    assert (own.read_bytes(), own.stat().st_mtime_ns) == before
    newest = compacted_generations(root, STUDY, "trials")
    ids = pq.read_table(newest[max(newest)], columns=["trial_id"])["trial_id"].to_pylist()
    assert "running0001" not in ids and ids == sorted(ids)  # sorted by trial id


def test_excluded_trials_leave_the_compacted_files_for_their_own(pristine: Path, tmp_path: Path) -> None:
    """What --retrain-stale and migrate --profile do before they move a trial's files."""
    root = _copy(pristine, tmp_path / "results")
    compact_study(root, STUDY)
    trial = min(read_trial_statuses(root, STUDY))
    rows = {table: read_trial_rows(root, STUDY, table, trial) for table in TABLES}
    untouched = {table: compacted_generations(root, STUDY, table) for table in TABLES}
    extract_trials(root, STUDY, ["not-compacted"])  # none of them compacted: nothing to do
    assert {table: compacted_generations(root, STUDY, table) for table in TABLES} == untouched
    extract_trials(root, STUDY, [trial])
    for table in TABLES:
        newest = compacted_generations(root, STUDY, table)
        ids = pq.read_table(newest[max(newest)], columns=["trial_id"])["trial_id"].to_pylist()
        assert trial not in ids
        assert (trial in trial_files(root, STUDY, table)) == bool(rows[table])
        assert read_trial_rows(root, STUDY, table, trial) == rows[table]
    # --retrain-stale then moves its files aside: the trial is gone from every view, the rest stay
    before = _rows(root)
    set_aside(root, STUDY, trial, None)
    after = _rows(root)
    for table in TABLES:
        assert not any(json.loads(row)["trial_id"] == trial for row in after[table])
        assert after[table] == [row for row in before[table] if json.loads(row)["trial_id"] != trial]


@pytest.fixture(scope="module")
def compacted(tmp_path_factory) -> Path:
    """build_study's whole store, compacted: the store test_output_pins pins, as a second run leaves it."""
    root = tmp_path_factory.mktemp("compacted") / "results"
    build_study(root)
    compact_study(root, STUDY)
    assert all(compacted_generations(root, STUDY, table) for table in TABLES)
    return root


def _pinned(kind: str) -> dict[str, str]:
    """tests/output_pins.json's pins of `kind` ("exact" or "rounded"): the SQL files'
    outputs by "<file>.sql <parameters>", and among the exact ones the report's page
    ("report page") and figures ("figure <name>")."""
    return json.loads(PINS_FILE.read_text())[kind]


def test_a_compacted_store_gives_the_pinned_sql_outputs(compacted: Path) -> None:
    sql = sql_outputs(compacted)
    if json.loads(PINS_FILE.read_text())["machine"] == machine():
        exact = {k: v for k, v in _pinned("exact").items() if not k.startswith(("report ", "figure "))}
        assert {k: digest(_exact(v)) for k, v in sql.items()} == exact
    else:
        assert {k: digest(_rounded(v)) for k, v in sql.items()} == _pinned("rounded")


@pytest.mark.slow  # the report's 14 figures drawn: about 15 s of one core
def test_a_compacted_store_gives_the_pinned_report(compacted: Path, tmp_path: Path) -> None:
    """The rendered page and figures of a compacted store, bit for bit those pinned on the
    machine that wrote the pins (elsewhere fonts may render otherwise: no comparison)."""
    if json.loads(PINS_FILE.read_text())["machine"] != machine():
        pytest.skip("the report is pinned bit for bit on the pins' machine alone")
    report = {k: v for k, v in _pinned("exact").items() if k.startswith(("report ", "figure "))}
    assert report and report_outputs(compacted, tmp_path / "report") == report


def test_lg_study_compact_merges_and_refuses_a_running_study(pristine: Path, tmp_path: Path) -> None:
    root = _copy(pristine, tmp_path / "results")
    expected = _rows(root)
    with study_lock(root, STUDY):
        busy = CliRunner().invoke(app, ["compact", STUDY, "--results", str(root)])
    assert busy.exit_code == 2 and "compact" not in str(busy.exception or "")
    result = CliRunner().invoke(app, ["compact", STUDY, "--results", str(root)])
    assert result.exit_code == 0, result.output
    assert "merged" in result.output
    assert _rows(root) == expected
    _assert_compacted(root)
    unknown = CliRunner().invoke(app, ["compact", "nosuch", "--results", str(root)])
    assert unknown.exit_code == 2 and "no study 'nosuch'" in unknown.output


def _study_rows(root: Path, study: str) -> dict[str, list[str]]:
    with open_results(root, study) as con:
        return {table: sorted(json.dumps(row, sort_keys=True, default=str) for row in con.sql(
            f"select * exclude (study) from {table}").to_arrow_table().to_pylist()) for table in TABLES}


def _histories(client, experiment: str) -> dict[str, dict[str, list]]:
    """trial_id -> metric -> its (step, value) history, of an experiment's runs."""
    runs = client.search_runs([client.get_experiment_by_name(experiment).experiment_id], filter_string=TRIAL_RUNS)
    return {run.data.tags["trial_id"]: {name: [(m.step, m.value) for m in client.get_metric_history(run.info.run_id, name)]
                                        for name in run.data.metrics} for run in runs}


def test_a_compacted_study_resumes_reuses_and_resyncs_mlflow_with_the_same_rows_and_runs(tmp_path: Path) -> None:
    import mlflow
    import yaml

    from orchestrator.mlflow_tracking.tracking import StudyTracker

    source = Path(__file__).parent / "study_files" / "good_two_trials.yaml"
    results, runner = tmp_path / "results", CliRunner()
    # the local Ray stays up for the next module's studies (conftest)
    assert runner.invoke(app, ["run", str(source), "--results", str(results)]).exit_code == 0
    before = _study_rows(results, "two_trials")
    assert runner.invoke(app, ["compact", "two_trials", "--results", str(results)]).exit_code == 0
    assert all(compacted_generations(results, "two_trials", t) and not trial_files(results, "two_trials", t)
               for t in TABLES)
    assert _study_rows(results, "two_trials") == before
    # resume: nothing to train again, and nothing to repair in MLflow
    again = runner.invoke(app, ["run", str(source), "--results", str(results)])
    assert again.exit_code == 0 and "2 of 2 trials had already finished" in " ".join(again.output.split())
    assert _study_rows(results, "two_trials") == before
    # reuse: another study of the same trials copies them from the compacted files
    copy = tmp_path / "copy.yaml"
    copy.write_text(yaml.safe_dump({**yaml.safe_load(source.read_text()), "name": "two_copied"}))
    reused = runner.invoke(app, ["run", str(copy), "--results", str(results)])
    assert reused.exit_code == 0 and reused.output.count("reused: finished in") == 2, reused.output
    copied = _study_rows(results, "two_copied")
    assert {t: copied[t] for t in ("train", "eval", "samples")} == {t: before[t] for t in ("train", "eval", "samples")}
    # MLflow's re-sync from the compacted rows: runs made anew from them match the runs the trials made
    uri = f"sqlite:///{results.resolve()}/mlflow.db"
    fresh = StudyTracker(uri, "two_trials_resynced")
    from orchestrator.mlflow_tracking.mlflow_sync import sync_study

    trial_ids = sorted(read_trial_statuses(results, "two_trials"))
    assert sync_study(fresh, results, "two_trials", trial_ids) == trial_ids
    client = mlflow.MlflowClient(uri)
    original, resynced = _histories(client, "two_trials"), _histories(client, "two_trials_resynced")
    for trial_id in trial_ids:
        shared = set(original[trial_id]) & set(resynced[trial_id])
        assert {"loss", "acc/digits_002", "acc/digits_003"} <= shared
        assert {m: resynced[trial_id][m] for m in shared} == {m: original[trial_id][m] for m in shared}


def test_one_trials_rows_are_read_without_listing_every_trials_folder(pristine: Path, tmp_path: Path,
                                                                      monkeypatch) -> None:
    """The MLflow sync reads each trial's rows as it ends: listing the table's folders there
    made the n-th trial cost in proportion to n (54 % of the driver's time at 5,400 trials)."""
    from results_contract import layout

    root = _copy(pristine, tmp_path / "results")
    trials = sorted(read_trial_statuses(root, STUDY))
    before = {table: {t: read_trial_rows(root, STUDY, table, t) for t in trials} for table in TABLES}
    compact_study(root, STUDY)
    extract_trials(root, STUDY, trials[:1])  # one trial back in its own files, the rest compacted

    def listed(*args):
        raise AssertionError("a single trial's read listed every trial's folder")

    monkeypatch.setattr(layout, "trial_files", listed)
    after = {table: {t: read_trial_rows(root, STUDY, table, t) for t in trials} for table in TABLES}
    assert after == before


def test_reading_by_position_gives_the_rows_reading_by_name_gives(pristine: Path, tmp_path: Path,
                                                                  monkeypatch) -> None:
    """Files of one layout are read by position (a tenth of the memory at 10,000 trials);
    a compaction forced to match columns by name writes the same rows, and a store with a
    file of another layout (fewer columns, as before a migration) is read by name."""
    from orchestrator.store import compaction

    taken = []
    copy_rows = compaction._copy_rows
    monkeypatch.setattr(compaction, "_copy_rows", lambda *args: taken.append(args[-1]) or copy_rows(*args))
    by_position = _copy(pristine, tmp_path / "position")
    compact_study(by_position, STUDY)
    assert taken and all(taken)  # a second compaction too: the newest generation's nullable columns match
    taken.clear()
    monkeypatch.setattr(compaction, "_one_schema", lambda schemas: False)
    by_name = _copy(pristine, tmp_path / "name")
    compact_study(by_name, STUDY)
    assert taken and not any(taken)
    assert _rows(by_position) == _rows(by_name)
    assert _python_rows(by_position) == _python_rows(by_name)


def test_one_layout_means_the_same_names_order_and_types() -> None:
    import pyarrow as pa

    from orchestrator.store.compaction import _one_schema

    base = pa.schema([pa.field("trial_id", pa.string(), nullable=False), ("step", pa.int64())])
    assert _one_schema([base, pa.schema([("trial_id", pa.string()), ("step", pa.int64())])])
    assert not _one_schema([base, pa.schema([("step", pa.int64()), ("trial_id", pa.string())])])
    assert not _one_schema([base, pa.schema([("trial_id", pa.string()), ("step", pa.int32())])])
    assert not _one_schema([base, pa.schema([("trial_id", pa.string())])])
    assert not _one_schema([base, None])  # a damaged file: never read by position
