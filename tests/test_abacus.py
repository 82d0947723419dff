"""Abacus embeddings (model.abacus, McLeish et al. 2024): the indices of real token rows
against hand-computed ones, the embedding they select, the offset k (data seed at
training, 0 at test), the weights (weight seed, nothing else moved), the decoding
equivalences with every positional encoding, length bucketing, and the refusals."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch
from model_helpers import (
    SEQUENTIAL_PES,
    assert_same_gradients,
    batch_of,
    eval_questions,
    right_answers,
    tokenizer,
    trained_model,
    training_positions,
    written,
)

from lengthgen import TrialConfig, train
from lengthgen.config import (
    DataConfig,
    EvalConfig,
    FormatConfig,
    ModelConfig,
    SeedConfig,
    TaskConfig,
    TrainConfig,
)
from lengthgen.evaluation import greedy_decode, teacher_forced_argmax
from lengthgen.model import build_model
from lengthgen.model.position.abacus import Abacus
from lengthgen.model.position.places import is_digit
from lengthgen.model.position.samplers import build_position_sampler


def config(task: TaskConfig | None = None, fmt: FormatConfig | None = None, arch: str = "decoder",
           **model) -> TrialConfig:
    """NoPE underneath, as the paper pairs Abacus with it."""
    model = {"abacus": True, "pe": "nope", "max_positions": 64, **model}
    return TrialConfig(task=task or TaskConfig(train_digits=(1, 3)), format=fmt or FormatConfig(),
                       model=ModelConfig(arch=arch, **model), eval=EvalConfig(digits=(3,)))


def applied(trial: TrialConfig, tokens: np.ndarray, prompt: int, training: bool = False, generator=None) -> list:
    """Per sequence the model reads: the Abacus index each token's embedding is read at
    (0: no embedding)."""
    model = build_model(trial.model, len(tokenizer), 0, trial.input_layout)
    rows = torch.as_tensor(tokens)
    positions = model.sample_positions(rows, torch.full((len(rows),), prompt), build_position_sampler(trial.model),
                                       generator, training=training)
    sequences = positions[len(positions) // 2 :]
    inputs = model_inputs(trial, rows, prompt)
    return [torch.where(is_digit(i) & (s > 0), s, 0).tolist() for i, s in zip(inputs, sequences, strict=True)]


def model_inputs(trial: TrialConfig, rows: torch.Tensor, prompt: int) -> list[torch.Tensor]:
    """The token sequences the architecture reads: the row, or the question and "<s> answer"."""
    if trial.model.arch == "encoder_decoder":
        return [rows[:, 1 : prompt - 1], torch.cat([rows[:, :1], rows[:, prompt:-1]], dim=1)]
    return [rows]


# every digit: its place in its own number, 1 = least significant, however written;
# every other token (<s>, "+", "=", hints, "</s>", fill ".") nothing
HAND_ROWS = [
    ("default", TaskConfig(train_digits=(1, 3)), FormatConfig(), ("085", "050"),
     "<s>085+050=5310</s>", [0, 3, 2, 1, 0, 3, 2, 1, 0, 1, 2, 3, 4, 0]),
    ("answer msd first", TaskConfig(train_digits=(1, 3)), FormatConfig(reverse=False), ("085", "050"),
     "<s>085+050=0135</s>", [0, 3, 2, 1, 0, 3, 2, 1, 0, 4, 3, 2, 1, 0]),
    ("all lsd first, as in the paper", TaskConfig(train_digits=(1, 3)), FormatConfig(reverse_operands=True),
     ("085", "050"), "<s>580+050=5310</s>", [0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 4, 0]),
    ("unpadded", TaskConfig(train_digits=(1, 3)), FormatConfig(pad=False), ("85", "50"),
     "<s>85+50=531</s>", [0, 2, 1, 0, 2, 1, 0, 1, 2, 3, 0]),
    ("n_by_1", TaskConfig(name="n_by_1", train_digits=(1, 4)), FormatConfig(), ("0123", "6"),
     "<s>0123*6=83700</s>", [0, 4, 3, 2, 1, 0, 1, 0, 1, 2, 3, 4, 5, 0]),
    ("2-digit multiplier", TaskConfig(name="multiplication", train_digits=(1, 4), multiplier_digits=2),
     FormatConfig(), ("56", "4297"), "<s>56*4297=236042</s>", [0, 2, 1, 0, 4, 3, 2, 1, 0, 1, 2, 3, 4, 5, 6, 0]),
]


@pytest.mark.parametrize("name, task, fmt, operands, text, indices", HAND_ROWS, ids=[r[0] for r in HAND_ROWS])
def test_indices_of_real_rows_are_the_hand_computed_ones(name, task, fmt, operands, text, indices):
    trial = config(task, fmt)
    tokens, prompt = written(trial, *operands)
    assert tokenizer.decode(tokens[0].tolist(), keep_specials=True) == text
    assert applied(trial, tokens, prompt) == [[indices]]


def test_hints_get_no_embedding_and_their_digits_their_place():
    trial = config(fmt=FormatConfig(index_hints=True))
    tokens, prompt = written(trial, "085", "050")
    #                          <s> h 0 h 8 h 5 + h 0 h 5 h 0 = h 5 h 3 h 1 h 0 </s>
    assert applied(trial, tokens, prompt) == [[[0, 0, 3, 0, 2, 0, 1, 0, 0, 3, 0, 2, 0, 1, 0,
                                                0, 1, 0, 2, 0, 3, 0, 4, 0]]]


def test_aligned_rows_of_the_encoder():
    trial = config(TaskConfig(train_digits=(1, 5)), FormatConfig(fixed_length=True, reverse=False, pad=False),
                   arch="encoder")
    tokens, prompt = written(trial, "0123", "4095")  # 003's 123 + 4095
    assert tokenizer.decode(tokens[0].tolist()) == "..123+.4095"
    assert applied(trial, tokens, prompt) == [[[0, 0, 3, 2, 1, 0, 0, 4, 3, 2, 1]]]


def test_encoder_decoder_question_and_answer():
    trial = config(arch="encoder_decoder")
    tokens, prompt = written(trial, "085", "050")
    assert applied(trial, tokens, prompt) == [[[3, 2, 1, 0, 3, 2, 1]], [[0, 1, 2, 3, 4]]]  # "085+050", "<s>5310"


def test_the_embedding_is_the_table_row_of_the_index_on_digits_and_zero_elsewhere():
    abacus = Abacus(d_model=8, max_places=10, max_offset=5)
    tokens = torch.tensor([tokenizer.encode("12+3=", bos=True)])
    indices = torch.tensor([[0, 7, 6, 0, 6, 9]])  # "=" given an index: it is no digit
    out = abacus(tokens, indices)
    table = abacus.table.weight
    assert torch.equal(out[0, 1], table[6]) and torch.equal(out[0, 2], table[5]) and torch.equal(out[0, 4], table[5])
    assert not out[0, [0, 3, 5]].any()
    with pytest.raises(ValueError, match="past the table's 15 rows"):
        abacus(tokens, torch.full_like(indices, 16))


def test_one_offset_per_question_from_zero_to_max_offset_at_training_only():
    trial = replace(config(TaskConfig(train_digits=(1, 6)), abacus_max_offset=20), train=TrainConfig(batch_size=256))
    batch = batch_of(trial)
    model = build_model(trial.model, len(tokenizer), 0, trial.input_layout)
    rows, lengths = torch.from_numpy(batch.tokens), torch.from_numpy(batch.prompt_lengths)
    sampler = build_position_sampler(trial.model)
    at_test = model.sample_positions(rows, lengths, sampler, None, training=False)[1][:, :-1]
    trained = model.sample_positions(rows, lengths, sampler, torch.Generator().manual_seed(0), training=True)[1]
    shifts = trained - at_test
    offsets = shifts.max(1).values
    assert torch.equal(shifts, torch.where(at_test > 0, offsets[:, None], 0))  # one k per row
    assert set(offsets.tolist()) == set(range(21))  # uniform on 0 .. abacus_max_offset


def test_encoder_decoder_sides_share_the_offset_of_their_question():
    trial = config(arch="encoder_decoder")
    tokens, prompt = written(trial, "085", "050")
    rows = np.repeat(tokens, 8, axis=0)
    question, answer = applied(trial, rows, prompt, training=True, generator=torch.Generator().manual_seed(3))
    for q, a in zip(question, answer, strict=True):
        k = q[0] - 3
        assert q == [3 + k, 2 + k, 1 + k, 0, 3 + k, 2 + k, 1 + k] and a == [0, 1 + k, 2 + k, 3 + k, 4 + k]
    assert len({q[0] for q in question}) > 1


def test_seeds_are_independent():
    """Offsets come from the data seed's Generator of the step, never the weight seed;
    the table from the weight seed, drawn after every other weight, which are the
    weights the model has without Abacus."""
    trial = replace(config(TaskConfig(train_digits=(1, 6))), train=TrainConfig(batch_size=32))

    def offsets(seeds: SeedConfig) -> torch.Tensor:
        return training_positions(replace(trial, seeds=seeds), 1)[1]

    reference = offsets(SeedConfig(weight=0, data=5))
    assert torch.equal(reference, offsets(SeedConfig(weight=7, data=5, eval=2)))
    assert not torch.equal(reference, offsets(SeedConfig(data=6)))
    with_abacus = build_model(trial.model, len(tokenizer), 3).state_dict()
    without = build_model(replace(trial.model, abacus=False), len(tokenizer), 3).state_dict()
    assert set(with_abacus) - set(without) == {"abacus.table.weight"}
    assert all(torch.equal(with_abacus[k], without[k]) for k in without)
    other_seed = build_model(trial.model, len(tokenizer), 4).state_dict()
    assert not torch.equal(with_abacus["abacus.table.weight"], other_seed["abacus.table.weight"])


@pytest.mark.parametrize("pe", SEQUENTIAL_PES)
@pytest.mark.parametrize("arch", ["decoder", "encoder_decoder"])
def test_cached_greedy_equals_uncached_greedy_with_every_encoding(arch, pe):
    cfg = ModelConfig(arch=arch, pe=pe, abacus=True, max_positions=64)
    model = build_model(cfg, len(tokenizer), weight_seed=3).eval()
    # digits and operators only, so most tokens get an Abacus vector; random weights
    # give arbitrary but deterministic answers: a strict comparison. Offsets drawn as at
    # training, where a decoder reads all but the last token: one more column for it
    rows = torch.randint(3, 16, (6, 16 + (arch == "decoder")), generator=torch.Generator().manual_seed(0))
    rows[:, 0], rows[:, 6] = tokenizer.bos_id, tokenizer.id("=")
    positions = model.sample_positions(rows, torch.full((6,), 7), build_position_sampler(cfg),
                                       torch.Generator().manual_seed(1), training=True)
    assert int(positions[-1].max()) > 9  # an offset was drawn
    cached = greedy_decode(model, rows[:, :7], 9, positions, use_cache=True)
    uncached = greedy_decode(model, rows[:, :7], 9, positions, use_cache=False)
    assert torch.equal(cached, uncached)
    forced = teacher_forced_argmax(model, torch.cat([rows[:, :7], cached], dim=1), positions, 7)
    assert torch.equal(forced, cached)  # its own answer, read back, gives itself


@pytest.mark.parametrize("arch", ["decoder", "encoder_decoder"])
def test_teacher_forced_exact_match_equals_greedy_exact_match(arch):
    """Unpadded successor, every carry cascade equally likely: answers of one question
    length differ in length, and the answer's places must not depend on it."""
    torch.set_num_threads(1)
    trial = replace(
        config(TaskConfig(name="successor", train_digits=(1, 3)), FormatConfig(pad=False), arch, abacus_max_offset=10),
        train=TrainConfig(steps=200, batch_size=32, lr=3e-3, warmup=10, log_every=200),
        eval=EvalConfig(digits=(2, 3, 4), samples=48, questions="cascade_uniform"),
    )
    model = trained_model(trial)
    outcomes = []
    for questions, tokens, prompt, positions in eval_questions(trial, model):
        assert len(np.unique(questions.row_answer_lengths())) == 2
        forced_right, greedy_right = right_answers(model, tokens, prompt, positions)
        assert torch.equal(forced_right, greedy_right)
        outcomes += forced_right.tolist()
    assert 0 < sum(outcomes) < len(outcomes), f"{sum(outcomes)} of {len(outcomes)} right"


