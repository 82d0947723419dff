"""Training distributions: seeded, exact, and shaped as their papers say."""

import numpy as np
import pytest

from lengthgen import TrialConfig, digits
from lengthgen.complexity import cascade_probabilities
from lengthgen.config import DataConfig, EvalConfig, FormatConfig, TaskConfig, build_task
from lengthgen.distributions import (
    DISTRIBUTIONS,
    TEST_QUESTIONS,
    UNIFORM_OPERANDS_SPLIT_SEED,
    UniformOperands,
    _split,
)
from lengthgen.evaluation import build_eval_sets
from lengthgen.formats import encode_questions
from lengthgen.tasks import TASKS
from lengthgen.tokenizer import CharTokenizer


def supported(name: str, task: str) -> bool:
    return name not in ("cascade_uniform", "mixed") or TASKS[task].constructible_complexity


CASES = [(d, t) for d in sorted(DISTRIBUTIONS) for t in sorted(TASKS) if supported(d, t)]


@pytest.mark.parametrize("name, task", CASES)
def test_groups_are_seeded_sized_and_exact(name, task):
    distribution, instance = DISTRIBUTIONS[name](), TASKS[task]()
    digit_range = (1, 4) if task == "parity" else (1, 3)
    groups = distribution.sample(instance, np.random.default_rng(0), 64, digit_range)
    again = distribution.sample(instance, np.random.default_rng(0), 64, digit_range)
    other = distribution.sample(instance, np.random.default_rng(1), 64, digit_range)
    assert sum(len(g[0]) for g in groups.values()) == 64
    assert groups.keys() == again.keys()
    assert all(np.array_equal(a, b) for n in groups for a, b in zip(groups[n], again[n]))
    assert any(
        n not in other or not np.array_equal(groups[n][0], other[n][0][: len(groups[n][0])]) for n in groups
    )
    for n, operands in groups.items():
        assert [o.shape[1] for o in operands] == list(instance.operand_digits(n))
        answers = instance.solve(operands)
        for q in range(len(answers)):
            numbers = [digits.to_int(o[q], instance.base) for o in operands]
            assert digits.to_int(answers[q], instance.base) == python_answer(task, numbers, n)


def python_answer(task: str, numbers: list[int], n: int) -> int:
    if task == "addition":
        return numbers[0] + numbers[1]
    if task == "successor":
        return numbers[0] + 1
    if task == "parity":  # the scratchpad y_1..y_n read as an LSB-first binary number
        return sum(((numbers[0] & (2 ** (i + 1) - 1)).bit_count() % 2) << i for i in range(n))
    return numbers[0] * numbers[1]


def test_cascade_uniform_levels_are_uniform_and_labels_exact():
    task = TASKS["addition"]()
    groups = DISTRIBUTIONS["cascade_uniform"]().sample(task, np.random.default_rng(2), 12000, (4, 4))
    levels = task.complexity(groups[4])
    assert np.allclose(np.bincount(levels, minlength=5) / len(levels), 1 / 5, atol=0.015)
    a, b = (np.array([digits.to_int(r) for r in o]) for o in groups[4])
    assert np.array_equal(np.array([digits.to_int(r) for r in task.solve(groups[4])]), a + b)


def test_cascade_uniform_draws_the_level_per_length():
    task = TASKS["addition"]()
    groups = DISTRIBUTIONS["cascade_uniform"]().sample(task, np.random.default_rng(3), 6000, (1, 3))
    for n, operands in groups.items():
        histogram = np.bincount(task.complexity(operands), minlength=n + 1) / len(operands[0])
        assert np.allclose(histogram, 1 / (n + 1), atol=0.04)  # levels 0..n at length n


def test_cascade_uniform_without_leading_zeros():
    task = TASKS["addition"]()
    groups = DISTRIBUTIONS["cascade_uniform"]().sample(task, np.random.default_rng(4), 3000, (3, 3), False)
    assert all((o[:, -1] > 0).all() for o in groups[3])
    assert np.allclose(np.bincount(task.complexity(groups[3])) / 3000, 1 / 4, atol=0.03)


