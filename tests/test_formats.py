"""Tokenizer round trip and the exact layout of a question in every format."""

import re
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from lengthgen import TrialConfig, digits
from lengthgen.batches import training_batch
from lengthgen.config import (
    DataConfig,
    EvalConfig,
    FormatConfig,
    ModelConfig,
    TaskConfig,
    TrainConfig,
)
from lengthgen.distributions import DISTRIBUTIONS
from lengthgen.evaluation import build_eval_sets
from lengthgen.formats import answer_targets, encode_questions, input_layout, sequence_length
from lengthgen.tasks import TASKS, build_task
from lengthgen.tasks.multiplication import Multiplication
from lengthgen.tokenizer import CHARACTERS, HINTS, N_HINTS, CharTokenizer

tokenizer = CharTokenizer()


def text(row) -> str:
    return tokenizer.decode(np.asarray(row).tolist(), keep_specials=True).replace("<pad>", "")


def operands_of(task, numbers: list[list[int]], n: int):
    """Written-order operands of one or more questions, each (Q, cells)."""
    cells = task.operand_digits(n)
    return tuple(
        np.stack([digits.from_int(q[i], cells[i], task.base) for q in numbers]) for i in range(len(cells))
    )


def encode(name, numbers, n, rng=None, task=None, **flags):
    task = task or TASKS[name]()
    return encode_questions(task, operands_of(task, numbers, n), FormatConfig(**flags), tokenizer, rng)


@given(st.text(alphabet=CHARACTERS, max_size=300))
def test_tokenizer_round_trip(string):
    assert tokenizer.decode(tokenizer.encode(string, bos=True, eos=True)) == string


def test_tokenizer_refuses_unknown_characters():
    with pytest.raises(ValueError, match="not in the vocabulary"):
        tokenizer.encode("12~")


def test_hint_symbols_are_102_ordered_single_characters():
    assert len(HINTS) == N_HINTS == 102 and HINTS[:3] == "abc" and HINTS[26] == "A"
    assert [tokenizer.id(h) for h in HINTS] == list(range(tokenizer.hint_offset, tokenizer.hint_offset + 102))


@pytest.mark.parametrize(
    "name, numbers, n, flags, expected",
    [
        ("addition", [85, 50], 3, {}, "<s>085+050=5310</s>"),
        ("addition", [85, 50], 3, {"reverse": False}, "<s>085+050=0135</s>"),
        ("addition", [85, 50], 3, {"reverse_operands": True}, "<s>580+050=5310</s>"),  # 001 App. B
        ("successor", [199], 3, {}, "<s>199=0020</s>"),
        ("parity", [0b0110], 4, {}, "<s>0110=0100</s>"),  # 000 §3.2: y_1 = x_1, y_i = y_{i-1} xor x_i
        ("parity", [0b0110], 4, {"reverse": False}, "<s>0110=0010</s>"),
        ("n_by_1", [123, 6], 4, {}, "<s>0123*6=83700</s>"),  # 000 App. A.4's "0123*6"
        ("addition", [85, 50], 3, {"interleave": True}, "<s>+008550=5310</s>"),  # 000 App. A.4
        ("n_by_1", [123, 6], 4, {"interleave": True}, "<s>*06162636=83700</s>"),
        ("addition", [85, 50], 3, {"pad": False}, "<s>85+50=531</s>"),
        ("addition", [5, 0], 3, {"pad": False, "reverse": False}, "<s>5+0=5</s>"),
        ("parity", [0b110], 3, {"pad": False}, "<s>110=010</s>"),  # the scratchpad keeps every bit
    ],
)
def test_layouts(name, numbers, n, flags, expected):
    assert text(encode(name, [numbers], n, **flags).tokens[0]) == expected


def test_multiplication_layout_of_003_eq_3_2():
    task = Multiplication(2)
    encoded = encode("multiplication", [[56, 4297]], 4, task=task)
    assert text(encoded.tokens[0]) == "<s>56*4297=236042</s>"  # 56 x 4297 = 240632
    assert text(encode("multiplication", [[56, 4297]], 4, task=task, reverse=False).tokens[0]).endswith("=240632</s>")


def test_prompt_length_and_answer_of_the_default_layout():
    encoded = encode("addition", [[85, 50]], 3)
    assert encoded.prompt_length == len("<s>") // 3 + len("085+050=")
    assert text(encoded.answer[0]) == "5310"


def test_without_padding_rows_differ_and_each_answer_ends_where_it_should():
    encoded = encode("addition", [[85, 50], [12, 13]], 2, pad=False)
    assert [text(r) for r in encoded.tokens] == ["<s>85+50=531</s>", "<s>12+13=52</s>"]
    assert encoded.prompt_length == 7 and encoded.row_answer_lengths().tolist() == [3, 2]
    target = answer_targets(encoded, tokenizer)
    assert [text(r) for r in target] == ["531</s>", "52</s>"]