@pytest.mark.parametrize("positions", ["plain", "coupled"])
@pytest.mark.parametrize("arch", ["decoder", "encoder_decoder"])
def test_length_buckets_keep_the_padded_gradient(arch, positions):
    trial = replace(config(TaskConfig(train_digits=(1, 12)), FormatConfig(index_hints=True), arch,
                           pe="learned", positions=positions, max_positions=96), train=TrainConfig(batch_size=16))
    parts, padded = assert_same_gradients(trial)
    assert len(parts) == 3
    assert padded["abacus.table.weight"].abs().sum() > 0


@pytest.mark.parametrize("arch, fmt", [("decoder", FormatConfig()),
                                       ("encoder", FormatConfig(fixed_length=True, reverse=False))])
def test_the_same_config_twice_gives_the_same_numbers(arch, fmt):
    trial = replace(config(TaskConfig(name="successor", train_digits=(1, 2)), fmt, arch),
                    train=TrainConfig(steps=4, batch_size=8, warmup=1, log_every=1),
                    eval=EvalConfig(digits=(2, 4), samples=6))
    first, second = train(trial), train(trial)
    assert [t.loss for t in first.train] == [t.loss for t in second.train]
    assert [(s, r.correct) for s, r in first.eval] == [(s, r.correct) for s, r in second.eval]
    assert [s.prediction for s in first.samples] == [s.prediction for s in second.samples]


