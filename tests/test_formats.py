"""Tokenizer round trip and the exact layout of a question."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from lengthgen import digits
from lengthgen.config import FormatConfig
from lengthgen.formats import encode_questions, sequence_length
from lengthgen.tasks import TASKS
from lengthgen.tokenizer import CHARACTERS, CharTokenizer

tokenizer = CharTokenizer()


@given(st.text(alphabet=CHARACTERS, max_size=300))
def test_tokenizer_round_trip(text):
    assert tokenizer.decode(tokenizer.encode(text, bos=True, eos=True)) == text


def test_tokenizer_refuses_unknown_characters():
    with pytest.raises(ValueError, match="not in the vocabulary"):
        tokenizer.encode("12a")


def _addition(a: int, b: int, n: int, reverse: bool):
    operands = np.stack([digits.from_int(a, n), digits.from_int(b, n)])[None]
    return encode_questions(TASKS["addition"](), operands, FormatConfig(reverse=reverse), tokenizer)


def test_reversed_addition_layout():
    encoded = _addition(85, 50, 3, reverse=True)
    assert tokenizer.decode(encoded.tokens[0].tolist(), keep_specials=True) == "<s>085+050=5310</s>"
    assert encoded.prompt_length == len("<s>") // 3 + len("085+050=")


def test_standard_addition_layout():
    encoded = _addition(85, 50, 3, reverse=False)
    assert tokenizer.decode(encoded.tokens[0].tolist(), keep_specials=True) == "<s>085+050=0135</s>"


def test_successor_layout():
    operands = digits.from_int(199, 3)[None, None]
    encoded = encode_questions(TASKS["successor"](), operands, FormatConfig(reverse=True), tokenizer)
    assert tokenizer.decode(encoded.tokens[0].tolist(), keep_specials=True) == "<s>199=0020</s>"


@pytest.mark.parametrize("task", sorted(TASKS))
@pytest.mark.parametrize("n", [1, 7, 40])
def test_sequence_length_matches_encoding(task, n):
    instance = TASKS[task]()
    operands = instance.sample_operands(np.random.default_rng(0), 3, n)
    encoded = encode_questions(instance, operands, FormatConfig(), tokenizer)
    assert encoded.tokens.shape == (3, sequence_length(instance, n))


def test_fully_reversed_addition_layout_of_001_appendix_b():
    operands = np.stack([digits.from_int(85, 3), digits.from_int(50, 3)])[None]
    fmt = FormatConfig(reverse=True, reverse_operands=True)
    encoded = encode_questions(TASKS["addition"](), operands, fmt, tokenizer)
    assert tokenizer.decode(encoded.tokens[0].tolist(), keep_specials=True) == "<s>580+050=5310</s>"
