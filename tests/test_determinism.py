"""train.deterministic: a trial's rows repeat bit for bit, the mode never leaks into the
next trial of the same process, and a device or setting that cannot honour it is refused."""

from dataclasses import replace

import pytest
import torch

from lengthgen import TrialConfig, train
from lengthgen.config import EvalConfig, ModelConfig, TaskConfig, TrainConfig
from lengthgen.determinism import check_deterministic, deterministic
from orchestrator.store.trial_rows import result_rows
from orchestrator.studies.config_paths import TRIAL_CONFIG

BASE = TrialConfig(
    task=TaskConfig(name="successor", train_digits=(1, 3)),
    model=ModelConfig(max_positions=64),
    train=TrainConfig(steps=8, batch_size=8, log_every=2, warmup=2),
    eval=EvalConfig(digits=(2, 5), samples=8, every=4),
)


def timeless_rows(result) -> dict:
    """A trial's result rows less wall-clock times, which never repeat."""
    rows = result_rows(result)
    rows["train"] = [{k: v for k, v in row.items() if k != "wall_s"} for row in rows["train"]]
    return rows


def rows_without_time(config: TrialConfig) -> dict:
    return timeless_rows(train(config, device="cpu"))


@pytest.mark.parametrize("exact", [False, True])
def test_two_runs_of_a_trial_give_identical_rows_on_the_cpu(exact):
    config = replace(BASE, train=replace(BASE.train, deterministic=exact))
    assert rows_without_time(config) == rows_without_time(config)


def test_deterministic_mode_gives_the_cpus_usual_numbers():
    """On a CPU the default kernels are already deterministic: the mode changes nothing."""
    exact = replace(BASE, train=replace(BASE.train, deterministic=True))
    assert rows_without_time(exact) == rows_without_time(BASE)


def test_the_mode_is_put_back_after_the_trial():
    before = (torch.are_deterministic_algorithms_enabled(), torch.backends.cudnn.benchmark)
    with deterministic(True, torch.device("cpu")):
        assert torch.are_deterministic_algorithms_enabled()
    assert (torch.are_deterministic_algorithms_enabled(), torch.backends.cudnn.benchmark) == before
    train(replace(BASE, train=replace(BASE.train, steps=2, deterministic=True)))
    assert torch.are_deterministic_algorithms_enabled() == before[0]
    with pytest.raises(RuntimeError), deterministic(True, torch.device("cpu")):
        raise RuntimeError("a trial that fails")
    assert torch.are_deterministic_algorithms_enabled() == before[0]


def test_a_device_without_deterministic_algorithms_is_refused_naming_it():
    with pytest.raises(ValueError, match="train.deterministic: true cannot be honoured on device 'mps'"):
        check_deterministic(torch.device("mps"))
    check_deterministic(torch.device("cuda"))  # the check itself needs no GPU


def test_deterministic_with_compile_is_refused_naming_both():
    with pytest.raises(ValueError, match="train.deterministic: true cannot be honoured with train.compile"):
        TRIAL_CONFIG.validate_python({"train": {"deterministic": True, "compile": True}})


def test_the_default_keeps_every_trial_id():
    assert replace(BASE, train=replace(BASE.train, deterministic=False)).trial_id == BASE.trial_id
