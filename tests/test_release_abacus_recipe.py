"""The options that reproduce the Abacus authors' training recipe (McLeish et al. 2024:
mcleish7/arithmetic at 86022a5) where lg-study's defaults differ: data.balance shuffle
(their shuffled set of length pairs), model.state_init noise (a recurrent model's
noise-started state), rows without a start token, and train.batch_ramp (their batch
size schedule over micro-batches); each against a transcription of the released code,
each refused where it means nothing, and each at its default keeping the trial id.
The other options that reproduce released code: tests/test_release_departures.py."""

from __future__ import annotations

import math
import random
from dataclasses import replace

import numpy as np
import pytest
import torch

from lengthgen import TrialConfig, train
from lengthgen.config import DataConfig, EvalConfig, ModelConfig, TaskConfig, TrainConfig
from lengthgen.model import build_model


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