def test_refusals_and_options():
    with pytest.raises(ValueError, match="model.abacus indexes each digit.*format.interleave"):
        config(fmt=FormatConfig(interleave=True))
    with pytest.raises(ValueError, match="model.abacus needs the place.*format.pad"):
        config(fmt=FormatConfig(reverse=False, pad=False))
    config(TaskConfig(name="successor", train_digits=(1, 3)), FormatConfig(interleave=True))  # a no-op there
    with pytest.raises(ValueError, match="model.abacus_max_offset does not apply without model.abacus: true"):
        ModelConfig(abacus_max_offset=10)
    with pytest.raises(ValueError, match="model.abacus_max_offset must be >= 0"):
        ModelConfig(abacus=True, abacus_max_offset=-1)
    assert TrialConfig(model=ModelConfig(abacus=False, abacus_max_offset=100)).trial_id == "44136fa355b3"
    assert config().trial_id != replace(config(), model=replace(config().model, abacus_max_offset=99)).trial_id


def release_abacus(table: torch.Tensor, input_ids: torch.Tensor, k: int) -> torch.Tensor:
    """mcleish7/arithmetic cramming/architectures/embeddings.py Abacus.forward (lines
    517-534) on lg-study's tokens, transcribed: the place of every digit in its run
    counted from the run's first digit (the release writes numbers least significant
    digit first), plus the one k of the forward pass on the digits, then
    `self.embedding(output)`: every non-digit reads row 0."""
    mask = is_digit(input_ids)
    output = torch.zeros_like(input_ids)
    for row in range(len(input_ids)):
        run = 0
        for column in range(input_ids.shape[1]):
            run = run + 1 if mask[row, column] else 0
            output[row, column] = run
    output[output > 0] += k
    return table[output]


