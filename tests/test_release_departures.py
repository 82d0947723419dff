"""The options that reproduce what the authors' released code does where lg-study's
defaults differ (model.norm_placement pre_post_sum, model.init, model.attention_scale,
model.norm_eps, train.adam_eps): each against a transcription of the released code
(Cho et al. 2024: HanseulJo/position-coupling at b9cad94; McLeish et al. 2024:
mcleish7/arithmetic at 86022a5), each refused where it means nothing, and each at its
default building the model exactly as before it existed."""

from __future__ import annotations

import math
import random
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from torch import nn

from lengthgen import TrialConfig, train
from lengthgen.config import DataConfig, EvalConfig, ModelConfig, TaskConfig, TrainConfig
from lengthgen.model import build_model
from lengthgen.model.attention import SelfAttention
from lengthgen.model.block import Block
from lengthgen.model.init import UnscaledQueries
from lengthgen.model.layers import GeGLUFeedForward, Residual, RMSNorm
from lengthgen.model.sizes import SIZES
from lengthgen.training_step import build_optimizer


def release_t5_layer_ff_pre_post(hidden, layer_norm, dense_relu_dense, layer_norm_2):
    """position-coupling src/model/modeling/custom_t5_decoder_only.py,
    CustomT5LayerFF.forward with layer_norm_position 'pre_post' (alpha 1.0 without
    deepnorm, dropout 0), transcribed."""
    forwarded_states = layer_norm(hidden)
    forwarded_states = dense_relu_dense(forwarded_states)
    hidden = 1.0 * hidden + forwarded_states
    return layer_norm_2(hidden)


def test_pre_post_sum_is_the_release_pre_post():
    torch.manual_seed(0)
    dims = SIZES["tiny"]
    ff = GeGLUFeedForward(dims, 0.0)
    residual = Residual(ff, dims.d_model, "rmsnorm", "pre_post_sum")
    with torch.no_grad():
        residual.norm_in.weight.uniform_(0.5, 1.5)
        residual.norm_sum.weight.uniform_(0.5, 1.5)
    x = torch.randn(3, 7, dims.d_model) * 4 + 1
    expected = release_t5_layer_ff_pre_post(x, residual.norm_in, ff, residual.norm_sum)
    assert torch.equal(residual(x), expected)
    # and it differs from lg-study's pre_post, x + N(f(N(x))), which never normalises the stream
    pre_post = Residual(ff, dims.d_model, "rmsnorm", "pre_post")
    assert not torch.allclose(pre_post(x), expected, atol=1e-3)


def test_norm_eps_reaches_every_norm_and_its_default_keeps_each_norms_own():
    config = ModelConfig(size="tiny", norm="layernorm", norm_placement="post", embedding_norm=True,
                         norm_eps=1e-12)
    model = build_model(config, 16, weight_seed=0)
    norms = [m for m in model.modules() if isinstance(m, (nn.LayerNorm, RMSNorm))]
    assert len(norms) == 2 * SIZES["tiny"].n_layers + 2 and {m.eps for m in norms} == {1e-12}
    plain = build_model(ModelConfig(size="tiny", norm="rmsnorm"), 16, weight_seed=0)
    assert {m.eps for m in plain.modules() if isinstance(m, RMSNorm)} == {None}
    assert {m.eps for m in build_model(ModelConfig(size="tiny"), 16, 0).modules()
            if isinstance(m, nn.LayerNorm)} == {1e-5}


def release_t5_stds(d_model: int, d_kv: int, n_heads: int, d_ff: int, factor: float = 1.0) -> dict[str, float]:
    """position-coupling custom_t5_decoder_only.py, CustomDecoderOnlyT5._init_weights
    (T5DenseGatedActDense and T5Attention branches, beta 1.0 without deepnorm), the
    learned positions of CustomT5Stack.__init__ (std factor * 1.0), the shared token
    embedding (nn.Embedding's own N(0, 1): CustomDecoderOnlyT5 is none of the classes
    whose `shared` _init_weights redraws) and the tied head, whose logits are the
    embedding applied to the last state times d_model ** -0.5."""
    return {
        "q": factor * (d_model * d_kv) ** -0.5, "k": factor * d_model**-0.5, "v": factor * d_model**-0.5,
        "o": factor * (n_heads * d_kv) ** -0.5, "wi": factor * d_model**-0.5, "wo": factor * d_ff**-0.5,
        "embedding": factor * 1.0, "positions": factor * 1.0, "head": factor * 1.0 * d_model**-0.5,
    }