def test_index_hints_name_the_place_in_operands_and_answer():
    encoded = encode("addition", [[85, 50]], 3, np.random.default_rng(0), index_hints=True)
    row = text(encoded.tokens[0])
    s = HINTS.index(row[len("<s>")]) - 2  # the first written digit is the hundreds
    h = HINTS[s : s + 4]  # h[k] names the digits of weight 10^k
    answer = f"{h[0]}5{h[1]}3{h[2]}1{h[3]}0"
    assert row == f"<s>{h[2]}0{h[1]}8{h[0]}5+{h[2]}0{h[1]}5{h[0]}0={answer}</s>"
    assert text(encoded.answer[0]) == answer  # exact match compares the hints too


def test_index_hints_in_the_fully_reversed_format_read_in_order():
    encoded = encode(
        "addition", [[42, 39]], 2, np.random.default_rng(3), index_hints=True, reverse_operands=True
    )
    row = text(encoded.tokens[0])
    s = HINTS.index(row[len("<s>")])
    h = HINTS[s : s + 3]
    assert row == f"<s>{h[0]}2{h[1]}4+{h[0]}9{h[1]}3={h[0]}1{h[1]}8{h[2]}0</s>"  # 001: a4b2 + a3b9 = a8b1


def test_hint_runs_start_anywhere_that_leaves_room_for_the_answer():
    n = 40
    rng = np.random.default_rng(1)
    operands = TASKS["addition"]().sample_operands(rng, 4000, n)
    encoded = encode_questions(TASKS["addition"](), operands, FormatConfig(index_hints=True), tokenizer, rng)
    first_hint_of_answer = encoded.answer[:, 0] - tokenizer.hint_offset  # place 0 of the answer
    assert first_hint_of_answer.min() == 0 and first_hint_of_answer.max() == N_HINTS - (n + 1)


def test_random_spaces_only_in_training_only_between_question_symbols():
    rng = np.random.default_rng(4)
    task = TASKS["addition"]()
    operands = task.sample_operands(rng, 2000, 6)
    fmt = FormatConfig(random_spaces=True)
    plain = encode_questions(task, operands, fmt, tokenizer, rng)
    assert " " not in "".join(text(r) for r in plain.tokens[:50])  # none at evaluation
    spaced = encode_questions(task, operands, fmt, tokenizer, rng, training=True)
    rows = [text(r) for r in spaced.tokens]
    assert [r.replace(" ", "") for r in rows] == [text(r) for r in plain.tokens]
    assert all(re.fullmatch(r"<s>\d[\d +]*\d=\d+</s>", r) for r in rows)  # no space after <s> or at "="
    gaps = 6 + 6 + 1 - 1  # between the 13 question symbols
    rate = sum(r.count(" ") for r in rows) / (gaps * len(rows))
    assert rate == pytest.approx(0.5, abs=0.02)
    assert (spaced.row_prompt_lengths() - plain.prompt_length).max() <= gaps


def test_shift_by_zeros_appends_zeros_and_keeps_labels_exact():
    rng = np.random.default_rng(5)
    task, n, width = TASKS["addition"](), 3, 8
    operands = task.sample_operands(rng, 500, n)
    encoded = encode_questions(
        task, operands, FormatConfig(shift_zeros=True, reverse=False), tokenizer, rng, training=True, width=width
    )
    shifts = []
    for q, row in enumerate(encoded.tokens):
        a, b, total = re.fullmatch(r"<s>(\d+)\+(\d+)=(\d+)</s>", text(row)).groups()
        assert len(a) == len(b) and len(total) == len(a) + 1  # written as a question of length n + s
        shift = len(a) - n
        assert int(a) == digits.to_int(operands[0][q]) * 10**shift and int(a) + int(b) == int(total)
        shifts.append(shift)
    assert set(shifts) == set(range(width - n + 1))
    eval_rows = encode_questions(task, operands, FormatConfig(shift_zeros=True), tokenizer, rng, width=width)
    assert eval_rows.tokens.shape[1] == sequence_length(task, n, FormatConfig())  # no shift at test time


def test_multiplication_shifts_only_the_multiplicand():
    rng = np.random.default_rng(6)
    task = Multiplication(2)
    encoded = encode_questions(
        task, task.sample_operands(rng, 200, 2), FormatConfig(shift_zeros=True, reverse=False), tokenizer,
        rng, training=True, width=6,
    )
    for row in encoded.tokens:
        m, a, product = re.fullmatch(r"<s>(\d+)\*(\d+)=(\d+)</s>", text(row)).groups()
        assert len(m) == 2 and int(m) * int(a) == int(product)


