"""One seed changes only what it names; the same config gives the same numbers."""

import numpy as np
import torch
from model_helpers import batch_of, tokenizer, with_seeds

from lengthgen import TrialConfig, train
from lengthgen.config import EvalConfig, SeedConfig, TaskConfig, TrainConfig
from lengthgen.evaluation import build_eval_sets
from lengthgen.model import build_model
from lengthgen.tasks import TASKS

BASE = TrialConfig(
    task=TaskConfig(name="addition", train_digits=(1, 3)),
    train=TrainConfig(steps=6, batch_size=8, log_every=2, warmup=2),
    eval=EvalConfig(digits=(2, 4), samples=6, every=3),
)


def initial_weights(config: TrialConfig) -> dict:
    return build_model(config.model, len(tokenizer), config.seeds.weight).state_dict()


def batches(config: TrialConfig, steps=range(4)) -> list[np.ndarray]:
    return [batch_of(config, s).tokens for s in steps]


def test_weight_seed_alone_decides_initial_weights():
    reference = initial_weights(with_seeds(BASE, weight=3, data=0))
    for data in (1, 7):
        other = initial_weights(with_seeds(BASE, weight=3, data=data, eval=data))
        assert all(torch.equal(reference[k], other[k]) for k in reference)
    different = initial_weights(with_seeds(BASE, weight=4))
    assert not torch.equal(reference["token_embedding.weight"], different["token_embedding.weight"])


def test_data_seed_alone_decides_batches():
    reference = batches(with_seeds(BASE, data=5, weight=0))
    for weight in (1, 9):
        other = batches(with_seeds(BASE, data=5, weight=weight, eval=weight))
        assert all(np.array_equal(a, b) for a, b in zip(reference, other))
    assert not np.array_equal(reference[0], batches(with_seeds(BASE, data=6))[0])


def test_eval_seed_alone_decides_eval_questions():
    task = TASKS["addition"]()

    def questions(config):
        return [s.questions.tokens for s in build_eval_sets(config, task, tokenizer)]

    reference = questions(with_seeds(BASE, eval=2))
    other = questions(with_seeds(BASE, eval=2, weight=5, data=5))
    assert all(np.array_equal(a, b) for a, b in zip(reference, other))
    assert not np.array_equal(reference[0], questions(with_seeds(BASE, eval=3))[0])


def test_repeated_config_gives_identical_metrics():
    first, second = train(BASE), train(BASE)
    assert [t.loss for t in first.train] == [t.loss for t in second.train]
    assert [(s, r.correct) for s, r in first.eval] == [(s, r.correct) for s, r in second.eval]
    assert [s.prediction for s in first.samples] == [s.prediction for s in second.samples]


def test_trial_id_is_stable_and_names_the_config():
    assert BASE.trial_id == TrialConfig(**{f: getattr(BASE, f) for f in BASE.__dataclass_fields__}).trial_id
    assert BASE.trial_id != with_seeds(BASE, data=1).trial_id
    assert len(BASE.trial_id) == 12


def test_seed_config_defaults_are_zero():
    assert SeedConfig() == SeedConfig(weight=0, data=0, eval=0)
