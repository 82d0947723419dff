"""Study files: expansion, and the corpus of bad files refused with file, field and reason."""

from pathlib import Path

import pytest
from typer.testing import CliRunner

from orchestrator.cli import app
from orchestrator.studies.study import StudyError, load_study

FILES = Path(__file__).parent / "study_files"
BAD = sorted((FILES / "bad").glob("*.yaml"))
runner = CliRunner()


def expected_message(path: Path) -> str:
    first = path.read_bytes().decode("utf-8", errors="replace").splitlines()[0]
    assert first.startswith("# expect: "), f"{path} must start with '# expect: <message fragment>'"
    return first.removeprefix("# expect: ")


def written_value(path: Path) -> str | None:
    """The refused value as the message quotes it (`# value: ...`, second line), for a
    file whose error is about a value rather than a key or the file's shape."""
    second = path.read_bytes().decode("utf-8", errors="replace").splitlines()[1]
    return second.removeprefix("# value: ") if second.startswith("# value: ") else None


VALUED = [p for p in BAD if written_value(p) is not None]


def test_axes_are_crossed_and_profiles_applied():
    study = load_study(FILES / "good_two_trials.yaml")
    assert study.name == "two_trials" and len(study.trials) == 2
    assert [t.seeds.weight for t in study.trials] == [0, 1]
    assert len({t.trial_id for t in study.trials}) == 2
    longer = load_study(FILES / "good_two_trials.yaml", profile="longer")
    assert {t.train.steps for t in longer.trials} == {40}
    assert {t.trial_id for t in longer.trials}.isdisjoint(t.trial_id for t in study.trials)


def test_bundled_studies_validate():
    for path in sorted((Path(__file__).parents[1] / "studies").glob("*.yaml")):
        study = load_study(path)
        for profile in study.spec.profiles:
            load_study(path, profile)


@pytest.mark.parametrize("path", BAD, ids=[p.stem for p in BAD])
def test_bad_study_is_refused_with_file_field_and_reason(path):
    with pytest.raises(StudyError) as caught:
        load_study(path)
    message = str(caught.value)
    assert message.startswith(str(path))
    assert expected_message(path) in message


@pytest.mark.parametrize("path", VALUED, ids=[p.stem for p in VALUED])
def test_a_refused_value_is_quoted_as_written(path):
    value = written_value(path)
    assert value in expected_message(path)
    with pytest.raises(StudyError) as caught:
        load_study(path)
    assert value in str(caught.value)


def test_refusals_are_in_the_study_words_not_pydantics():
    for path in BAD:
        with pytest.raises(StudyError) as caught:
            load_study(path)
        assert "Input should be" not in str(caught.value) and "Value error" not in str(caught.value), path


def test_an_unknown_task_names_what_was_written_and_every_task():
    from lengthgen.tasks import TASKS

    path = FILES / "bad" / "unknown_task.yaml"
    with pytest.raises(StudyError) as caught:
        load_study(path)
    assert str(caught.value) == (f"{path}:5: base.task.name: 'subtraction' is not one of "
                                 f"{', '.join(TASKS)}")