def test_row_zero_gives_every_non_digit_the_release_row_zero():
    """Rows written least significant digit first, as the release's "reverse_all": with
    model.abacus_non_digits row_zero every token's vector is the release's, the
    non-digits' (end token, operators, "=", padding) row 0 of the table."""
    trial = replace(config(fmt=FormatConfig(reverse_operands=True, pad=False, start_token=False),
                           abacus_non_digits="row_zero", abacus_offset="batch"),
                    data=DataConfig(distribution="length_pairs"), train=TrainConfig(batch_size=16))
    model = build_model(trial.model, len(tokenizer), 0, trial.input_layout)
    assert model.abacus.table.num_embeddings == 1 + 64 + 100  # the non-digits' row, places, offsets
    batch = batch_of(trial)
    tokens, prompts = torch.from_numpy(batch.tokens), torch.from_numpy(batch.prompt_lengths)
    fed = tokens[:, :-1]
    assert (fed == tokenizer.pad_id).any()  # rows of several lengths: padding is a non-digit too
    for training, generator in ((False, None), (True, torch.Generator().manual_seed(1))):
        indices = model.sample_positions(tokens, prompts, build_position_sampler(trial.model),
                                         generator, training=training)[1][:, : fed.shape[1]]
        k = int(indices[0, 0]) - 1  # the first digit has place 1
        assert training or k == 0
        ours = model.abacus(fed, indices)
        torch.testing.assert_close(ours, release_abacus(model.abacus.table.weight, fed, k), rtol=0, atol=0)
    non_digits = ~is_digit(fed)
    assert non_digits.any() and (ours[non_digits] == model.abacus.table.weight[0]).all()
    # by default the same rows get zero there
    plain = build_model(replace(trial.model, abacus_non_digits="zero"), len(tokenizer), 0, trial.input_layout)
    assert not plain.abacus(fed, indices)[non_digits].any()