def test_fixed_length_layout_of_003_eq_3_1_and_3_2():
    task = TASKS["addition"]()
    fmt = FormatConfig(fixed_length=True, reverse=False, pad=False)
    encoded = encode_questions(task, operands_of(task, [[123, 4095]], 4), fmt, tokenizer, width=5)
    assert text(encoded.tokens[0]) == "..123+.4095" and encoded.aligned
    assert text(encoded.answer[0]) == "..4218"  # targets of the last 6 positions: "+.4095"
    assert encoded.answer_positions().tolist() == [5, 6, 7, 8, 9, 10]
    multiplication = Multiplication(2)
    encoded = encode_questions(
        multiplication, operands_of(multiplication, [[56, 4297]], 4), fmt, tokenizer, width=5
    )
    assert text(encoded.tokens[0]) == "56*.4297" and text(encoded.answer[0]) == ".240632"
    zero_filled = encode_questions(task, operands_of(task, [[123, 4095]], 4), replace(fmt, pad=True), tokenizer, width=5)
    assert text(zero_filled.tokens[0]) == "00123+04095" and text(zero_filled.answer[0]) == "004218"
    successor = encode_questions(
        TASKS["successor"](), operands_of(TASKS["successor"](), [[99]], 2), fmt, tokenizer, width=3
    )
    assert text(successor.tokens[0]) == "..99" and text(successor.answer[0]) == ".100"  # filled left


def test_fixed_length_training_batch_targets_the_aligned_answer():
    fmt = FormatConfig(fixed_length=True, reverse=False, pad=False)
    with pytest.raises(ValueError, match="format.fixed_length .* model.arch decoder"):
        TrialConfig(format=fmt, eval=EvalConfig(digits=(5,)))
    config = TrialConfig(
        task=TaskConfig(name="addition", train_digits=(1, 3)),
        format=fmt,
        model=ModelConfig(arch="encoder"),
        train=TrainConfig(batch_size=16),
        eval=EvalConfig(digits=(5,)),
    )
    task = build_task(config.task)
    batch = training_batch(config, task, DISTRIBUTIONS["uniform_length"](), tokenizer, 0)
    assert batch.tokens.shape == (16, 11) and batch.answer_mask[:, 5:].all() and not batch.answer_mask[:, :5].any()
    for row, target in zip(batch.tokens, batch.targets):
        a, b = text(row).replace(".", "0").split("+")
        assert int(text(target[5:]).replace(".", "0")) == int(a) + int(b)


@pytest.mark.parametrize("task", sorted(TASKS))
@pytest.mark.parametrize("n", [1, 7, 40])
@pytest.mark.parametrize(
    "flags", [{}, {"index_hints": True}, {"reverse_operands": True}, {"pad": False}, {"random_spaces": True}]
)
def test_sequence_length_bounds_the_encoding(task, n, flags):
    instance, rng = TASKS[task](), np.random.default_rng(0)
    fmt = FormatConfig(**flags)
    operands = instance.sample_operands(rng, 3, n)
    encoded = encode_questions(instance, operands, fmt, tokenizer, rng, training=True)
    longest = sequence_length(instance, n, fmt, training=True)
    if flags in ({}, {"index_hints": True}, {"reverse_operands": True}):
        assert encoded.tokens.shape == (3, longest)
    assert encoded.tokens.shape[1] <= longest


def test_loss_mask_covers_exactly_the_answer_and_end_token():
    config = TrialConfig(
        task=TaskConfig(name="addition", train_digits=(1, 6)),
        format=FormatConfig(pad=False, index_hints=True, random_spaces=True),
        train=TrainConfig(batch_size=64),
        eval=EvalConfig(digits=(8,)),
    )
    batch = training_batch(config, build_task(config.task), DISTRIBUTIONS["uniform_length"](), tokenizer, 3)
    for row, mask in zip(batch.tokens, batch.answer_mask):
        written = text(row)
        assert text(row[mask]) == written[written.index("=") + 1 :]


def test_eval_sets_without_padding_share_one_prompt_length_and_end_answers_early():
    config = TrialConfig(
        task=TaskConfig(name="addition", train_digits=(1, 3)),
        format=FormatConfig(pad=False),
        eval=EvalConfig(digits=(2, 4), samples=200),
    )
    for eval_set in build_eval_sets(config, build_task(config.task), tokenizer):
        questions = eval_set.questions
        assert questions.prompt_lengths is None
        rows = [text(r) for r in questions.tokens]
        assert all(re.fullmatch(rf"<s>[1-9]\d{{{eval_set.digits - 1}}}\+[1-9]\d*=\d+</s>", r) for r in rows)
        assert len(set(questions.row_answer_lengths())) == 2  # n or n + 1 answer digits