@pytest.mark.parametrize("path", BAD[:4], ids=[p.stem for p in BAD[:4]])
def test_cli_exits_2_and_writes_nothing(path, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for command in (["validate", str(path)], ["run", str(path), "--results", str(tmp_path / "results")]):
        result = runner.invoke(app, command)
        assert result.exit_code == 2, result.output
        assert expected_message(path) in " ".join(result.output.split())
    assert list(tmp_path.iterdir()) == []


def test_unknown_profile_lists_the_profiles():
    with pytest.raises(StudyError, match="unknown profile 'gpu'; profiles: longer"):
        load_study(FILES / "good_two_trials.yaml", profile="gpu")


def test_missing_file_is_bad_input(tmp_path):
    result = runner.invoke(app, ["validate", str(tmp_path / "nope.yaml")])
    assert result.exit_code == 2 and "cannot read the file" in result.output


def test_trial_command_trains_one_config_without_ray(tmp_path):
    config = tmp_path / "trial.yaml"
    config.write_text(
        "task: {name: successor, train_digits: [1, 2]}\n"
        "model: {size: tiny, pe: nope}\n"
        "train: {steps: 4, batch_size: 4, warmup: 1, log_every: 2}\n"
        "eval: {digits: [2, 3], samples: 4}\n"
    )
    result = runner.invoke(app, ["trial", str(config)])
    assert result.exit_code == 0, result.output
    assert "step      4" in result.output and "status done" in result.output
    config.write_text("model: {pe: rotary}\n")
    refused = runner.invoke(app, ["trial", str(config)])
    assert refused.exit_code == 2 and "model.pe" in refused.output


def test_study_needing_more_gpus_than_the_cluster_has_is_refused(tmp_path):
    study = tmp_path / "gpu.yaml"
    study.write_text((FILES / "good_two_trials.yaml").read_text().replace(
        "resources: {cpus_per_trial: 1}", "resources: {cpus_per_trial: 1, gpus_per_trial: 0.25}"))
    # on the local Ray the modules share (conftest): it has no GPU
    result = runner.invoke(app, ["run", str(study), "--results", str(tmp_path / "results")])
    assert result.exit_code == 2, result.output
    said = " ".join(result.output.split())
    assert "each trial asks for 1 CPU and 0.25 GPU" in said and "this Ray cluster has" in said
    assert "training FLOPs" in said and "None of its profiles (longer) runs on this cluster" in said
    assert not (tmp_path / "results").exists()


def test_profiles_can_set_resources(tmp_path):
    study = tmp_path / "study.yaml"
    study.write_text((FILES / "good_two_trials.yaml").read_text().replace(
        "  longer: {train.steps: 40}",
        "  longer: {train.steps: 40}\n  gpu: {resources.gpus_per_trial: 0.5, resources.cpus_per_trial: 2}"))
    assert load_study(study).spec.resources.gpus_per_trial == 0
    chosen = load_study(study, profile="gpu").spec.resources
    assert (chosen.gpus_per_trial, chosen.cpus_per_trial) == (0.5, 2)
    study.write_text(study.read_text().replace("resources.cpus_per_trial: 2", "resources.cpu: 2"))
    with pytest.raises(StudyError, match="profiles.gpu.resources.cpu: no such config field; resources fields: cpus_per_trial"):
        load_study(study)


def test_a_profile_can_build_on_another_with_a_yaml_merge_key(tmp_path):
    study = tmp_path / "study.yaml"
    study.write_text((FILES / "good_two_trials.yaml").read_text().replace(
        "  longer: {train.steps: 40}",
        "  longer: &longer {train.steps: 40, train.lr: 1.0e-3}\n"
        "  longer_more_seeds: {<<: *longer, train.lr: 2.0e-3, axes.seeds.weight: [0, 1, 2]}"))
    longer, more = load_study(study, profile="longer"), load_study(study, profile="longer_more_seeds")
    assert [(t.train.steps, t.train.lr) for t in longer.trials] == [(40, 1e-3)] * 2
    assert [(t.train.steps, t.train.lr, t.seeds.weight) for t in more.trials] == [
        (40, 2e-3, 0), (40, 2e-3, 1), (40, 2e-3, 2)]
    # a key written twice beside the merge is still refused
    study.write_text(study.read_text().replace("train.lr: 2.0e-3,", "train.lr: 2.0e-3, train.lr: 3.0e-3,"))
    with pytest.raises(StudyError, match="duplicate key 'train.lr'"):
        load_study(study)


def test_profiles_can_replace_axis_values(tmp_path):
    study = tmp_path / "study.yaml"
    study.write_text((FILES / "good_two_trials.yaml").read_text().replace(
        "  longer: {train.steps: 40}", "  longer: {train.steps: 40}\n  many: {axes.seeds.weight: [0, 1, 2]}"))
    assert len(load_study(study).trials) == 2
    assert [t.seeds.weight for t in load_study(study, profile="many").trials] == [0, 1, 2]
    study.write_text(study.read_text().replace("axes.seeds.weight: [0, 1, 2]", "axes.seeds.weight: 3"))
    with pytest.raises(StudyError, match="an axis takes a list of values"):
        load_study(study, profile="many")
