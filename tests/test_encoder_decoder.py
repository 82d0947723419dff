"""The encoder-decoder of 000 §3.3: every positional encoding works in it, cached ==
uncached greedy decoding, teacher-forced exact match == greedy exact match, padding
never leaks, and one seed changes only what it names."""

from dataclasses import replace

import numpy as np
import pytest
import torch
from model_helpers import (
    SEQUENTIAL_PES,
    batch_of,
    eval_questions,
    right_answers,
    tokenizer,
    trained_model,
)

from lengthgen import TrialConfig, train
from lengthgen.batches import batch_tensors
from lengthgen.config import (
    EvalConfig,
    FormatConfig,
    ModelConfig,
    SeedConfig,
    TaskConfig,
    TrainConfig,
)
from lengthgen.evaluation import greedy_decode, teacher_forced_argmax
from lengthgen.model import build_model, count_parameters
from lengthgen.model.encoder_decoder import EncoderDecoder
from lengthgen.model.position.pe import POSITIONAL_ENCODINGS
from lengthgen.model.position.pe.biases import t5_bidirectional_bucket, t5_bucket
from lengthgen.model.position.samplers import POSITION_SAMPLERS, build_position_sampler
from lengthgen.model.sizes import SIZES


def model_config(pe: str, positions: str = "plain", **options) -> ModelConfig:
    return ModelConfig(arch="encoder_decoder", pe=pe, positions=positions, max_positions=64,
                       randomized_at_eval=positions == "randomized", **options)


def random_rows(rows: int = 5, question: int = 6, answer: int = 8) -> tuple[torch.Tensor, int]:
    """Rows "<s> question = answer </s>" of random symbols: random weights give arbitrary
    but deterministic tokens, a strict comparison."""
    generator = torch.Generator().manual_seed(0)
    body = torch.randint(3, len(tokenizer), (rows, question + 1 + answer), generator=generator)
    prompt = 1 + question + 1
    start = torch.full((rows, 1), tokenizer.bos_id)
    equals = torch.full((rows, 1), tokenizer.id("="))
    return torch.cat([start, body[:, :question], equals, body[:, question + 1 :]], dim=1), prompt


@pytest.mark.parametrize("positions", sorted(POSITION_SAMPLERS))
@pytest.mark.parametrize("pe", sorted(POSITIONAL_ENCODINGS))
def test_cached_greedy_equals_uncached_greedy(pe, positions):
    model = build_model(model_config(pe, positions), len(tokenizer), weight_seed=3).eval()
    tokens, prompt = random_rows()
    sampled = model.sample_positions(tokens, torch.full((5,), prompt), build_position_sampler(model_config(pe, positions)),
                                     torch.Generator().manual_seed(1), training=False)
    new_tokens = tokens.shape[1] - prompt
    cached = greedy_decode(model, tokens[:, :prompt], new_tokens, sampled, use_cache=True)
    uncached = greedy_decode(model, tokens[:, :prompt], new_tokens, sampled, use_cache=False)
    assert torch.equal(cached, uncached)
    forced = teacher_forced_argmax(model, torch.cat([tokens[:, :prompt], uncached], dim=1), sampled, prompt)
    assert torch.equal(forced, uncached)  # its own answer, read back, gives itself


@pytest.mark.parametrize("pe", sorted(POSITIONAL_ENCODINGS))
def test_encoder_reads_both_ways_and_decoder_only_backwards(pe):
    model = build_model(model_config(pe), len(tokenizer), weight_seed=0).eval()
    tokens, prompt = random_rows(rows=2)
    positions = model.sample_positions(tokens, torch.full((2,), prompt), POSITION_SAMPLERS["plain"](), None, False)
    later_question = tokens.clone()
    later_question[:, prompt - 2] = 3 + (later_question[:, prompt - 2] + 1 - 3) % (len(tokenizer) - 3)
    later_answer = tokens.clone()  # the decoder reads "<s>" and tokens[prompt:-1]: its last two inputs
    later_answer[:, -3:-1] = 3 + (later_answer[:, -3:-1] + 1 - 3) % (len(tokenizer) - 3)

    def logits(rows):
        split = rows[:, 1 : prompt - 1], rows[:, prompt:-1]
        decoder_input = torch.cat([rows[:, :1], split[1]], dim=1)
        lengths = torch.full((2,), prompt - 2), torch.full((2,), decoder_input.shape[1])
        with torch.no_grad():
            return model(split[0], positions[0], lengths[0], decoder_input, positions[1], lengths[1])

    before = logits(tokens)
    # the last question token reaches the first answer step (through cross-attention)
    assert not torch.allclose(before[:, 0], logits(later_question)[:, 0])
    changed = logits(later_answer)
    assert torch.allclose(before[:, :-2], changed[:, :-2], atol=1e-5)  # the steps before them do not see it
    assert not torch.allclose(before[:, -2:], changed[:, -2:])