def test_one_offset_per_batch_under_abacus_offset_batch():
    """model.abacus_offset batch: one k for every row of a batch (the release's one
    `random.randint` per forward pass), uniform on 0 .. K over batches; 0 at test."""
    trial = replace(config(TaskConfig(train_digits=(1, 6)), abacus_max_offset=20, abacus_offset="batch"),
                    train=TrainConfig(batch_size=64))
    batch = batch_of(trial)
    model = build_model(trial.model, len(tokenizer), 0, trial.input_layout)
    rows, lengths = torch.from_numpy(batch.tokens), torch.from_numpy(batch.prompt_lengths)
    sampler = build_position_sampler(trial.model)
    at_test = model.sample_positions(rows, lengths, sampler, None, training=False)[1][:, :-1]
    seen = set()
    for seed in range(200):
        trained = model.sample_positions(rows, lengths, sampler, torch.Generator().manual_seed(seed), training=True)[1]
        shifts = trained - at_test
        (k,) = set(shifts[at_test > 0].tolist())  # one k for the whole batch
        assert torch.equal(shifts, torch.where(at_test > 0, k, 0))
        seen.add(k)
    assert seen == set(range(21))
    assert torch.equal(at_test, build_model(replace(trial.model, abacus_offset="question"), len(tokenizer), 0,
                                            trial.input_layout).sample_positions(rows, lengths, sampler, None,
                                                                                 training=False)[1][:, :-1])


def test_release_options_train_and_keep_the_trial_id_at_their_defaults():
    trial = replace(config(TaskConfig(name="addition", train_digits=(1, 2)), abacus_offset="batch",
                           abacus_non_digits="row_zero"),
                    train=TrainConfig(steps=3, batch_size=8, warmup=1, log_every=1),
                    eval=EvalConfig(digits=(2, 4), samples=6))
    first, second = train(trial), train(trial)
    assert [t.loss for t in first.train] == [t.loss for t in second.train]
    assert config().trial_id == config(abacus_offset="question", abacus_non_digits="zero").trial_id
    assert len({config(abacus_offset=o, abacus_non_digits=n).trial_id
                for o in ("question", "batch") for n in ("zero", "row_zero")}) == 4
    for option in ({"abacus_offset": "batch"}, {"abacus_non_digits": "row_zero"}):
        with pytest.raises(ValueError, match=f"model.{next(iter(option))} does not apply without model.abacus"):
            ModelConfig(**option)