def test_hints_come_from_the_seed_that_owns_the_questions():
    config = TrialConfig(
        task=TaskConfig(name="addition", train_digits=(1, 3)),
        format=FormatConfig(index_hints=True, random_spaces=True),
        train=TrainConfig(batch_size=8),
        eval=EvalConfig(digits=(4,), samples=8),
    )
    task, dist = build_task(config.task), DISTRIBUTIONS["uniform_length"]()

    def batch(cfg):
        return training_batch(cfg, task, dist, tokenizer, 0).tokens

    def questions(cfg):
        return build_eval_sets(cfg, task, tokenizer)[0].questions.tokens

    seeds = config.seeds
    assert np.array_equal(batch(config), batch(replace(config, seeds=replace(seeds, weight=3, eval=3))))
    assert not np.array_equal(batch(config), batch(replace(config, seeds=replace(seeds, data=1))))
    assert np.array_equal(questions(config), questions(replace(config, seeds=replace(seeds, weight=3, data=3))))
    assert not np.array_equal(questions(config), questions(replace(config, seeds=replace(seeds, eval=1))))


@pytest.mark.parametrize(
    "task, fmt, data, message",
    [
        ({}, {"fixed_length": True}, {}, "format.fixed_length .* format.reverse"),
        ({}, {"fixed_length": True, "reverse": False, "index_hints": True}, {}, "format.index_hints"),
        ({"name": "multiplication", "multiplier_digits": 2}, {"interleave": True}, {}, "format.interleave"),
        ({}, {"interleave": True, "pad": False}, {}, "format.interleave .* format.pad"),
        ({}, {"interleave": True, "index_hints": True}, {}, "choose one"),
        ({"name": "parity"}, {"shift_zeros": True}, {}, "format.shift_zeros .* parity"),
        ({"name": "multiplication"}, {}, {"distribution": "cascade_uniform"}, "data.distribution cascade_uniform"),
        ({"name": "n_by_1"}, {}, {"distribution": "mixed"}, "data.distribution mixed"),
    ],
)
def test_impossible_combinations_are_refused_naming_the_field(task, fmt, data, message):
    with pytest.raises(ValueError, match=message):
        TrialConfig(
            task=TaskConfig(**{"train_digits": (1, 3), **task}),
            format=FormatConfig(**fmt),
            data=DataConfig(**data),
            eval=EvalConfig(digits=(4,)),
        )


def test_index_hints_refuse_answers_longer_than_the_hint_set():
    hints, model = FormatConfig(index_hints=True), ModelConfig(max_positions=1024)
    with pytest.raises(ValueError, match="format.index_hints has 102 hint symbols"):
        TrialConfig(format=hints, model=model, eval=EvalConfig(digits=(102,)))
    TrialConfig(format=hints, model=model, eval=EvalConfig(digits=(101,)))  # 102 answer places fit


@pytest.mark.parametrize("name", ["successor", "parity"])
def test_interleave_leaves_a_one_operand_question_as_it_is(name):
    """000 App. A.4 aligns the places of two operands; one operand is aligned already,
    so a study can cross unary and binary tasks under one format."""
    task = TASKS[name]()
    operands = task.sample_operands(np.random.default_rng(0), 5, 4)
    plain, paired = FormatConfig(), FormatConfig(interleave=True)
    assert np.array_equal(encode_questions(task, operands, plain, tokenizer).tokens,
                          encode_questions(task, operands, paired, tokenizer).tokens)
    assert input_layout(task, paired, 4) == input_layout(task, plain, 4)
    assert sequence_length(task, 4, paired) == sequence_length(task, 4, plain)


@pytest.mark.parametrize("distribution", ["uniform_length", "cascade_uniform", "mixed"])
def test_parity_in_the_fixed_length_layout_gives_one_target_per_input(distribution):
    """The scratchpad runs on through the zero cells left of a short question: 01 and 001
    padded to one field are one input and must have one target (science version 2)."""
    from lengthgen.batches import training_batch
    from lengthgen.config import DataConfig, ModelConfig, TaskConfig, TrialConfig, derive

    config = TrialConfig(
        task=TaskConfig(name="parity", train_digits=(1, 4)),
        format=FormatConfig(fixed_length=True, reverse=False, pad=True),
        data=DataConfig(distribution=distribution),
        model=ModelConfig(arch="encoder", max_positions=64),
    )
    task, sampler = derive(config).task, derive(config).distribution
    targets: dict[tuple, set] = {}
    for step in range(20):
        batch = training_batch(config, task, sampler, CharTokenizer(), step)
        for row, target in zip(batch.tokens, batch.targets, strict=True):
            targets.setdefault(tuple(row), set()).add(tuple(target))
    assert len(targets) > 8 and all(len(seen) == 1 for seen in targets.values())