def successor_config(pe: str, steps: int = 100) -> TrialConfig:
    return TrialConfig(
        task=TaskConfig(name="successor", train_digits=(1, 2)),
        model=model_config(pe),
        train=TrainConfig(steps=steps, batch_size=32, lr=3e-3, warmup=5, log_every=steps),
        eval=EvalConfig(digits=(1, 2, 3), samples=40),
    )


@pytest.mark.parametrize("pe", SEQUENTIAL_PES)
def test_teacher_forced_exact_match_equals_greedy_exact_match(pe):
    config = successor_config(pe)
    model = trained_model(config)
    outcomes = []
    for _, tokens, prompt, positions in eval_questions(config, model):
        forced_right, greedy_right = right_answers(model, tokens, prompt, positions)
        assert torch.equal(forced_right, greedy_right)
        outcomes += forced_right.tolist()
    # the comparison means something only when some answers are right and some wrong
    assert 0 < sum(outcomes) < len(outcomes), f"{sum(outcomes)} of {len(outcomes)} right"


@pytest.mark.parametrize("pe", ["rope", "t5", "learned"])
def test_padding_of_shorter_questions_changes_nothing(pe):
    """A training batch mixes question lengths (right-padded); each row's logits are those
    it gets alone."""
    config = replace(successor_config(pe), train=TrainConfig(batch_size=12), task=TaskConfig("addition", (1, 4)),
                     format=FormatConfig(pad=False))
    model = build_model(config.model, len(tokenizer), 0).eval()
    batch = batch_of(config)
    assert len(set(batch.prompt_lengths.tolist())) > 1
    plain = POSITION_SAMPLERS["plain"]()

    def logits(rows):
        tensors = batch_tensors(batch._replace(**{f: getattr(batch, f)[rows] for f in ("tokens", "answer_mask",
                                                                                         "prompt_lengths")}),
                                torch.device("cpu"))
        positions = model.sample_positions(tensors.tokens, tensors.prompt_lengths, plain, None, training=True)
        with torch.no_grad():
            return model.forward_batch(tensors, positions)

    together, targets = logits(np.arange(12))
    alone = [logits(np.array([row])) for row in range(12)]
    assert torch.equal(targets, torch.cat([t for _, t in alone]))
    assert torch.allclose(together, torch.cat([logit for logit, _ in alone]), atol=1e-5)


def test_seeds_change_only_what_they_name():
    config = replace(successor_config("fire", steps=6), model=model_config("fire", "randomized"),
                     eval=EvalConfig(digits=(2, 3), samples=6))

    def seeded(**seeds):
        return replace(config, seeds=SeedConfig(**seeds))

    def initial(cfg):
        return build_model(cfg.model, len(tokenizer), cfg.seeds.weight).state_dict()

    reference = initial(seeded(weight=3))
    for other in (seeded(weight=3, data=1), seeded(weight=3, eval=2)):
        assert all(torch.equal(reference[k], v) for k, v in initial(other).items())
    assert not torch.equal(reference["token_embedding.weight"], initial(seeded(weight=4))["token_embedding.weight"])

    def run(cfg):
        result = train(cfg)
        return [t.loss for t in result.train], [s.target for s in result.samples]

    base = run(seeded())
    assert run(seeded()) == base  # the same config, the same numbers
    for other in (seeded(weight=1), seeded(data=1)):
        assert run(other)[0] != base[0]  # the training run depends on both seeds
    eval_only = run(seeded(eval=1))
    assert eval_only[0] == base[0] and eval_only[1] != base[1]  # the eval seed picks the questions only


def test_000_size_presets_and_the_config():
    dims = SIZES["ed_128"]
    model = build_model(ModelConfig(arch="encoder_decoder", size="ed_128", pe="nope"), len(tokenizer), 0)
    assert isinstance(model, EncoderDecoder)
    assert (len(model.encoder), len(model.decoder), dims.n_heads, dims.d_model, dims.d_ff) == (1, 6, 8, 128, 512)
    per_layer = 4 * 128 * 128 + 2 * 128 * 512  # attention and feed-forward matrices
    assert count_parameters(model) == pytest.approx((1 + 6) * per_layer + 6 * 4 * 128 * 128, rel=0.05)
    assert SIZES["ed_512"].d_model == 512 and SIZES["ed_512"].n_layers == 6
    with pytest.raises(ValueError, match="model.arch encoder_decoder does not have aligned outputs"):
        TrialConfig(model=ModelConfig(arch="encoder_decoder"), format=FormatConfig(fixed_length=True, reverse=False),
                    eval=EvalConfig(digits=(5,)))


def test_t5_in_the_encoder_gives_each_direction_half_of_the_buckets():
    distances = torch.tensor([0.0, 1.0, 3.0, 40.0, -1.0, -3.0, -40.0])
    buckets = t5_bidirectional_bucket(distances, 8, 32)
    one_way = t5_bucket(distances.abs(), 4, 32)  # i - j >= 0: the first half, eq. (D.2) with 4 buckets
    assert buckets[:4].tolist() == one_way[:4].tolist() and one_way[:4].tolist()[-1] == 3
    assert buckets[4:].tolist() == (4 + one_way[4:]).tolist()  # keys after the query: the second half
