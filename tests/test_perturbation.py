"""seeds.perturb: a numerical replicate moves one initial weight by one ulp, and it acts."""

from dataclasses import replace

import pytest
import torch
from model_helpers import tokenizer, with_seeds

from lengthgen import TrialConfig
from lengthgen.config import EvalConfig, ModelConfig, SeedConfig, TaskConfig, TrainConfig
from lengthgen.model import TRANSFORMER_LAYERS, build_model
from lengthgen.model.perturbation import layer_weights, perturbation_site
from lengthgen.training import train

BASE = TrialConfig(
    task=TaskConfig(name="successor", train_digits=(1, 3)),
    model=ModelConfig(max_positions=64),
    train=TrainConfig(steps=4, batch_size=8, log_every=1, warmup=1),
    eval=EvalConfig(digits=(2, 4), samples=6),
)


def weights(config: TrialConfig, arch: str = "decoder") -> dict[str, torch.Tensor]:
    model_config = replace(config.model, arch=arch) if arch != "decoder" else config.model
    model = build_model(model_config, len(tokenizer), config.seeds.weight, perturb_seed=config.seeds.perturb)
    return model.state_dict()


def differing_entries(a: dict, b: dict) -> list[tuple[str, int]]:
    return [(name, int(i)) for name in a for i in torch.nonzero((a[name] != b[name]).reshape(-1)).flatten()]


@pytest.mark.parametrize("arch", ["decoder", "encoder", "encoder_decoder"])
def test_a_perturbation_moves_exactly_one_layer_weight_by_one_ulp(arch):
    original = weights(BASE, arch)
    for perturb in (1, 2, 17):
        moved = weights(with_seeds(BASE, perturb=perturb), arch)
        [(name, index)] = differing_entries(original, moved)
        before, after = original[name].reshape(-1)[index], moved[name].reshape(-1)[index]
        assert after == torch.nextafter(before, torch.tensor(float("inf")))
        assert before != 0


def test_perturb_zero_is_the_unperturbed_model_and_keeps_the_trial_id():
    assert differing_entries(weights(BASE), weights(with_seeds(BASE, perturb=0))) == []
    assert with_seeds(BASE, perturb=0).trial_id == BASE.trial_id
    assert with_seeds(BASE, perturb=1).trial_id != BASE.trial_id


def test_the_site_depends_on_the_perturb_seed_alone():
    """Perturb seed k moves the same entry whatever the weight or data seed."""
    sites = set()
    for weight, data in ((0, 0), (3, 0), (0, 5), (7, 2)):
        config = with_seeds(BASE, weight=weight, data=data, perturb=4)
        original = weights(with_seeds(config, perturb=0))
        sites.add(tuple(differing_entries(original, weights(config))))
    assert len(sites) == 1
    # other perturb seeds pick other sites
    model = build_model(BASE.model, len(tokenizer), 0)
    layer = layer_weights(model, TRANSFORMER_LAYERS)
    assert len({perturbation_site(layer, k) for k in range(1, 21)}) >= 19


def test_sites_are_linear_weights_inside_the_transformer_layers_only():
    model = build_model(BASE.model, len(tokenizer), 0)
    names = [name for name, _ in layer_weights(model, TRANSFORMER_LAYERS)]
    assert names and all(name.startswith("blocks.") and name.endswith(".weight") for name in names)
    # embeddings, the output head and biases are never moved
    assert not any("embed" in name or "lm_head" in name for name in names)


def test_a_perturbation_reaches_every_layer_within_a_few_steps():
    """The replicate must act: after a few training steps weights other than the moved
    one differ too (its one-ulp change went through the gradients)."""
    moved = with_seeds(BASE, perturb=3)
    [(site, _)] = differing_entries(weights(BASE), weights(moved))
    changed = {name for name, _ in differing_entries(_final_weights(BASE), _final_weights(moved))}
    assert len(changed - {site}) > 5


def _final_weights(config: TrialConfig) -> dict[str, torch.Tensor]:
    captured = {}

    def keep(report):
        if report.checkpoint is not None:
            captured["model"] = report.checkpoint()["model"]

    train(config, on_report=keep)
    return captured["model"]


def test_the_perturb_seed_does_not_change_the_data_or_the_questions():
    from lengthgen.batches import training_batch
    from lengthgen.config import derive
    from lengthgen.evaluation import build_eval_sets

    def data(config):
        task, distribution = derive(config).task, derive(config).distribution
        batches = [training_batch(config, task, distribution, tokenizer, s).tokens for s in range(3)]
        return batches + [s.questions.tokens for s in build_eval_sets(config, task, tokenizer)]

    moved = with_seeds(BASE, perturb=9)
    assert all((a == b).all() for a, b in zip(data(BASE), data(moved), strict=True))


@pytest.mark.parametrize("value", [-1, 1.5, "two"])
def test_a_bad_perturb_seed_is_refused_naming_it(value):
    from orchestrator.studies.config_paths import TRIAL_CONFIG

    with pytest.raises(ValueError, match="perturb"):
        TRIAL_CONFIG.validate_python({"seeds": {"perturb": value}})
    with pytest.raises(ValueError, match="seeds.perturb"):
        SeedConfig(perturb=-1)
