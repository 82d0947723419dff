"""Labels come from exact integer arithmetic, at any length, for every task."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lengthgen import digits
from lengthgen.config import TaskConfig
from lengthgen.tasks import TASKS, build_task
from lengthgen.tasks.multiplication import Multiplication


def value(row: np.ndarray, base: int = 10) -> int:
    return digits.to_int(row, base)


def reference(name: str, numbers: list[int], base: int, n: int) -> int | list[int]:
    """The answer by Python integer arithmetic (parity: the scratchpad y_1..y_n)."""
    if name == "addition":
        return numbers[0] + numbers[1]
    if name == "successor":
        return numbers[0] + 1
    if name == "parity":
        bits = [(numbers[0] >> i) & 1 for i in range(n)]
        return [sum(bits[: i + 1]) % 2 for i in range(n)]  # y_i = y_{i-1} xor x_i
    return numbers[0] * numbers[1]


def check_answers(task, operands, n):
    answers = task.solve(operands)
    assert answers.shape == (len(answers), task.answer_digits(n))
    for q in range(len(answers)):
        numbers = [value(o[q], task.base) for o in operands]
        expected = reference(task.name, numbers, task.base, n)
        if isinstance(expected, list):
            assert answers[q].tolist() == expected
        else:
            assert value(answers[q], task.base) == expected


@st.composite
def questions(draw, name):
    task = TASKS[name]() if name != "multiplication" else Multiplication(draw(st.integers(1, 4)))
    n = draw(st.integers(1, 200))
    operands = []
    for cells in task.operand_digits(n):
        low = task.base ** (cells - 1) if (name == "multiplication" and cells != n) else 0
        number = draw(st.integers(low, task.base**cells - 1))
        operands.append(digits.from_int(number, cells, task.base)[None])
    return task, tuple(operands), n


@pytest.mark.parametrize("name", sorted(TASKS))
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_labels_equal_python_integer_arithmetic(name, data):
    task, operands, n = data.draw(questions(name))
    check_answers(task, operands, n)


@pytest.mark.parametrize("name", sorted(TASKS))
def test_batch_of_200_digit_questions_matches_python_ints(name):
    task = TASKS[name]()
    operands = task.sample_operands(np.random.default_rng(0), 16, 200)
    check_answers(task, operands, 200)


def test_multi_digit_multiplication_batch_matches_python_ints():
    task = Multiplication(3)
    operands = task.sample_operands(np.random.default_rng(1), 16, 120)
    assert operands[0].shape == (16, 3) and operands[1].shape == (16, 120)
    check_answers(task, operands, 120)


@given(st.integers(1, 200), st.sampled_from([2, 10]), st.data())
@settings(max_examples=50, deadline=None)
def test_digit_round_trip(n, base, data):
    number = data.draw(st.integers(0, base**n - 1))
    assert digits.to_int(digits.from_int(number, n, base), base) == number
    assert digits.from_ints(np.array([number % 2**60]), min(n, 15), base).shape == (1, min(n, 15))


def test_sampled_operands_use_every_digit_uniformly():
    operands = TASKS["addition"]().sample_operands(np.random.default_rng(1), 20000, 3)
    counts = np.bincount(np.concatenate(operands).ravel(), minlength=10) / np.concatenate(operands).size
    assert np.allclose(counts, 0.1, atol=0.01)


@pytest.mark.parametrize("name", sorted(TASKS))
def test_without_leading_zeros_operands_have_exactly_n_digits(name):
    task = TASKS[name]()
    operands = task.sample_operands(np.random.default_rng(2), 5000, 4, leading_zeros=False)
    for operand, scaled in zip(operands, task.scales):
        if scaled:
            top = operand[:, -1]
            assert top.min() == 1 and top.max() == task.base - 1
            assert np.allclose(np.bincount(top)[1:] / len(top), 1 / (task.base - 1), atol=0.03)


@pytest.mark.parametrize("name", sorted(TASKS))
def test_the_generator_alone_decides_the_operands(name):
    task = TASKS[name]()
    first = task.sample_operands(np.random.default_rng(5), 50, 6)
    again = task.sample_operands(np.random.default_rng(5), 50, 6)
    other = task.sample_operands(np.random.default_rng(6), 50, 6)
    assert all(np.array_equal(a, b) for a, b in zip(first, again))
    assert not all(np.array_equal(a, b) for a, b in zip(first, other))


def test_operand_shapes_and_multiplier_range():
    assert TASKS["n_by_1"]().operand_digits(7) == (7, 1)
    assert Multiplication(3).operand_digits(20) == (3, 20)  # 003 eq. 3.2: multiplier first
    assert Multiplication(3).answer_digits(20) == 23
    assert TASKS["parity"]().answer_digits(9) == 9 and TASKS["parity"].base == 2
    multipliers = Multiplication(2).sample_operands(np.random.default_rng(0), 4000, 5)[0]
    values = multipliers[:, 0] + 10 * multipliers[:, 1].astype(int)
    assert values.min() == 10 and values.max() == 99  # k-digit numbers, not padded
    single = Multiplication().sample_operands(np.random.default_rng(0), 4000, 5)[0]
    assert set(np.unique(single)) == set(range(1, 10))  # 003 App. C.4: uniform on 1..9
    n_by_1 = TASKS["n_by_1"]().sample_operands(np.random.default_rng(0), 4000, 5)[1]
    assert set(np.unique(n_by_1)) == set(range(10))  # 000 §3.1: x_2 in {0, ..., 9}


def test_build_task_reads_its_options():
    assert build_task(TaskConfig(name="multiplication", multiplier_digits=3)).multiplier_digits == 3
    with pytest.raises(ValueError, match="task.multiplier_digits does not apply to task.name addition"):
        TaskConfig(name="addition", multiplier_digits=2)


@pytest.mark.parametrize("name", [n for n, t in TASKS.items() if t.constructible_complexity])
@pytest.mark.parametrize("leading_zeros", [True, False])
def test_questions_built_with_a_chosen_complexity_have_it(name, leading_zeros):
    task, rng = TASKS[name](), np.random.default_rng(3)
    for n in (1, 2, 7):
        levels = rng.choice(task.complexity_levels(n, leading_zeros), size=300)
        operands = task.sample_with_complexity(rng, levels, n, leading_zeros)
        assert np.array_equal(task.complexity(operands), levels)
        check_answers(task, tuple(o[:20] for o in operands), n)
        if not leading_zeros:
            assert all((o[:, -1] > 0).all() for o in operands)
