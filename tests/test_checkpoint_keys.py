"""Checkpoints written before the positional wiring moved into `pe` (or `source_pe` and
`target_pe`) still load: Architecture.renamed_state maps their state-dict keys."""

from __future__ import annotations

from collections import OrderedDict

import pytest
import torch

from lengthgen.config import ModelConfig
from lengthgen.model import build_model

#: a learned input embedding and a learned attention bias: the two moved submodules
CASES = [(arch, pe) for arch in ("decoder", "encoder", "encoder_decoder") for pe in ("learned", "t5")]


def written_before_the_move(model) -> OrderedDict:
    """The model's state dict under the keys an earlier version wrote."""
    new_to_old = {new: old for old, new in model.renamed_state.items()}
    state = model.state_dict()
    old_state = OrderedDict()
    for key, value in state.items():
        new = next((new for new in new_to_old if key.startswith(new)), None)
        old_state[key if new is None else new_to_old[new] + key[len(new):]] = value
    old_state._metadata = state._metadata  # as torch.save keeps it
    return old_state


@pytest.mark.parametrize(("arch", "pe"), CASES)
def test_an_old_checkpoint_loads_into_the_moved_modules(arch, pe):
    cfg = ModelConfig(arch=arch, size="tiny", pe=pe)
    trained = build_model(cfg, vocab_size=20, weight_seed=0)
    old = written_before_the_move(trained)
    moved = [key for key in old if key not in trained.state_dict()]
    assert moved, "the case must exercise a renamed key"

    fresh = build_model(cfg, vocab_size=20, weight_seed=1)
    assert not all(torch.equal(a, b) for a, b in zip(fresh.state_dict().values(), trained.state_dict().values()))
    fresh.load_state_dict(old)  # strict: every key found, none left over
    for key, value in trained.state_dict().items():
        assert torch.equal(fresh.state_dict()[key], value), key


def test_a_checkpoint_with_todays_keys_loads_unchanged():
    cfg = ModelConfig(arch="decoder", size="tiny", pe="t5")
    trained = build_model(cfg, vocab_size=20, weight_seed=0)
    fresh = build_model(cfg, vocab_size=20, weight_seed=1)
    fresh.load_state_dict(trained.state_dict())
    assert all(torch.equal(a, b) for a, b in zip(fresh.state_dict().values(), trained.state_dict().values()))
