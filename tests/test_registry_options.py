"""Every registry checks its own options: each entry (task, positional encoding,
position sampler, structural bias) declares the config fields it reads, and a field
that other entries read is refused, naming the field and its readers, when the
chosen entry does not read it and it differs from its default. A default stays
accepted everywhere, so no existing trial id changes."""

from __future__ import annotations

import dataclasses
import typing

import pytest

from lengthgen.config import ModelConfig, TaskConfig, TrialConfig
from lengthgen.model.position.abacus import Abacus
from lengthgen.model.position.attention_bias import ATTENTION_BIASES
from lengthgen.model.position.pe import POSITIONAL_ENCODINGS
from lengthgen.model.position.samplers import POSITION_SAMPLERS
from lengthgen.tasks import TASKS

#: (config section, its dataclass, the field naming the entry, the registry)
REGISTRIES = {
    "task.name": ("task", TaskConfig, "name", TASKS),
    "model.pe": ("model", ModelConfig, "pe", POSITIONAL_ENCODINGS),
    "model.positions": ("model", ModelConfig, "positions", POSITION_SAMPLERS),
    "model.attention_bias": ("model", ModelConfig, "attention_bias", ATTENTION_BIASES),
}


def readers(registry, option: str) -> list[str]:
    return [name for name, entry in registry.items() if option in entry.options]


def other_value(cls, option: str):
    """A valid value of `option` other than its default."""
    spec = next(f for f in dataclasses.fields(cls) if f.name == option)
    default = spec.default
    if isinstance(default, bool):
        return not default
    if isinstance(default, (int, float)):
        return default + 2
    choices = typing.get_args(typing.get_type_hints(cls)[option])
    return next(choice for choice in choices if choice != default)


CASES = [
    pytest.param(axis, option, entry, id=f"{axis}={entry}:{option}")
    for axis, (_, cls, _, registry) in REGISTRIES.items()
    for option in sorted({o for entry in registry.values() for o in entry.options})
    for entry in registry
]


@pytest.mark.parametrize(("axis", "option", "entry"), CASES)
def test_an_option_is_refused_where_its_entry_does_not_read_it(axis, option, entry):
    section, cls, field, registry = REGISTRIES[axis]
    settings = {field: entry, option: other_value(cls, option)}
    if entry in readers(registry, option):
        assert getattr(cls(**settings), option) == settings[option]
        return
    names = ", ".join(readers(registry, option))
    with pytest.raises(ValueError) as refused:
        cls(**settings)
    assert str(refused.value) == (
        f"{section}.{option} does not apply to {axis} {entry}, only to {names}; remove it"
    )


@pytest.mark.parametrize(("axis", "option", "entry"), CASES)
def test_a_default_is_accepted_everywhere_and_keeps_the_trial_id(axis, option, entry):
    section, cls, field, _ = REGISTRIES[axis]
    default = next(f.default for f in dataclasses.fields(cls) if f.name == option)
    with_default = cls(**{field: entry, option: default})
    assert with_default == cls(**{field: entry})
    if section == "model":
        assert TrialConfig(model=ModelConfig(**{option: default})).trial_id == "44136fa355b3"


def test_the_issue_example_is_refused():
    """`{pe: rope, t5_buckets: 64}` used to validate and change the trial id."""
    with pytest.raises(
        ValueError, match="model.t5_buckets does not apply to model.pe rope, only to t5"
    ):
        ModelConfig(pe="rope", t5_buckets=64)
    with pytest.raises(ValueError, match="model.t5_max_distance does not apply to model.pe fire"):
        ModelConfig(pe="fire", t5_max_distance=256)
    assert ModelConfig(pe="t5", t5_buckets=64).t5_buckets == 64


def test_sampler_options_name_their_samplers():
    refusals = {
        "randomized_at_eval": "model.positions plain, only to randomized",
        "cyclic_period": "model.positions plain, only to cyclic",
        "coupled_at_eval": "model.positions plain, only to coupled",
    }
    for option, message in refusals.items():
        with pytest.raises(ValueError, match=message):
            ModelConfig(**{option: other_value(ModelConfig, option)})
    with pytest.raises(
        ValueError, match="model.cyclic_period does not apply to model.positions randomized"
    ):
        ModelConfig(positions="randomized", cyclic_period=4)


def test_abacus_options_need_abacus():
    for option in Abacus.options:
        with pytest.raises(
            ValueError, match=f"model.{option} does not apply without model.abacus: true"
        ):
            ModelConfig(**{option: other_value(ModelConfig, option)})
        assert ModelConfig(abacus=True, **{option: other_value(ModelConfig, option)}).abacus


def test_every_declared_option_is_a_field_of_its_section():
    for _, cls, field, registry in REGISTRIES.values():
        names = {f.name for f in dataclasses.fields(cls)} - {field}
        for entry, reads in registry.items():
            assert set(reads.options) <= names, f"{entry} declares {set(reads.options) - names}"
    assert set(Abacus.options) <= {f.name for f in dataclasses.fields(ModelConfig)}
