"""Per-question sample records in answer places, not tokens: the carry into each
answer place (checked against Python integer arithmetic) and which places are wrong,
least significant place first, in every answer layout (issue 17, items 2 and 3)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from lengthgen import TrialConfig
from lengthgen.config import EvalConfig, FormatConfig, TaskConfig
from lengthgen.evaluation import _sample_records, answer_carries, build_eval_sets
from lengthgen.formats import answer_targets
from lengthgen.tasks import build_task
from lengthgen.tokenizer import HINTS, CharTokenizer

tokenizer = CharTokenizer()
FORMATS = {
    "reversed": FormatConfig(),
    "reversed, index hints": FormatConfig(index_hints=True),
    "standard": FormatConfig(reverse=False),
    "reversed, no padding": FormatConfig(pad=False),
    "standard, index hints, no padding": FormatConfig(reverse=False, index_hints=True, pad=False),
}


def carry_into(a: int, b: int, place: int) -> int:
    """Python integers: the carry into `place` of a + b."""
    return ((a % 10**place) + (b % 10**place)) // 10**place


def digits_of(values: list[int], n: int) -> np.ndarray:
    return np.array([[v // 10**i % 10 for i in range(n)] for v in values], dtype=np.int8)


@pytest.mark.parametrize("seed", range(5))
def test_carries_of_sums_successors_and_products_match_integer_arithmetic(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 12))
    a = [int(x) for x in rng.integers(0, 10**n, size=30)]
    b = [int(x) for x in rng.integers(0, 10**n, size=30)]
    a[0], b[0] = 10**n - 1, 1  # one carry through every place
    addition = build_task(TaskConfig(name="addition"))
    carries = answer_carries(addition, (digits_of(a, n), digits_of(b, n)))
    assert carries.shape == (30, n + 1)
    assert carries.tolist() == [[carry_into(x, y, p) for p in range(n + 1)] for x, y in zip(a, b)]
    successor = build_task(TaskConfig(name="successor"))
    carries = answer_carries(successor, (digits_of(a, n),))
    assert carries.tolist() == [[carry_into(x, 1, p) for p in range(n + 1)] for x in a]
    n_by_1 = build_task(TaskConfig(name="n_by_1"))
    m = [int(x) for x in rng.integers(1, 10, size=30)]
    carries = answer_carries(n_by_1, (digits_of(a, n), digits_of(m, 1)))
    assert carries.tolist() == [[(x % 10**p) * y // 10**p % 10 for p in range(n + 1)]
                                for x, y in zip(a, m)]
    assert answer_carries(build_task(TaskConfig(name="parity")), (digits_of(a, n) % 2,)) is None


def text(row) -> str:
    return tokenizer.decode(list(row), keep_specials=True)


def operands_of(question: str) -> tuple[int, int]:
    numbers = re.sub(f"[{HINTS}]", "", question[len("<s>"): question.index("=")]).split("+")
    return int(numbers[0]), int(numbers[1])


@pytest.mark.parametrize("name", FORMATS)
def test_records_name_wrong_places_and_carries_in_place_order(name: str) -> None:
    fmt = FORMATS[name]
    config = TrialConfig(task=TaskConfig(name="addition", train_digits=(1, 3)), format=fmt,
                         eval=EvalConfig(digits=(6,), samples=40))
    (eval_set,) = build_eval_sets(config, build_task(config.task), tokenizer)
    target = answer_targets(eval_set.questions, tokenizer)
    answer_length = target.shape[1] - 1
    predicted = target.copy()
    hinted = fmt.index_hints

    def column(row: int, place: int, hint: bool = False) -> int:
        """Token column of `place` (0 = units) of the row's answer, or of its hint."""
        digit_columns = [j for j, t in enumerate(target[row, :answer_length])
                         if tokenizer.digit_offset <= t < tokenizer.digit_offset + 10]
        k = place if fmt.reverse else len(digit_columns) - 1 - place
        return digit_columns[k] - (1 if hint else 0)

    def bump(row: int, col: int) -> None:
        predicted[row, col] = tokenizer.digit_offset + (predicted[row, col] - tokenizer.digit_offset + 1) % 10

    bump(1, column(1, 2))                    # the hundreds digit
    bump(2, column(2, 0))
    bump(2, column(2, 3))                    # units and thousands
    predicted[3, column(3, 4, hint=hinted) if fmt.reverse else column(3, 5, hint=hinted)] = \
        tokenizer.eos_id                     # ends early: the places it never wrote are wrong
    if hinted:
        predicted[4, column(4, 1, hint=True)] = tokenizer.hint_offset + 101  # a wrong hint only
        bump(5, column(5, 1))
        predicted[5, column(5, 1, hint=True)] = tokenizer.hint_offset + 101  # hint and digit: one place
    compared = target != tokenizer.pad_id
    mismatch = (predicted != target) & compared
    correct = ~mismatch.any(axis=1)
    records = _sample_records(eval_set, predicted, target, mismatch, correct, tokenizer)

    places = [len(r.wrong_places) for r in records]
    assert places == [len(re.sub(f"[{HINTS}]", "", r.target)) for r in records]
    assert records[0].correct and set(records[0].wrong_places) == {"0"}
    assert records[1].wrong_places == "".join("1" if p == 2 else "0" for p in range(places[1]))
    assert records[2].wrong_places == "".join("1" if p in (0, 3) else "0" for p in range(places[2]))
    stopped_at = 4 if fmt.reverse else 5  # written order: the places from the end token on
    early = [p >= stopped_at if fmt.reverse else p <= stopped_at for p in range(places[3])]
    assert records[3].wrong_places == "".join("1" if w else "0" for w in early)
    if hinted:
        assert records[4].wrong_places == "".join("1" if p == 1 else "0" for p in range(places[4]))
        assert records[5].wrong_places == records[4].wrong_places
        assert records[5].wrong_digits == 2  # the token count the old column keeps
    for record, row in zip(records, eval_set.questions.tokens):
        a, b = operands_of(text(row))
        assert record.carry_in == "".join(str(carry_into(a, b, p)) for p in range(len(record.wrong_places)))