def test_mixed_is_half_uniform_half_cascade_uniform():
    # 003 Fig. 8c: each question 50/50 from the two distributions
    task, n = TASKS["addition"](), 4
    groups = DISTRIBUTIONS["mixed"]().sample(task, np.random.default_rng(5), 20000, (n, n))
    histogram = np.bincount(task.complexity(groups[n]), minlength=n + 1) / 20000
    expected = 0.5 / (n + 1) + 0.5 * cascade_probabilities(n)
    assert np.allclose(histogram, expected, atol=0.012)


def test_uniform_operands_pool_and_split_of_000():
    training, validation, is_training = _split(20)  # 000 §3.3: [0, 2^20], 7:1
    assert len(training) + len(validation) == 2**20 + 1
    assert len(training) == int((2**20 + 1) * 7 / 8)
    assert not np.isin(validation, training).any()
    again = np.random.default_rng(UNIFORM_OPERANDS_SPLIT_SEED).permutation(2**20 + 1)
    assert np.array_equal(training, again[: len(training)])  # a fixed, documented seed
    task = TASKS["addition"]()
    groups = DISTRIBUTIONS["uniform_operands"]().sample(task, np.random.default_rng(0), 2000, (1, 6))
    assert list(groups) == [7]  # L_int = 6: mostly 6-digit numbers, padded to the 7 of 2^20
    values = np.concatenate([[digits.to_int(r) for r in o] for o in groups[7]])
    assert is_training[values].all()
    assert np.mean(values >= 10**6) == pytest.approx(48577 / (2**20 + 1), abs=0.01)  # "< 5 % 7-digit"


def test_uniform_operands_for_parity_are_20_bit_numbers():
    groups = DISTRIBUTIONS["uniform_operands"]().sample(TASKS["parity"](), np.random.default_rng(0), 10, (1, 20))
    assert list(groups) == [21]  # 002 §3.3: the same numbers, in binary


@pytest.mark.parametrize("n", [1, 3, 6, 7, 9])
@pytest.mark.parametrize("leading_zeros", [True, False])
def test_uniform_operands_test_questions_never_use_a_training_number(n, leading_zeros):
    task, distribution = TASKS["addition"](), UniformOperands()
    _, _, is_training = _split(20)
    operands = distribution.eval_operands(task, np.random.default_rng(n), 3000, n, (1, 6), leading_zeros)
    for operand in operands:
        assert operand.shape == (3000, max(n, 7))  # n <= 7: written at the training width
        assert not operand[:, n:].any()  # numbers of at most n digits
        values = np.array([digits.to_int(r) for r in operand], dtype=object)
        inside = np.array([v <= 2**20 for v in values])
        assert not is_training[values[inside].astype(np.int64)].any()
        if not leading_zeros:
            assert (operand[:, n - 1] > 0).all()
    if n >= 8:  # beyond the pool nothing is excluded: still uniform digits
        low = operands[0][:, :-1]  # below the leading digit
        assert np.allclose(np.bincount(low.ravel(), minlength=10) / low.size, 0.1, atol=0.01)


@pytest.mark.parametrize("task, train_digits, width, short", [("addition", (1, 6), 7, 1), ("successor", (1, 6), 7, 1),
                                                              ("parity", (1, 20), 21, 6)])
def test_uniform_operands_in_distribution_tests_are_written_as_the_training_questions(task, train_digits, width, short):
    # 000 §3.2 pads every operand to one fixed length: a 6-digit test question is asked
    # at the width the model was trained on (7 = the digits of 2^20), its answer as long
    config = TrialConfig(
        task=TaskConfig(name=task, train_digits=train_digits), data=DataConfig(distribution="uniform_operands"),
        eval=EvalConfig(digits=(short, train_digits[1], width + 2), samples=50),
    )
    tokenizer = CharTokenizer()
    training = encode_questions(
        build_task(config.task), UniformOperands().sample(build_task(config.task), np.random.default_rng(0), 50,
                                                          train_digits)[width],
        config.format, tokenizer, training=True,
    )
    sets = {s.digits: s.questions for s in build_eval_sets(config, build_task(config.task), tokenizer)}
    for n in (short, train_digits[1]):
        assert config.in_distribution(n)
        assert sets[n].tokens.shape[1] == training.tokens.shape[1]
        assert sets[n].answer.shape[1] == training.answer.shape[1]
    assert sets[width + 2].tokens.shape[1] > training.tokens.shape[1]


