"""The command line's own parsing (no Ray): enum options list their choices, one
--param parser, `trial` picks one trial of a study file, `status` counts that never go
negative, and every `lg-study COMMAND` the code tells a user about exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from orchestrator.cli import Benchmark, OutputFormat, app
from orchestrator.console.render import progress_line
from orchestrator.mlflow_tracking.group_runs import TRIAL_RUNS
from orchestrator.studies.study import StudyError, load_study, load_trial

runner = CliRunner()
ROOT = Path(__file__).parent.parent
STUDY = Path(__file__).parent / "study_files" / "good_two_trials.yaml"


def test_bench_choices_are_the_benchmark_registry() -> None:
    from orchestrator.benchmarks.bench import BENCHMARKS

    assert [b.value for b in Benchmark] == list(BENCHMARKS)


@pytest.mark.parametrize(("args", "choices"), [
    (["query", "select 1", "--format", "xml"], [f.value for f in OutputFormat]),
    (["bench", "--only", "nope"], [b.value for b in Benchmark]),
])
def test_an_unknown_choice_is_bad_input_listing_the_choices(args: list[str], choices: list[str]) -> None:
    outcome = runner.invoke(app, args)
    assert outcome.exit_code == 2
    assert all(choice in outcome.output for choice in choices)


@pytest.mark.parametrize("command", [["query", "select 1"], ["report", "some_study"]])
def test_one_param_parser(command: list[str], tmp_path: Path) -> None:
    outcome = runner.invoke(app, [*command, "--param", "no_value", "--results", str(tmp_path)])
    assert outcome.exit_code == 2 and "expected NAME=VALUE" in outcome.output


def test_trial_of_a_study_by_index_or_id() -> None:
    trials = load_study(STUDY).trials
    assert load_trial(STUDY, "1") == trials[1]
    assert load_trial(STUDY, trials[0].trial_id) == trials[0]
    assert load_trial(STUDY, "0", "longer") == load_study(STUDY, "longer").trials[0]
    with pytest.raises(StudyError, match=r"--trial: no trial '7'; the study has 2 trials"):
        load_trial(STUDY, "7")
    with pytest.raises(StudyError, match="validate .* --trials"):
        load_trial(STUDY)


def test_trial_options_refused_for_a_bare_config(tmp_path: Path) -> None:
    config = tmp_path / "trial.yaml"
    config.write_text("model: {size: tiny}\n")
    assert load_trial(config).model.size == "tiny"
    outcome = runner.invoke(app, ["trial", str(config), "--trial", "0"])
    assert outcome.exit_code == 2 and "applies to a study file" in outcome.output


def test_validate_lists_the_trials_trial_takes() -> None:
    outcome = runner.invoke(app, ["validate", str(STUDY), "--trials"])
    assert outcome.exit_code == 0
    for index, config in enumerate(load_study(STUDY).trials):
        assert re.search(rf"{index}\s+│\s+{config.trial_id}", outcome.output)


def test_progress_counts_never_go_negative() -> None:
    # the folder holds more trials than the design (another profile's, from before
    # profiles were kept apart): they are named, not subtracted
    statuses = {"a": "done", "b": "running", "x": "done", "y": "done"}
    assert progress_line(statuses, ["a", "b", "c"], None) == (
        "1 of 3 finished, 1 not started; 2 trials in the folder are not in this study's design")
    assert progress_line(statuses, None, 2) == "3 of 2 finished, 0 not started"
    assert progress_line(statuses, None, None) == ""


def test_every_command_named_to_a_user_exists() -> None:
    """Commands quoted to a user (`lg-study X` in messages, docstrings and docs,
    <code>lg-study X</code> in the report) are commands of the CLI."""
    commands = {c.name or c.callback.__name__ for c in app.registered_commands}
    sources = [*ROOT.glob("orchestrator/**/*.py"), *ROOT.glob("analysis/*.py"), ROOT / "README.md",
               *ROOT.glob("docs/**/*.md")]
    named = {(name, path.name) for path in sources
             for name in re.findall(r"(?:`|<code>)lg-study ([a-z][a-z_-]*)", path.read_text())}
    assert sorted((name, where) for name, where in named if name not in commands) == []
    assert "`lg-study trial STUDY.yaml --trial ID`" in (ROOT / "analysis" / "questions.py").read_text()


def test_migrate_moves_a_profiles_trials_out_of_the_unprofiled_folder(tmp_path: Path) -> None:
    """As an earlier version left them: both designs' trials in RESULTS/STUDY and its
    experiment; the profile's move out with their checkpoint, the other's stay."""
    from datetime import datetime, timezone

    import mlflow

    from orchestrator.store.results_store import read_trial_statuses, write_trial_table
    from orchestrator.store.trial_rows import trials_row
    from results_contract.layout import checkpoint_path, profile_root

    results = tmp_path / "results"
    default, smoke = load_study(STUDY).trials[0], load_study(STUDY, "longer").trials[0]
    for config, status in ((default, "done"), (smoke, "running")):
        row = trials_row("two_trials", config, status, "cpu", datetime(2025, 1, 1, tzinfo=timezone.utc))
        write_trial_table(results, "two_trials", "trials", config.trial_id, [row])
    checkpoint_path(results, "two_trials", smoke.trial_id).parent.mkdir(parents=True)
    checkpoint_path(results, "two_trials", smoke.trial_id).write_bytes(b"state")
    uri = f"sqlite:///{results.resolve()}/mlflow.db"
    client = mlflow.MlflowClient(uri)
    experiment = client.create_experiment("two_trials")
    for config in (default, smoke):
        client.create_run(experiment, tags={"trial_id": config.trial_id})

    outcome = runner.invoke(app, ["migrate", str(STUDY), "--profile", "longer", "--results", str(results)])
    assert outcome.exit_code == 0, outcome.output
    assert "1 trials moved and 0 copied" in " ".join(outcome.output.split())
    moved = profile_root(results, "longer")
    assert read_trial_statuses(results, "two_trials") == {default.trial_id: "done"}
    assert read_trial_statuses(moved, "two_trials") == {smoke.trial_id: "running"}
    assert checkpoint_path(moved, "two_trials", smoke.trial_id).read_bytes() == b"state"
    runs = client.search_runs([experiment], filter_string=TRIAL_RUNS)
    assert [r.data.tags["trial_id"] for r in runs] == [default.trial_id]
    status = runner.invoke(app, ["status", str(STUDY), "--profile", "longer", "--results", str(results)])
    assert "0 of 2 finished, 1 not started" in status.output


def test_the_how_to_example_study_loads_and_is_not_a_real_study(tmp_path: Path) -> None:
    """The study file shown in the how-to for writing a study is valid as written, and its
    name is none of studies/'s, so running it never writes into a real study's results."""
    page = (ROOT / "docs" / "how-to" / "write-a-study.md").read_text()
    block = re.search(r"## 2\. Say what varies\n\n```yaml\n(.*?)```", page, re.DOTALL)
    path = tmp_path / "example.yaml"
    path.write_text(block.group(1))
    study = load_study(path)
    assert study.trials and load_study(path, "smoke").trials
    built_on = load_study(path, "smoke_seeds").trials
    assert {t.train.steps for t in built_on} == {20} and {t.seeds.weight for t in built_on} == {0, 1, 2, 3}
    assert study.name not in {p.stem for p in (ROOT / "studies").glob("*.yaml")}


def test_trial_help_names_no_profile_folder_it_never_writes() -> None:
    """`trial` trains in-process and writes nothing, so its --profile help speaks of the
    trial's config, not of RESULTS/_profiles/... as the commands that write results do."""
    outcome = runner.invoke(app, ["trial", "--help"], env={"COLUMNS": "200"})
    assert outcome.exit_code == 0
    text = " ".join(outcome.output.split())
    assert "_profiles" not in text and "nothing is written" in text
    assert "_profiles" in " ".join(runner.invoke(app, ["run", "--help"], env={"COLUMNS": "200"}).output.split())


def test_a_warning_other_than_a_damaged_file_is_passed_on_once_after_reading(recwarn) -> None:
    """results_warnings prints damaged files and passes other warnings on, once: passed
    on while still recording, each would be recorded again, without end."""
    import warnings

    from orchestrator.cli_support import results_warnings

    with results_warnings():
        warnings.warn("a library's own warning", UserWarning, stacklevel=1)
    assert [str(w.message) for w in recwarn] == ["a library's own warning"]