def test_t5_initialisation_draws_the_release_standard_deviations():
    dims = SIZES["1l_1024_4h"]
    config = ModelConfig(size="1l_1024_4h", pe="learned", ffn="geglu", norm="rmsnorm", init="t5",
                         attention_scale="none", max_positions=203)
    model = build_model(config, 64, weight_seed=3)
    want = release_t5_stds(dims.d_model, dims.head_dim, dims.n_heads, dims.d_ff)
    attention = model.blocks[0].attention.sublayer
    q, k, v = attention.qkv.weight.split(dims.d_model)
    ff = model.blocks[0].feed_forward.sublayer
    drawn = {"q": q, "k": k, "v": v, "o": attention.out.weight, "wi": ff.gate_and_value.weight,
             "wo": ff.down.weight, "embedding": model.token_embedding.weight,
             "positions": model.pe.input_embedding.table.weight, "head": model.lm_head.weight}
    for name, weight in drawn.items():
        assert abs(weight.std().item() / want[name] - 1) < 0.05, name
        assert abs(weight.mean().item()) < 0.05 * want[name], name
    assert torch.count_nonzero(attention.qkv.bias) == 0
    assert all(torch.equal(m.weight, torch.ones_like(m.weight)) for m in model.modules() if isinstance(m, RMSNorm))
    # from the weight seed alone
    again = build_model(config, 64, weight_seed=3)
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), again.state_dict().values(), strict=True))