def test_abc_reads_training_questions_of_the_longest_length():
    # 000 §5 step 1: S_gen is "a random subset of training samples"; with
    # uniform_operands, numbers of the pool's training part at its width
    task, rng = TASKS["addition"](), np.random.default_rng(0)
    _, _, is_training = _split(20)
    operands = UniformOperands().longest_questions(task, rng, 500, (1, 6))
    for operand in operands:
        assert operand.shape == (500, 7)
        assert is_training[[digits.to_int(r) for r in operand]].all()
    uniform = DISTRIBUTIONS["uniform_length"]().longest_questions(task, np.random.default_rng(0), 5, (1, 4))
    assert all(np.array_equal(a, b) for a, b in zip(uniform, task.sample_operands(np.random.default_rng(0), 5, 4)))


@pytest.mark.parametrize("distribution", ["uniform_length", "uniform_operands"])
@pytest.mark.parametrize("n", [1, 3, 6, 9])
def test_exact_length_test_questions_have_exactly_n_digits(distribution, n):
    # 000 §3.3: "min(base^L - base^(L-1), 10000) numbers of length L"
    config = TrialConfig(
        task=TaskConfig(train_digits=(1, 6)), data=DataConfig(distribution=distribution),
        eval=EvalConfig(digits=(n,), samples=400, questions="exact_length"),
    )
    task, is_training = build_task(config.task), _split(20)[2]
    operands = TEST_QUESTIONS["exact_length"]().operands(
        DISTRIBUTIONS[distribution](), task, np.random.default_rng(n), 400, n, (1, 6), True
    )
    for operand in operands:
        values = np.array([digits.to_int(r) for r in operand], dtype=object)
        assert ((values >= 10 ** (n - 1)) & (values < 10**n)).all() and (values > 0).all()
        if distribution == "uniform_operands":
            inside = values[values <= 2**20].astype(np.int64)
            assert not is_training[inside].any()
    uniform = TEST_QUESTIONS["uniform"]().operands(
        DISTRIBUTIONS[distribution](), task, np.random.default_rng(n), 400, n, (1, 6), True
    )
    if n > 1:  # uniform questions: a tenth of the operands is shorter than n
        assert (uniform[0][:, n - 1] == 0).any()


def test_uniform_operands_refusals_name_the_field():
    uniform_operands = DataConfig(distribution="uniform_operands")
    with pytest.raises(ValueError, match="task.train_digits must start at 1"):
        TrialConfig(task=TaskConfig(train_digits=(2, 6)), data=uniform_operands)
    with pytest.raises(ValueError, match="B = round"):
        TrialConfig(task=TaskConfig(train_digits=(1, 8)), data=uniform_operands, eval=EvalConfig(digits=(9,)))
    config = TrialConfig(task=TaskConfig(train_digits=(1, 6)), data=uniform_operands, eval=EvalConfig(digits=(8,)))
    assert config.longest_digits == 8
    config = TrialConfig(
        task=TaskConfig(train_digits=(1, 6)), data=uniform_operands, format=FormatConfig(pad=False),
        eval=EvalConfig(digits=(1, 2)),
    )
    assert config.longest_digits == 7


def test_cascade_uniform_refuses_lengths_it_does_not_build():
    with pytest.raises(ValueError, match="data.distribution cascade_uniform builds questions of at most 64"):
        TrialConfig(
            task=TaskConfig(train_digits=(1, 65)), data=DataConfig(distribution="cascade_uniform"),
            eval=EvalConfig(digits=(70,)),
        )
