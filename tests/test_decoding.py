"""Decoding equivalences: KV-cached greedy == uncached greedy, and teacher-forced exact
match == greedy exact match, for every positional encoding and position sampler."""

from dataclasses import replace

import pytest
import torch
from model_helpers import SEQUENTIAL_PES, eval_questions, right_answers, tokenizer, trained_model

from lengthgen import TrialConfig
from lengthgen.config import EvalConfig, ModelConfig, TaskConfig, TrainConfig
from lengthgen.evaluation import greedy_decode
from lengthgen.model import build_model
from lengthgen.model.position.pe import POSITIONAL_ENCODINGS
from lengthgen.model.position.samplers import POSITION_SAMPLERS, build_position_sampler


def model_config(pe: str, positions: str = "plain") -> ModelConfig:
    return ModelConfig(pe=pe, positions=positions, max_positions=64, randomized_at_eval=positions == "randomized")


@pytest.mark.parametrize("positions", sorted(POSITION_SAMPLERS))
@pytest.mark.parametrize("pe", sorted(POSITIONAL_ENCODINGS))
def test_cached_greedy_equals_uncached_greedy(pe, positions):
    cfg = model_config(pe, positions)
    model = build_model(cfg, len(tokenizer), weight_seed=3).eval()
    # random weights give arbitrary but deterministic tokens: a strict comparison
    rows = torch.randint(3, len(tokenizer), (6, 7 + 9), generator=torch.Generator().manual_seed(0))
    prompts = rows[:, :7]
    sampled = model.sample_positions(rows, torch.full((6,), 7), build_position_sampler(cfg),
                                     torch.Generator().manual_seed(1), training=False)
    cached = greedy_decode(model, prompts, 9, sampled, use_cache=True)
    uncached = greedy_decode(model, prompts, 9, sampled, use_cache=False)
    assert torch.equal(cached, uncached)


@pytest.mark.parametrize("pe", sorted(POSITIONAL_ENCODINGS))
def test_cached_logits_equal_full_forward(pe):
    model = build_model(model_config(pe), len(tokenizer), weight_seed=0).eval()
    tokens = torch.randint(3, len(tokenizer), (2, 10))
    positions = torch.arange(10).expand(2, 10)
    with torch.no_grad():
        full = model(tokens, positions)
        cache = model.empty_cache()
        first = model(tokens[:, :6], positions[:, :6], cache)
        rest = [model(tokens[:, t : t + 1], positions[:, t : t + 1], cache) for t in range(6, 10)]
    assert torch.allclose(torch.cat([first, *rest], dim=1), full, atol=1e-5)


def trained(pe: str) -> tuple[TrialConfig, torch.nn.Module]:
    """A model trained just long enough to answer some questions and miss others."""
    config = TrialConfig(
        task=TaskConfig(name="successor", train_digits=(1, 3)),
        model=replace(model_config(pe), size="tiny"),
        train=TrainConfig(steps=200, batch_size=32, lr=3e-3, warmup=10, log_every=200),
        eval=EvalConfig(digits=(1, 2, 3), samples=48),
    )
    return config, trained_model(config)


@pytest.mark.parametrize("pe", SEQUENTIAL_PES)
def test_teacher_forced_exact_match_equals_greedy_exact_match(pe):
    config, model = trained(pe)
    outcomes = []
    for _, tokens, prompt, positions in eval_questions(config, model):
        forced_right, greedy_right = right_answers(model, tokens, prompt, positions)
        assert torch.equal(forced_right, greedy_right)
        outcomes += forced_right.tolist()
    # the comparison means something only when some answers are right and some wrong
    assert 0 < sum(outcomes) < len(outcomes), f"{sum(outcomes)} of {len(outcomes)} right"