def release_t5_attention_unscaled(hidden, q_weight, k_weight, v_weight, o_weight, n_heads, mask):
    """transformers' T5Attention.forward as CustomT5Attention runs it for abs_learned
    positions: scores = q k^T with no 1/sqrt(d_kv), plus the mask, softmax in float,
    weights times values, then the output map (dropout 0), transcribed."""
    batch, length, _ = hidden.shape

    def shape(states):
        return states.view(batch, -1, n_heads, states.shape[-1] // n_heads).transpose(1, 2)

    query_states, key_states, value_states = (shape(hidden @ w.T) for w in (q_weight, k_weight, v_weight))
    scores = torch.matmul(query_states, key_states.transpose(3, 2))
    scores += mask
    attn_weights = nn.functional.softmax(scores.float(), dim=-1).type_as(scores)
    attn_output = torch.matmul(attn_weights, value_states).transpose(1, 2).reshape(batch, length, -1)
    return attn_output @ o_weight.T


def test_unscaled_attention_is_t5s_scores():
    torch.manual_seed(1)
    dims = SIZES["tiny"]  # head_dim 16: sqrt(16) = 4, a power of two, so scaling is exact
    attention = SelfAttention(dims, None, 0.0)
    attention.qkv = UnscaledQueries(attention.qkv, dims.head_dim)
    with torch.no_grad():
        for p in attention.parameters():
            p.normal_(0, 0.3)
        attention.qkv.bias.zero_()
        attention.out.bias.zero_()
    x = torch.randn(2, 6, dims.d_model)
    positions = torch.arange(6).expand(2, 6)
    causal = torch.full((6, 6), float("-inf")).triu(1)
    q, k, v = attention.qkv.weight.split(dims.d_model)
    expected = release_t5_attention_unscaled(x, q, k, v, attention.out.weight, dims.n_heads, causal)
    got = attention(x, positions, positions, None)
    assert torch.allclose(got, expected, atol=1e-5, rtol=1e-5)
    assert set(attention.state_dict()) == {"qkv.weight", "qkv.bias", "out.weight", "out.bias"}


def test_defaults_build_the_gpt2_model_bit_for_bit():
    """model.init gpt2 and attention_scale inv_sqrt_d are the model before they existed:
    every weight N(0, 0.02) and a plain query-key-value map."""
    model = build_model(ModelConfig(size="tiny"), 16, weight_seed=0)
    assert all(type(m.attention.sublayer.qkv) is nn.Linear for m in model.blocks)
    assert abs(model.token_embedding.weight.std().item() / 0.02 - 1) < 0.1


def test_adam_eps_reaches_the_optimizer():
    model = nn.Linear(2, 2)
    assert build_optimizer(model, TrainConfig()).defaults["eps"] == 1e-8  # torch's default
    assert build_optimizer(model, TrainConfig(adam_eps=1e-12)).defaults["eps"] == 1e-12


@pytest.mark.parametrize(("section", "values", "field"), [
    ("model", {"arch": "encoder_decoder", "init": "t5"}, "model.init"),
    ("model", {"arch": "encoder_decoder", "attention_scale": "none"}, "model.attention_scale"),
    ("model", {"norm_eps": 0.0}, "model.norm_eps"),
    ("train", {"adam_eps": -1.0}, "train.adam_eps"),
])
def test_refused_where_it_means_nothing(section, values, field):
    with pytest.raises(ValueError, match=field.replace(".", r"\.")):
        (ModelConfig if section == "model" else TrainConfig)(**values)


def test_block_takes_the_scale_of_the_config():
    dims = SIZES["tiny"]
    block = Block(dims, ModelConfig(attention_scale="none"), None)
    assert isinstance(block.attention.sublayer.qkv, UnscaledQueries)
    assert math.isclose(float(block.attention.sublayer.qkv.gain[0]), 4.0)


def test_new_fields_at_their_defaults_keep_the_trial_id():
    assert TrialConfig(model=ModelConfig(init="gpt2", attention_scale="inv_sqrt_d", norm_eps=None),
                       train=TrainConfig(adam_eps=1e-8)).trial_id == TrialConfig().trial_id


def release_bucket_lengths(n: int, m: int, limit: int, start: int = 1) -> list[tuple[int, int]]:
    """mcleish7/arithmetic create_data_split.py, bucket_method_gen: the operand lengths
    (i, j) of its questions, every pair in turn until `limit` rows, transcribed; then
    bucket_method_main's random.shuffle of the whole set."""
    dataset = []
    while True:
        for i in range(start, n + 1):
            for j in range(start, m + 1):
                dataset.append((i, j))
                if len(dataset) == limit:
                    random.shuffle(dataset)
                    return dataset


def pair_spreads(batches: list[list[tuple[int, int]]], n: int) -> list[int]:
    """Per batch, the most minus the fewest questions of any of the n x n pairs."""
    return [max(c) - min(c) for c in
            ([sum(1 for row in b if row == (i, j)) for i in range(1, n + 1) for j in range(1, n + 1)] for b in batches)]


def test_shuffle_balance_gives_the_batches_of_the_release_shuffled_set():
    """The release's 512-row batches of 1-5 x 1-5 pairs vary by about 12-20 questions
    across the 25 pairs; `shuffle` gives the same spread, `batch` at most one."""
    from lengthgen.distributions import PAIR_BALANCES, LengthPairs
    from lengthgen.tasks import build_task

    random.seed(0)
    theirs = release_bucket_lengths(5, 5, 512 * 40)
    release = pair_spreads([theirs[k : k + 512] for k in range(0, len(theirs), 512)], 5)
    rng = np.random.default_rng(0)

    def ours(balance):
        pairs = [PAIR_BALANCES[balance](rng, 512, 25) for _ in range(40)]
        return pair_spreads([[(1 + p // 5, 1 + p % 5) for p in batch] for batch in pairs], 5)

    shuffled, balanced = ours("shuffle"), ours("batch")
    assert max(balanced) <= 1
    assert abs(np.mean(shuffled) - np.mean(release)) < 2.5 and min(shuffled) > 5 and min(release) > 5
    # the distribution draws its batches so
    groups = LengthPairs("shuffle").sample(build_task(TaskConfig()), np.random.default_rng(1), 512, (1, 5))
    assert sum(len(next(iter(g))) if isinstance(g, tuple) else len(g) for g in groups.values()) == 512


def test_balance_is_refused_without_length_pairs_and_keeps_the_trial_id():
    with pytest.raises(ValueError, match=r"data\.balance"):
        DataConfig(distribution="uniform_length", balance="shuffle")
    assert TrialConfig(data=DataConfig(balance="batch")).trial_id == TrialConfig().trial_id


def release_recurrent_forward(model, tokens, positions, noise, maximal_recurrence):
    """mcleish7/arithmetic cramming/architectures/crammed_depthrecurrent.py,
    ScriptableRecurrentLM.forward with initial_hidden_randomized and state_init embed
    (initialize_state: randn_like(hidden).mul(0.02), here `noise`) and
    TransformerBlock.forward's `states = states + injected_state` before the block's
    layers, every recurrence; transcribed around this model's own layers (NoPE, no mask)."""
    hidden_states = model.embedding_norm(model.embed(tokens, positions, model.pe, None))
    injected_state = hidden_states.clone()
    hidden_states = noise
    for _ in range(maximal_recurrence):
        states = hidden_states + injected_state
        for layer in model.blocks:
            states = layer(states, positions, positions, None)
        hidden_states = states
    return model.lm_head(model.final_norm(hidden_states))


def looped(**options) -> ModelConfig:
    return ModelConfig(size="tiny_1l", pe="nope", loops=3, input_injection="loop", norm_placement="post",
                       embedding_norm=True, **options)


def test_noise_start_is_the_release_initial_state():
    model = build_model(looped(state_init="noise"), 16, weight_seed=0).eval()
    tokens = torch.randint(3, 16, (2, 9), generator=torch.Generator().manual_seed(0))
    positions = torch.arange(9).expand(2, 9)
    noise = torch.randn(2, 9, model.token_embedding.embedding_dim, generator=torch.Generator().manual_seed(1)) * 0.02
    expected = release_recurrent_forward(model, tokens, positions, noise, 3)
    torch.testing.assert_close(model(tokens, positions, noise=noise), expected, rtol=1e-6, atol=1e-6)
    # drawn in the forward from the trial's stream: the same stream, the same noise
    with model.noise_from(torch.Generator().manual_seed(1)):
        torch.testing.assert_close(model(tokens, positions), expected, rtol=1e-6, atol=1e-6)
        assert not torch.equal(model(tokens, positions), expected)  # a second pass draws anew
    with pytest.raises(RuntimeError, match="model.state_init noise"):
        model(tokens, positions)  # never from torch's global generator


def test_noise_generation_reruns_the_row_with_fresh_noise():
    """The release's _generate has no KV cache: every new token re-runs the whole row
    with fresh noise. Greedy decoding does so whatever use_cache says."""
    model = build_model(looped(state_init="noise"), 16, weight_seed=0).eval()
    prompts = torch.randint(3, 16, (2, 5), generator=torch.Generator().manual_seed(0))
    positions = (torch.arange(9).expand(2, 9),)
    generator = torch.Generator().manual_seed(5)
    with model.noise_from(generator):
        decoded = model.greedy_decode(prompts, 4, positions, use_cache=True)
    generator = torch.Generator().manual_seed(5)
    tokens = prompts
    with torch.no_grad():
        for _ in range(4):
            width = tokens.shape[1]
            noise = torch.randn(2, width, model.token_embedding.embedding_dim, generator=generator) * 0.02
            logits = model(tokens, positions[0][:, :width], noise=noise, **model._rows(2, 5, 8, "cpu"))[:, -1]
            tokens = torch.cat([tokens, logits.argmax(-1, keepdim=True)], dim=1)
    assert torch.equal(decoded, tokens[:, 5:])


def noise_trial(state_init: str) -> TrialConfig:
    return TrialConfig(model=looped(state_init=state_init), task=TaskConfig(train_digits=(1, 3)),
                       train=TrainConfig(steps=6, batch_size=8, warmup=1, log_every=2),
                       eval=EvalConfig(digits=(2, 4), samples=10))


def test_noise_trains_and_evaluates_reproducibly():
    first, again, plain = (train(noise_trial(s)) for s in ("noise", "noise", "embed"))
    losses = [[log.loss for log in r.train] for r in (first, again, plain)]
    assert losses[0] == losses[1] and losses[0] != losses[2]
    assert [r.correct for _, r in first.eval] == [r.correct for _, r in again.eval]


def test_state_init_is_refused_where_it_means_nothing():
    with pytest.raises(ValueError, match=r"model\.state_init"):
        ModelConfig(arch="encoder", state_init="noise")
    assert TrialConfig(model=ModelConfig(state_init="embed")).trial_id == TrialConfig().trial_id


def release_row(num1: int, num2: int) -> str:
    """mcleish7/arithmetic create_data_split.py bucket_method_gen with reverse_all and
    p = 0: f"{num1_str}{operation}{num2_str}={result}", every number written with str
    and reversed; then pretraining_preparation.py's tokenize_batch appends the end token
    and nothing before the row (the arithmetic tokenizer maps characters one to one)."""
    num1_str, num2_str, result = str(num1)[::-1], str(num2)[::-1], str(num1 + num2)[::-1]
    return f"{num1_str}+{num2_str}={result}" + "</s>"


@pytest.mark.parametrize(("a", "b"), [(7, 5), (905, 38), (1, 99999), (12345, 67890)])
def test_rows_without_start_token_are_the_release_rows(a, b):
    from model_helpers import written

    from lengthgen.config import FormatConfig
    from lengthgen.tokenizer import CharTokenizer

    trial = TrialConfig(format=FormatConfig(reverse=True, reverse_operands=True, pad=False, start_token=False),
                        data=DataConfig(distribution="length_pairs"))
    n = max(len(str(a)), len(str(b)))  # a question's operands zero-extended to its length, written at their own
    tokens, prompt = written(trial, str(a).zfill(n), str(b).zfill(n))
    text = CharTokenizer().decode(tokens[0].tolist(), keep_specials=True).replace("<pad>", "")
    assert text == release_row(a, b)
    assert prompt == len(str(a)) + len(str(b)) + 2
    with_start, _ = written(replace(trial, format=replace(trial.format, start_token=True)), str(a).zfill(n),
                            str(b).zfill(n))
    assert CharTokenizer().decode(with_start[0].tolist(), keep_specials=True).startswith("<s>" + text[:3])


def test_rows_without_start_token_train_and_decode():
    """Training, coupled-free decoding and the longest row the config checks, without <s>."""
    from lengthgen.config import FormatConfig

    trial = TrialConfig(format=FormatConfig(reverse_operands=True, pad=False, start_token=False, random_spaces=True),
                        data=DataConfig(distribution="length_pairs"), model=ModelConfig(pe="nope", abacus=True,
                        abacus_max_offset=3, max_positions=32), task=TaskConfig(train_digits=(1, 3)),
                        train=TrainConfig(steps=4, batch_size=8, warmup=1, log_every=2),
                        eval=EvalConfig(digits=(2, 4), samples=10))
    from model_helpers import batch_of

    from lengthgen.tokenizer import SPACE, CharTokenizer

    tokens = batch_of(trial).tokens
    assert not (tokens == CharTokenizer().bos_id).any()
    assert not (tokens[:, 0] == CharTokenizer().id(SPACE)).any()  # spaces only between symbols
    assert (tokens == CharTokenizer().id(SPACE)).any()
    result = train(trial)
    assert result.status == "done" and [r.digits for _, r in result.eval] == [2, 4]


@pytest.mark.parametrize(("changes", "field"), [
    ({"model": ModelConfig(arch="encoder_decoder")}, "format.start_token"),
    ({"model": ModelConfig(attention_bias="windowed")}, "format.start_token"),
])
def test_start_token_is_refused_where_the_start_is_read(changes, field):
    from lengthgen.config import FormatConfig

    with pytest.raises(ValueError, match=field.replace(".", r"\.")):
        TrialConfig(format=FormatConfig(start_token=False, interleave=True), **changes)


def release_batch_sizes(batch_size: int, batch_size_ramp: float, microbatch_size: int, steps: int) -> list[int]:
    """mcleish7/arithmetic cramming/backend/torch_default.py: the micro-batch loop's
    counters (`accumulated_samples`, `optimizer_step`) and `schedule_batch_size` for
    0 < batch_size_ramp < 1, transcribed, with the elapsed share of the budget read as
    the share of optimiser steps done (fake_step = steps done, cfg_train.steps = steps).
    The rows of every optimiser step."""
    mbs = microbatch_size
    current_batch_size = mbs  # batch_size_ramp != 0: start at one micro-batch
    accumulated_samples, done, sizes = 0, 0, []
    while done < steps:
        accumulated_samples += mbs
        if accumulated_samples >= current_batch_size:
            sizes.append(current_batch_size)
            accumulated_samples = 0
            done += 1
            fake_step = done
            batch_size_step = batch_size / (steps * batch_size_ramp)
            current_batch_size = min(int(fake_step * batch_size_step // mbs + 1) * mbs, batch_size)
    return sizes


@pytest.mark.parametrize(("to", "over", "micro", "steps"), [(8192, 0.6, 512, 1000), (8192, 0.6, 256, 700),
                                                            (96, 0.25, 16, 50)])
def test_batch_ramp_is_the_release_schedule(to, over, micro, steps):
    from lengthgen.batch_ramp import BatchRamp, micro_batches, micro_range

    ramp = BatchRamp(to=to, over=over)
    ours = [micro_batches(ramp, micro, steps, s) * micro for s in range(steps)]
    assert ours == release_batch_sizes(to, over, micro, steps)
    assert ours[0] == micro and ours[-1] == to
    assert [micro_range(ramp, micro, steps, s).start for s in range(3)] == [0, 1, 2]
    assert micro_range(ramp, micro, steps, steps - 1).stop == sum(ours) // micro
    assert micro_range(None, micro, steps, 7) == range(7, 8)


def ramp_trial(**train) -> TrialConfig:
    from lengthgen.batch_ramp import BatchRamp

    return TrialConfig(task=TaskConfig(train_digits=(1, 3)), model=ModelConfig(size="tiny_1l"),
                       train=TrainConfig(steps=8, batch_size=4, warmup=1, log_every=8,
                                         batch_ramp=BatchRamp(to=12, over=0.5), **train),
                       eval=EvalConfig(digits=(2,), samples=10))


def test_a_ramped_step_is_the_mean_of_its_micro_batch_losses():
    """`backward(loss / accumulation_steps_expected)` per micro-batch: the gradient of
    the mean of the micro-batch means."""
    from model_helpers import CPU, tokenizer

    from lengthgen.batch_ramp import micro_range
    from lengthgen.batches import training_batch
    from lengthgen.config import derive
    from lengthgen.training_step import MicroBatches, TrainingStep

    trial = ramp_trial()
    numbers = micro_range(trial.train.batch_ramp, 4, 8, 3)
    assert len(numbers) == 3
    model = build_model(trial.model, len(tokenizer), 0)
    step = TrainingStep(trial, model, CPU)
    batches = [training_batch(trial, derive(trial).task, derive(trial).distribution, tokenizer, n) for n in numbers]
    micro = MicroBatches(list(numbers), [step.parts(n, b) for n, b in zip(numbers, batches, strict=True)])
    loss = step.gradients(3, micro)
    ours = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    by_hand = 0.0
    for (part,) in micro.parts:
        logits, targets = model.forward_batch(*part)
        micro_loss = torch.nn.functional.cross_entropy(logits, targets) / len(numbers)
        micro_loss.backward()
        by_hand += micro_loss.item()
    assert math.isclose(loss.item(), by_hand, rel_tol=1e-6)
    for a, p in zip(ours, model.parameters(), strict=True):
        torch.testing.assert_close(a, p.grad, rtol=1e-5, atol=1e-7)


def test_a_ramped_trial_sees_the_micro_batches_tokens_and_repeats():
    from model_helpers import batch_of, tokenizer

    first, again = train(ramp_trial()), train(ramp_trial())
    assert [t.loss for t in first.train] == [t.loss for t in again.train]
    plain = replace(ramp_trial(), train=replace(ramp_trial().train, batch_ramp=None))
    # 8 steps of 1, 1, 2, 3, 3, 3, 3, 3 micro-batches: batches 0 .. 18 of the plain trial's stream
    seen = sum(int((batch_of(plain, n).tokens != tokenizer.pad_id).sum()) for n in range(19))
    assert first.train[-1].tokens == seen


def test_batch_ramp_is_refused_where_it_means_nothing():
    from lengthgen.batch_ramp import BatchRamp

    with pytest.raises(ValueError, match=r"train\.batch_ramp\.to"):
        TrainConfig(batch_size=64, batch_ramp=BatchRamp(to=100, over=0.5))
    with pytest.raises(ValueError, match=r"train\.batch_ramp\.to"):
        TrainConfig(batch_size=64, batch_ramp=BatchRamp(to=64, over=0.5))
    with pytest.raises(ValueError, match=r"train\.batch_ramp\.over"):
        BatchRamp(to=128, over=1.0)
    assert TrialConfig(train=TrainConfig(batch_ramp=None)).trial_id == TrialConfig().trial_id


def paper_era_coupled_addition(a: int, b: int, reverse_input: bool, reverse_output: bool):
    """HanseulJo/position-coupling at e050132, src/data/addition.py: AdditionDataset
    with padding (every number 'P'-padded to overflow = max_len + 1, pad token '0') and
    AdditionDatasetWithCoupledPositions.__getitem__'s coupled branch with randomize
    False (start 1), transcribed: the question "a+b", its IDs (the last one "="'s), the
    answer and its IDs."""
    numbers, result = [a, b], a + b
    overflow = max(len(str(a)), len(str(b))) + 1
    inputs = [f"{'P' * (overflow - len(str(c)))}{c}" for c in numbers]
    labels = f"{'P' * (overflow - len(str(result)))}{result}"
    if reverse_input:
        inputs = [x[::-1] for x in inputs]
    if reverse_output:
        labels = labels[::-1]
    inputs = "+".join(inputs)
    a_str, b_str = inputs.split("+")
    max_len = max(len(a_str), len(b_str))
    start = 1
    end = start + max_len + 1
    input_positions = list(range(end - len(a_str), end + 1)) + list(range(end - len(b_str), end + 1))
    label_positions = list(range(end - len(labels), end))
    if reverse_input:
        input_positions[:-1] = input_positions[:-1][::-1]
    if reverse_output:
        label_positions = label_positions[::-1]
    return inputs.replace("P", "0"), input_positions, labels.replace("P", "0"), label_positions


@pytest.mark.parametrize(("reverse_operands", "reverse"), [(False, True), (False, False), (True, True)])
def test_paper_era_numbering_is_the_paper_era_code(reverse_operands, reverse):
    """Every row of 1- to 6-digit additions of independent operand lengths, at the
    lowest start: the paper-era code's text and IDs, "<s>" and "</s>" 0."""
    from model_helpers import tokenizer, written

    from lengthgen.config import FormatConfig
    from lengthgen.model.position.samplers import build_position_sampler

    trial = TrialConfig(task=TaskConfig(train_digits=(1, 6)),
                        format=FormatConfig(reverse=reverse, reverse_operands=reverse_operands, pad_overflow=True),
                        model=ModelConfig(pe="learned", positions="coupled", max_positions=16,
                                          coupled_equals="paper_era"), eval=EvalConfig(digits=(6,)))
    model = build_model(trial.model, len(tokenizer), 0, trial.input_layout)
    rng = np.random.default_rng(0)
    for _ in range(60):
        a, b = (int(rng.integers(0, 10 ** int(rng.integers(1, 7)))) for _ in range(2))
        n = max(len(str(a)), len(str(b)))
        tokens, prompt = written(trial, str(a).zfill(n), str(b).zfill(n))
        (ids,) = model.sample_positions(torch.as_tensor(tokens), torch.tensor([prompt]),
                                        build_position_sampler(trial.model), None, training=False)
        question, question_ids, answer, answer_ids = paper_era_coupled_addition(a, b, reverse_operands, reverse)
        text = tokenizer.decode(tokens[0].tolist(), keep_specials=True).replace("<pad>", "")
        assert text == f"<s>{question}={answer}</s>"
        assert ids[0].tolist()[: len(question) + len(answer) + 2] == [0, *question_ids, *answer_ids], text
        assert ids[0, len(question) + len(answer) + 2] == 0  # </s>


def test_paper_era_numbering_is_refused_without_its_padding_and_trains():
    from lengthgen.config import FormatConfig

    with pytest.raises(ValueError, match=r"format\.pad_overflow"):
        TrialConfig(model=ModelConfig(pe="learned", positions="coupled", coupled_equals="paper_era"))
    with pytest.raises(ValueError, match=r"format\.pad_overflow"):
        TrialConfig(format=FormatConfig(pad=False, pad_overflow=True))
    trial = TrialConfig(task=TaskConfig(train_digits=(1, 3)), format=FormatConfig(pad_overflow=True),
                        model=ModelConfig(size="tiny_1l", pe="learned", positions="coupled", max_positions=8,
                                          coupled_equals="paper_era"),
                        train=TrainConfig(steps=4, batch_size=8, warmup=1, log_every=2),
                        eval=EvalConfig(digits=(3,), samples=10))
    with pytest.raises(ValueError, match=r"model\.max_positions = 6"):
        replace(trial, model=replace(trial.model, max_positions=6))  # 3-digit rows: IDs 0 .. 6 (end = 1 + 4 + 1)
    replace(trial, model=replace(trial.model, max_positions=7))
    assert train(trial).status == "done"
    assert TrialConfig(format=FormatConfig(pad_overflow=False)).trial_id == TrialConfig().trial_id


#: every row of docs/methods.md's table of what remains beside the released code ("The
#: released code, read line by line"), by what opens the row (study, release file and
#: lines), and the words by which its study file's description names that departure
LISTED_DEPARTURES: dict[str, tuple[str, tuple[str, ...]]] = {
    "coupling, `custom_t5_decoder_only.py` lines 82–83": ("sota_coupling", ("rms + eps",)),
    "coupling, lines 1489–1492": ("sota_coupling", ("output head is untied",)),
    "coupling, `configs/training/default.yaml` line 15": ("sota_coupling", ("betas",)),
    "coupling, `scripts/addition/run_coupling.sh` line 61": (
        "sota_coupling", ("questions are drawn fresh each step", "two operands of one length")),
    "coupling, `scripts/addition/run_coupling.sh` lines 6, 55 and 58": ("sota_coupling", ("maxpos is 150",)),
    "coupling, `src/training/optimization.py` lines 14–15": ("sota_coupling", ("lr/500 at step 0",)),
    "coupling, `scripts/addition/eval_coupling.sh` lines 16 and 36": (
        "sota_coupling", ("1,000 test questions a length",)),
    "Abacus, `cramming.yaml` lines 17–20": ("sota_abacus", ("24-hour GPU budget", "warm-up, constant")),
    "Abacus, `torch_default.py` lines 214–232": ("sota_abacus", ("batch ramp read against the steps",)),
    "Abacus, `shells/addition_ff.sh` lines 3 and 9": ("sota_abacus", ("256 for the plain stack",)),
    "Abacus, `cramming/config/impl/torch-default.yaml` lines 19–21": ("sota_abacus", ("bf16 where they train in fp16",)),
    "Abacus, a set of 20 million questions": ("sota_abacus", ("a set of 20 million",)),
    "Abacus, `crammed-depthrecurrent.yaml` line 29": ("sota_abacus", ("no prediction head",)),
}


def remaining_release_departures() -> list[str]:
    """The first cells of the rows of docs/methods.md's table of what remains beside the
    released code."""
    text = (Path(__file__).parents[1] / "docs" / "methods.md").read_text()
    section = text.split("### The released code, read line by line", 1)[1].split("\n#", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith(("| coupling,", "| Abacus,"))]
    return [row[2:].split(" | ", 1)[0] for row in rows]


def test_every_study_file_lists_every_departure_from_the_release():
    """A departure docs/methods.md lists beside the released code is named in its study's
    description too (the study file says what it does not reproduce), and the table has
    no row this test does not know: a new departure needs its words here and there."""
    rows = remaining_release_departures()
    assert len(rows) == len(LISTED_DEPARTURES)
    for row in rows:
        opening = next((key for key in LISTED_DEPARTURES if row.startswith(key)), None)
        assert opening is not None, f"docs/methods.md's row {row!r} names no study description's words"
        study, words = LISTED_DEPARTURES[opening]
        document = yaml.safe_load((Path(__file__).parents[1] / "studies" / f"{study}.yaml").read_text())
        description = " ".join(document["description"].split())
        for word in words:
            assert word in description, (study, row, word)
