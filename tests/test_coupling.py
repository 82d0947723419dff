"""Position coupling (model.positions: coupled, Cho et al. 2024): the IDs of real token
rows against hand-computed ones for every format and task it serves under both
conventions of model.coupled_answer, own_place against the rule of the authors'
released code for addition, the start offset (data seed at training, the lowest start
at test), the decoding equivalences, length bucketing, and the combinations it
refuses."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from model_helpers import (
    CPU,
    assert_same_gradients,
    batch_of,
    eval_questions,
    number,
    right_answers,
    tokenizer,
    trained_model,
    training_positions,
    written,
)
from typer.testing import CliRunner

from lengthgen import TrialConfig, train
from lengthgen.config import (
    EvalConfig,
    FormatConfig,
    ModelConfig,
    SeedConfig,
    TaskConfig,
    TrainConfig,
)
from lengthgen.digits import DIGIT_DTYPE
from lengthgen.evaluation import greedy_decode
from lengthgen.formats import encode_questions
from lengthgen.model import build_model
from lengthgen.model.position.samplers import (
    COUPLED_ANSWERS,
    POSITION_SAMPLERS,
    build_position_sampler,
)
from lengthgen.tasks import build_task
from lengthgen.tokenizer import HINTS
from orchestrator.cli import app
from orchestrator.studies.config_paths import TRIAL_CONFIG
from orchestrator.studies.study import load_study


def config(task: TaskConfig | None = None, fmt: FormatConfig | None = None, arch: str = "decoder",
           **model) -> TrialConfig:
    """Learned absolute positions read the coupled IDs, as in Cho et al."""
    model = {"positions": "coupled", "pe": "learned", "max_positions": 64, **model}
    return TrialConfig(task=task or TaskConfig(train_digits=(1, 3)), format=fmt or FormatConfig(),
                       model=ModelConfig(arch=arch, **model), eval=EvalConfig(digits=(3,)))


def coupled_ids(trial: TrialConfig, tokens: np.ndarray, prompt: int | np.ndarray, training: bool = False) -> list:
    """The coupled IDs of every sequence the model reads, at the lowest start (test time);
    `prompt` the prompt length of every row or of each."""
    model = build_model(trial.model, len(tokenizer), 0, trial.input_layout)
    rows = torch.as_tensor(tokens)
    prompts = torch.as_tensor(np.broadcast_to(prompt, (len(rows),)).copy())
    positions = model.sample_positions(rows, prompts, build_position_sampler(trial.model), None, training=training)
    return [p.tolist() for p in positions]


# "<s>085+050=5310</s>" at the lowest start (test time).
# own_place (s = 1): a digit of place p carries 1 + p, answer digits included; "+", "="
# (and "*") carry 1 + 0; <s>, </s> carry 0; the last digit keeps its own place's ID.
# predicted_place (s = 0): question digits carry p; "=" carries the units' ID (it
# predicts the units digit), each answer digit the ID of the digit it predicts, the
# last one the place after it (it predicts the end); <s>, operators, </s> carry 0.
HAND_ROWS = [
    ("default", TaskConfig(train_digits=(1, 3)), FormatConfig(), ("085", "050"), "<s>085+050=5310</s>",
     [0, 4, 3, 2, 1, 4, 3, 2, 1, 2, 3, 4, 5, 0],
     [0, 3, 2, 1, 0, 3, 2, 1, 1, 2, 3, 4, 5, 0]),
    ("answer msd first", TaskConfig(train_digits=(1, 3)), FormatConfig(reverse=False), ("085", "050"),
     "<s>085+050=0135</s>",
     [0, 4, 3, 2, 1, 4, 3, 2, 1, 5, 4, 3, 2, 0],
     [0, 3, 2, 1, 0, 3, 2, 1, 4, 3, 2, 1, 0, 0]),
    ("operands lsd first", TaskConfig(train_digits=(1, 3)), FormatConfig(reverse_operands=True), ("085", "050"),
     "<s>580+050=5310</s>",
     [0, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4, 5, 0],
     [0, 1, 2, 3, 0, 1, 2, 3, 1, 2, 3, 4, 5, 0]),
    ("successor", TaskConfig(name="successor", train_digits=(1, 3)), FormatConfig(), ("199",), "<s>199=0020</s>",
     [0, 4, 3, 2, 1, 2, 3, 4, 5, 0],
     [0, 3, 2, 1, 1, 2, 3, 4, 5, 0]),
    ("n_by_1", TaskConfig(name="n_by_1", train_digits=(1, 4)), FormatConfig(), ("0123", "6"), "<s>0123*6=83700</s>",
     [0, 5, 4, 3, 2, 1, 2, 1, 2, 3, 4, 5, 6, 0],
     [0, 4, 3, 2, 1, 0, 1, 1, 2, 3, 4, 5, 6, 0]),
    ("1-digit multiplier first", TaskConfig(name="multiplication", train_digits=(1, 4)), FormatConfig(),
     ("6", "0123"), "<s>6*0123=83700</s>",
     [0, 2, 1, 5, 4, 3, 2, 1, 2, 3, 4, 5, 6, 0],
     [0, 1, 0, 4, 3, 2, 1, 1, 2, 3, 4, 5, 6, 0]),
    ("parity scratchpad", TaskConfig(name="parity", train_digits=(1, 4)), FormatConfig(), ("0110",),
     "<s>0110=0100</s>",
     [0, 5, 4, 3, 2, 1, 2, 3, 4, 5, 0],
     [0, 4, 3, 2, 1, 1, 2, 3, 4, 5, 0]),
]
ANSWERS = ["own_place", "predicted_place"]


def test_every_convention_is_tested():
    assert sorted(ANSWERS) == sorted(COUPLED_ANSWERS)
    assert ModelConfig().coupled_answer == "own_place"  # the authors' released code


@pytest.mark.parametrize("answer", ANSWERS)
@pytest.mark.parametrize("name, task, fmt, operands, text, own, predicted", HAND_ROWS, ids=[r[0] for r in HAND_ROWS])
def test_decoder_ids_of_real_rows_are_the_hand_computed_ones(name, task, fmt, operands, text, own, predicted, answer):
    trial = config(task, fmt, coupled_answer=answer)
    tokens, prompt = written(trial, *operands)
    assert tokenizer.decode(tokens[0].tolist(), keep_specials=True) == text
    assert coupled_ids(trial, tokens, prompt) == [[{"own_place": own, "predicted_place": predicted}[answer]]]


@pytest.mark.parametrize("answer, ids", [
    ("own_place", [0, 4, 4, 3, 3, 2, 2, 1, 4, 4, 3, 3, 2, 2, 1, 2, 2, 3, 3, 4, 4, 5, 5, 0]),
    ("predicted_place", [0, 3, 3, 2, 2, 1, 1, 0, 3, 3, 2, 2, 1, 1, 1, 1, 2, 2, 3, 3, 4, 4, 5, 0]),
])
def test_index_hints_carry_the_place_of_their_digit(answer, ids):
    trial = config(fmt=FormatConfig(index_hints=True), coupled_answer=answer)
    tokens, prompt = written(trial, "085", "050")
    text = tokenizer.decode(tokens[0].tolist(), keep_specials=True)
    h = HINTS[HINTS.index(text[3]) - 2 :]  # h[k]: the hint of place k + 1 ("<s>" then the hundreds' hint)
    assert text == f"<s>{h[2]}0{h[1]}8{h[0]}5+{h[2]}0{h[1]}5{h[0]}0={h[0]}5{h[1]}3{h[2]}1{h[3]}0</s>"
    assert coupled_ids(trial, tokens, prompt) == [[ids]]


@pytest.mark.parametrize("answer, ids", [
    #             <s> 0  8  _  5  _  +  _  0  _  5  0  =  5  3  1  0 </s>
    ("own_place", [0, 4, 3, 0, 2, 0, 1, 0, 4, 0, 3, 2, 1, 2, 3, 4, 5, 0]),
    ("predicted_place", [0, 3, 2, 0, 1, 0, 0, 0, 3, 0, 2, 1, 1, 2, 3, 4, 5, 0]),
])
def test_spaces_carry_no_place_and_do_not_split_a_number(answer, ids):
    trial = config(fmt=FormatConfig(random_spaces=True), coupled_answer=answer)
    tokens = np.array([tokenizer.encode("08 5 + 0 50=5310", bos=True, eos=True)])
    assert coupled_ids(trial, tokens, 13) == [[ids]]
    spaced = encode_questions(build_task(trial.task), (number("085"), number("050")), trial.format, tokenizer,
                              np.random.default_rng(3), training=True, width=3)
    assert " " in tokenizer.decode(spaced.tokens[0].tolist())  # the format writes such rows


@pytest.mark.parametrize("answer, ids", [
    ("own_place", [[0, 4, 3, 2, 1, 4, 3, 2, 1, 2, 3, 4, 0, 0],
                   [0, 4, 3, 2, 1, 4, 3, 2, 1, 2, 3, 4, 5, 0]]),
    ("predicted_place", [[0, 3, 2, 1, 0, 3, 2, 1, 1, 2, 3, 4, 0, 0],
                         [0, 3, 2, 1, 0, 3, 2, 1, 1, 2, 3, 4, 5, 0]]),
])
def test_unpadded_answers_of_different_lengths_get_the_same_ids_where_compared(answer, ids):
    """Without padding a 3-digit sum has 3 or 4 digits: the IDs of the answer columns
    come from the column alone, so the row whose answer ends early is told nothing
    (its end token and the column after it, never compared, carry 0)."""
    trial = config(fmt=FormatConfig(pad=False), coupled_answer=answer)
    task = build_task(trial.task)
    operands = (np.concatenate([number("123"), number("999")]), np.concatenate([number("456"), number("111")]))
    questions = encode_questions(task, operands, trial.format, tokenizer, width=3)
    assert [tokenizer.decode(r.tolist(), keep_specials=True) for r in questions.tokens] == [
        "<s>123+456=975</s><pad>", "<s>999+111=0111</s>"]
    assert coupled_ids(trial, questions.tokens, questions.prompt_length) == [ids]


@pytest.mark.parametrize("answer, question_ids, answer_ids", [
    ("own_place", [4, 3, 2, 1, 4, 3, 2], [1, 2, 3, 4, 5]),  # "<s>" takes "="'s place 0, then each digit its own
    ("predicted_place", [3, 2, 1, 0, 3, 2, 1], [1, 2, 3, 4, 5]),  # each input the place of the token it predicts
])
def test_encoder_decoder_question_and_answer_ids(answer, question_ids, answer_ids):
    trial = config(arch="encoder_decoder", coupled_answer=answer)
    tokens, prompt = written(trial, "085", "050")
    question, decoder_input = coupled_ids(trial, tokens, prompt)
    assert question == [question_ids]  # "085+050"
    assert decoder_input == [answer_ids]  # "<s>5310" predicting "5310</s>"


def released_addition_ids(text: str, answer_msd_first: bool = False) -> list[int]:
    """The IDs the authors' released code for addition gives "<s>a+b=c</s>" at its
    evaluation start 1 (src/data/addition.py, AdditionDatasetWithCoupledPositions.
    __getitem__, operands written most significant digit first), transcribed: the least
    significant digit gets start + 1, "+" the start, the answer's digits their own
    places, and "=" the start before an answer written least significant digit first,
    start + len(answer) + 1 before one written most significant digit first; <s> and
    </s> 0."""
    question, answer = text.removeprefix("<s>").removesuffix("</s>").split("=")
    a, b = question.split("+")
    start = 1
    a_positions = list(range(start + 1, start + 1 + len(a)))[::-1]
    b_positions = list(range(start + 1, start + 1 + len(b)))[::-1]
    answer_positions = list(range(start + 1, start + 1 + len(answer)))
    if answer_msd_first:
        answer_positions, equals_position = answer_positions[::-1], start + len(answer) + 1
    else:
        equals_position = start
    return [0, *a_positions, start, *b_positions, equals_position, *answer_positions, 0]


def operands_of_lengths(rng: np.random.Generator, lengths: np.ndarray, width: int) -> np.ndarray:
    """(Q, width) digits, least significant first: row q a number of exactly lengths[q] digits."""
    digits = rng.integers(0, 10, (len(lengths), width))
    digits[np.arange(len(lengths)), lengths - 1] = rng.integers(1, 10, len(lengths))  # the leading digit
    return np.where(np.arange(width) < lengths[:, None], digits, 0).astype(DIGIT_DTYPE)


RELEASED = [({}, {}), ({"pad": False}, {}), ({"reverse": False}, {"coupled_equals": "past_answer"})]


@pytest.mark.parametrize("fmt, model", RELEASED, ids=["padded", "unpadded", "answer msd first, past_answer"])
def test_own_place_is_the_released_code_for_addition(fmt, model):
    """Every row of 1- to 7-digit additions, the two operands of independent lengths,
    gets at the lowest start the IDs of the released code (padded: every operand
    written with W = 7 digits); answers written most significant digit first with
    model.coupled_equals past_answer."""
    trial = config(TaskConfig(train_digits=(1, 7)), FormatConfig(**fmt), **model)
    fmt = trial.format
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 8, (2, 200))
    operands = tuple(operands_of_lengths(rng, n, 7) for n in lengths)
    questions = encode_questions(build_task(trial.task), operands, trial.format, tokenizer, width=7)
    (ids,) = coupled_ids(trial, questions.tokens, questions.row_prompt_lengths())
    written_lengths = set()
    for row, row_ids in zip(questions.tokens.tolist(), ids, strict=True):
        text = tokenizer.decode(row, keep_specials=True).replace("<pad>", "")
        expected = released_addition_ids(text, answer_msd_first=not fmt.reverse)
        assert row_ids[: len(expected)] == expected, text
        assert not any(row_ids[len(expected) :])  # padding: 0
        written_lengths.add(tuple(len(n) for n in text[3:].split("=")[0].split("+")))
    assert len(written_lengths) == (1 if fmt.pad else 49)  # unpadded: every pair of lengths


@pytest.mark.parametrize("answer", ANSWERS)
def test_encoder_decoder_ids_are_the_decoder_row_split_at_the_equals_sign(answer):
    """Both conventions: the encoder reads the decoder's IDs of "a+b" and the decoder's
    start token takes the ID of "=" (it predicts the first answer digit as "=" does);
    unpadded rows whose questions and answers differ in length."""
    rng = np.random.default_rng(1)
    operands = tuple(operands_of_lengths(rng, n, 7) for n in rng.integers(1, 8, (2, 100)))
    rows = {}
    for arch in ("decoder", "encoder_decoder"):
        trial = config(TaskConfig(train_digits=(1, 7)), FormatConfig(pad=False), arch, coupled_answer=answer)
        questions = encode_questions(build_task(trial.task), operands, trial.format, tokenizer, width=7)
        prompts, answers = questions.row_prompt_lengths(), questions.row_answer_lengths()
        rows[arch] = coupled_ids(trial, questions.tokens, prompts)
    ((row,), (question, decoder_input)) = rows["decoder"], rows["encoder_decoder"]
    assert len(set(prompts)) > 5 and len(set(answers)) > 5
    for q in range(len(prompts)):
        p, a = int(prompts[q]), int(answers[q])
        assert question[q][: p - 2] == row[q][1 : p - 1]  # "a+b"
        assert decoder_input[q][: a + 1] == row[q][p - 1 : p + a]  # "<s>" as "=", then the answer


@pytest.mark.parametrize("answer", ANSWERS)
def test_training_ids_are_the_test_ids_plus_one_start_per_question(answer):
    trial = replace(config(task=TaskConfig(train_digits=(1, 6)), coupled_answer=answer),
                    train=TrainConfig(batch_size=256))
    batch = batch_of(trial)
    model = build_model(trial.model, len(tokenizer), 0, trial.input_layout)
    tokens, prompts = torch.from_numpy(batch.tokens), torch.from_numpy(batch.prompt_lengths)
    sampler = build_position_sampler(trial.model)
    (at_test,) = model.sample_positions(tokens, prompts, sampler, None, training=False)
    (trained,) = model.sample_positions(tokens, prompts, sampler, torch.Generator().manual_seed(0), training=True)
    assert trained.shape == (256, tokens.shape[1] - 1)  # training feeds tokens[:, :-1]
    at_test = at_test[:, :-1]
    start = (trained - at_test)[at_test > 0].reshape(-1)
    shifts = trained - at_test
    starts = shifts.max(1).values
    assert torch.equal(shifts, torch.where(at_test > 0, starts[:, None], 0))  # one start per row, 0 stays 0
    assert start.min() >= 0 and len(starts.unique()) > 50  # drawn per question
    assert int(trained.max()) == 63  # the top ID of max_positions = 64 is trained
    assert int(trained[at_test > 0].min()) == 1  # and the lowest of a coupled token, never 0
    reach = at_test.max(1).values  # the row's largest ID at the lowest start
    assert bool((starts + reach <= 63).all())
    equals = tokens[:, :-1] == tokenizer.id("=")  # place 0 at s0 = 1 (own_place), the units' 1 at s0 = 0
    assert bool((at_test[equals] == 1).all()) and bool((trained[equals] >= 1).all())


def test_offsets_come_from_the_data_seed_alone():
    """Batch s is drawn from (seeds.data, s) and its start IDs from a Generator of the
    same seeds: the weight seed never changes them, the data seed does."""
    trial = replace(config(task=TaskConfig(train_digits=(1, 6))), train=TrainConfig(batch_size=32))

    def starts(seeds: SeedConfig) -> torch.Tensor:
        return training_positions(replace(trial, seeds=seeds), 2)[0]

    reference = starts(SeedConfig(weight=0, data=5))
    assert torch.equal(reference, starts(SeedConfig(weight=9, data=5, eval=3)))
    assert not torch.equal(reference, starts(SeedConfig(weight=0, data=6)))
    weights = [build_model(trial.model, len(tokenizer), 4).state_dict() for _ in range(2)]
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])  # no draw of its own at init


@pytest.mark.parametrize("answer", ANSWERS)
def test_eval_start_is_the_lowest_unless_coupled_at_eval(answer):
    trial = config(coupled_answer=answer)
    tokens, prompt = written(trial, "085", "050")
    rows, prompts = torch.as_tensor(np.repeat(tokens, 64, axis=0)), torch.full((64,), prompt)
    model = build_model(trial.model, len(tokenizer), 0, trial.input_layout)
    fixed = model.sample_positions(rows, prompts, build_position_sampler(trial.model),
                                   torch.Generator().manual_seed(1), training=False)[0]
    assert bool((fixed == fixed[:1]).all())
    assert fixed[0].tolist() == HAND_ROWS[0][5 if answer == "own_place" else 6]  # "<s>085+050=5310</s>"
    drawn_config = replace(trial.model, coupled_at_eval=True)
    drawn = model.sample_positions(rows, prompts, build_position_sampler(drawn_config),
                                   torch.Generator().manual_seed(1), training=False)[0]
    assert len(drawn.max(1).values.unique()) > 10


@pytest.mark.parametrize("name", ["plain", "randomized", "cyclic"])
def test_samplers_that_read_no_rows_give_the_numbers_they_gave(name):
    """sample_positions hands them the lengths alone, as before coupling existed."""
    cfg = ModelConfig(positions=name, max_positions=64, randomized_at_eval=name == "randomized")
    model = build_model(cfg, len(tokenizer), 0)
    tokens = torch.randint(3, len(tokenizer), (5, 12), generator=torch.Generator().manual_seed(0))
    sampler = build_position_sampler(cfg)
    for training, length in ((True, 11), (False, 12)):
        sampled = model.sample_positions(tokens, torch.full((5,), 6), sampler, torch.Generator().manual_seed(2),
                                         training=training)
        assert torch.equal(sampled[0], sampler(5, length, CPU, torch.Generator().manual_seed(2), training=training))


@pytest.mark.parametrize("answer", ANSWERS)
@pytest.mark.parametrize("arch", ["decoder", "encoder_decoder"])
def test_teacher_forced_exact_match_equals_greedy_and_cache_changes_nothing(arch, answer):
    """Unpadded successor with every carry cascade equally likely: the answers to
    questions of one length differ in length (99 + 1 = 100), the case where answer IDs
    must not depend on the answer."""
    torch.set_num_threads(1)
    trial = replace(
        config(TaskConfig(name="successor", train_digits=(1, 3)), FormatConfig(pad=False), arch, max_positions=12,
               coupled_answer=answer),
        train=TrainConfig(steps=200, batch_size=32, lr=3e-3, warmup=10, log_every=200),
        eval=EvalConfig(digits=(2, 3, 4), samples=48, questions="cascade_uniform"),
    )
    model = trained_model(trial)
    outcomes = []
    for questions, tokens, prompt, positions in eval_questions(trial, model):
        assert len(np.unique(questions.row_answer_lengths())) == 2
        answer = tokens.shape[1] - prompt
        cached = greedy_decode(model, tokens[:, :prompt], answer, positions, use_cache=True)
        uncached = greedy_decode(model, tokens[:, :prompt], answer, positions, use_cache=False)
        assert torch.equal(cached, uncached)
        forced_right, greedy_right = right_answers(model, tokens, prompt, positions)
        assert torch.equal(forced_right, greedy_right)
        outcomes += forced_right.tolist()
    assert 0 < sum(outcomes) < len(outcomes), f"{sum(outcomes)} of {len(outcomes)} right"


@pytest.mark.parametrize("answer", ANSWERS)
@pytest.mark.parametrize("arch", ["decoder", "encoder_decoder"])
def test_length_buckets_keep_the_padded_gradient(arch, answer):
    trial = replace(config(TaskConfig(train_digits=(1, 12)), FormatConfig(index_hints=True), arch,
                           max_positions=96, coupled_answer=answer), train=TrainConfig(batch_size=16))
    parts, _ = assert_same_gradients(trial)  # each row keeps its IDs, cut to its group's width
    assert len(parts) == 3


def test_the_same_config_twice_gives_the_same_numbers():
    trial = replace(config(TaskConfig(name="successor", train_digits=(1, 2))),
                    train=TrainConfig(steps=4, batch_size=8, warmup=1, log_every=1),
                    eval=EvalConfig(digits=(2, 4), samples=6))
    first, second = train(trial), train(trial)
    assert [t.loss for t in first.train] == [t.loss for t in second.train]
    assert [(s, r.correct) for s, r in first.eval] == [(s, r.correct) for s, r in second.eval]
    assert [s.prediction for s in first.samples] == [s.prediction for s in second.samples]


REFUSED = [
    ({"fmt": FormatConfig(fixed_length=True, reverse=False), "arch": "encoder"}, "format.fixed_length"),
    ({"fmt": FormatConfig(interleave=True)}, "format.interleave"),
    ({"task": TaskConfig(name="multiplication", train_digits=(1, 3), multiplier_digits=2)},
     "task.multiplier_digits 2"),
    ({"fmt": FormatConfig(reverse=False, pad=False)}, "format.pad"),
]


@pytest.mark.parametrize("changes, field", REFUSED, ids=[field for _, field in REFUSED])
def test_combinations_without_a_meaning_are_refused_naming_the_field(changes, field):
    with pytest.raises(ValueError, match=f"model.positions coupled.*{field}"):
        config(**changes)


def test_options_and_sizes():
    with pytest.raises(ValueError, match="model.coupled_at_eval does not apply to model.positions plain"):
        ModelConfig(coupled_at_eval=True)
    ModelConfig(positions="coupled", coupled_at_eval=True)
    with pytest.raises(ValueError, match="model.coupled_answer does not apply to model.positions randomized"):
        ModelConfig(positions="randomized", coupled_answer="predicted_place")
    ModelConfig(positions="coupled", coupled_answer="predicted_place")
    with pytest.raises(ValueError, match="model.coupled_answer must be one of"):
        build_position_sampler(ModelConfig(positions="coupled", coupled_answer="shifted"))
    coupled = {"model": {"positions": "coupled", "pe": "learned", "max_positions": 64}}
    checked = TRIAL_CONFIG.validate_python({"model": {**coupled["model"], "coupled_answer": "predicted_place"}})
    assert checked.model.coupled_answer == "predicted_place"
    with pytest.raises(ValueError, match="own_place.*predicted_place"):  # a study file lists the choices
        TRIAL_CONFIG.validate_python({"model": {**coupled["model"], "coupled_answer": "shifted"}})
    # the parity scratchpad keeps every digit, so its first place is known unpadded
    config(TaskConfig(name="parity", train_digits=(1, 3)), FormatConfig(reverse=False, pad=False))
    # IDs follow places, not tokens: 30-digit sums (95 tokens) need IDs 0 .. 32 only
    long = {"task": TaskConfig(train_digits=(1, 30))}
    assert config(**long, max_positions=33).model.max_positions == 33
    with pytest.raises(ValueError, match="shorter than the 33 position IDs that model.positions coupled gives"):
        config(**long, max_positions=32)
    with pytest.raises(ValueError, match="shorter than the longest sequence"):
        config(**long, positions="plain", max_positions=33)


def test_past_answer_moves_only_the_equals_sign_and_is_refused_where_it_means_nothing():
    """The paper-era code gives "=" the operators' ID before an answer written most
    significant digit first (HAND_ROWS), the current release one past the answer's top
    digit: the two rows differ there alone."""
    tokens = np.array([tokenizer.encode("085+050=0135", bos=True, eos=True)])
    prompt = 9  # <s> and "085+050="
    paper = coupled_ids(config(fmt=FormatConfig(reverse=False)), tokens, prompt)[0][0]
    release = coupled_ids(config(fmt=FormatConfig(reverse=False), coupled_equals="past_answer"), tokens, prompt)[0][0]
    assert paper == [0, 4, 3, 2, 1, 4, 3, 2, 1, 5, 4, 3, 2, 0]
    assert release == paper[:8] + [1 + 4 + 1] + paper[9:]  # start + len(answer) + 1
    assert config(fmt=FormatConfig(reverse=False), coupled_equals="past_answer",
                  max_positions=7).model.max_positions == 7  # "=" reaches one ID further
    with pytest.raises(ValueError, match="shorter than the 7 position IDs"):
        config(fmt=FormatConfig(reverse=False), coupled_equals="past_answer", max_positions=6)
    with pytest.raises(ValueError, match="model.coupled_equals past_answer.*format.reverse true"):
        config(coupled_equals="past_answer")
    with pytest.raises(ValueError, match="model.coupled_equals past_answer.*predicted_place"):
        config(fmt=FormatConfig(reverse=False), coupled_equals="past_answer", coupled_answer="predicted_place")
    with pytest.raises(ValueError, match="model.coupled_equals past_answer.*encoder_decoder"):
        config(fmt=FormatConfig(reverse=False), coupled_equals="past_answer", arch="encoder_decoder")
    with pytest.raises(ValueError, match="model.coupled_equals does not apply to model.positions plain"):
        ModelConfig(coupled_equals="past_answer")
    with pytest.raises(ValueError, match="operators.*past_answer"):  # a study file lists the choices
        TRIAL_CONFIG.validate_python({"model": {"positions": "coupled", "coupled_equals": "release"}})


def test_new_fields_keep_every_trial_id():
    assert TrialConfig().trial_id == "44136fa355b3"  # tests/test_config_identity.py
    assert TrialConfig(model=ModelConfig(coupled_at_eval=False)).trial_id == TrialConfig().trial_id
    assert config().trial_id != replace(config(), model=replace(config().model, coupled_at_eval=True)).trial_id
    assert TrialConfig(model=ModelConfig(coupled_answer="own_place")).trial_id == TrialConfig().trial_id
    assert config(coupled_answer="own_place").trial_id == config().trial_id
    assert config(coupled_answer="predicted_place").trial_id != config().trial_id
    assert "coupled" in POSITION_SAMPLERS


def test_lg_study_validate_accepts_coupling_and_abacus():
    study = Path(__file__).parent / "study_files" / "good_coupling_abacus.yaml"
    loaded = load_study(study)
    assert [(t.model.positions, t.model.pe, t.model.abacus) for t in loaded.trials] == [
        ("coupled", "learned", False), ("plain", "nope", True), ("coupled", "nope", True)]
    result = CliRunner().invoke(app, ["validate", str(study)])
    assert result.exit_code == 0, result.output
    assert "3 trial" in result.output
