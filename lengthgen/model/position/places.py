"""The place of every digit in its number, read from token rows: what position
coupling (lengthgen.model.position.samplers.CoupledPositions) and Abacus embeddings
(lengthgen.model.position.abacus) index by.

Place 1 is a number's least significant digit, whatever order the number is
written in (format.reverse_operands for the operands, format.reverse for the
answer; InputLayout says which). Default format, 3-digit addition:

    tokens    <s> 0 8 5 + 0 5 0 = 5 3 1 0 </s>
    question   0  3 2 1 0 3 2 1 0
    answer                        1 2 3 4  (the answer's j-th token, j = 0 ..)

Question side, read from the tokens: a number is a maximal run of digits, index
hints and spaces (format.random_spaces puts spaces inside numbers); a digit's
place counts the digits of its run from the least significant end; a hint takes
the place of the digit it names (the one after it); every other token (start
token, operator, "=", space, fill symbol) has place 0.

Answer side, from the column alone: the answer's j-th token has the place
j // w + 1 when written least significant digit first, A - j // w when most
significant first (w = 2 with format.index_hints, a hint and its digit; A the
answer's digits, fixed by format.pad, which TrialConfig then requires). So the
places of an answer being generated never depend on tokens not yet written, and a
greedy decoder gets the places a teacher-forced pass gets. Token j = count (where
the end token stands) gets the place after the last digit in writing order: A + 1
(least significant first) or 0; every later column 0.

Coupled positions (model.coupled_answer) read one of two rows of these places, with
NONE (-1) for a token coupled with no place; default format, 3-digit addition:

    tokens           <s> 0 8 5 + 0 5 0 = 5 3 1 0 </s>
    own_place         -  3 2 1 0 3 2 1 0 1 2 3 4  -    (own_question_places, own_answer_places)
    predicted_place   -  3 2 1 - 3 2 1 1 2 3 4 5  -    (the answer's places one column early)

own_place: a digit or hint its own place, every other question token but the start
token and spaces (operators, "=") place 0. predicted_place: from "=" on the place of
the next token, and a place 0 is NONE.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from lengthgen.tokenizer import N_HINTS, SPACE, CharTokenizer

if TYPE_CHECKING:
    from lengthgen.layout import InputLayout

#: the one vocabulary of every trial (lengthgen.tokenizer)
TOKENS = CharTokenizer()
#: the place of a token that coupled positions couple with no digit (it gets ID 0)
NONE = -1


def is_digit(tokens: torch.Tensor) -> torch.Tensor:
    return (tokens >= TOKENS.digit_offset) & (tokens < TOKENS.digit_offset + 10)


def _is_hint(tokens: torch.Tensor) -> torch.Tensor:
    return (tokens >= TOKENS.hint_offset) & (tokens < TOKENS.hint_offset + N_HINTS)


def question_places(tokens: torch.Tensor, prompt_lengths: torch.Tensor, layout: InputLayout) -> torch.Tensor:
    """(B, T) long: the place of every digit and hint in the first P columns of each
    row (P = prompt_lengths), 0 for every other token and from column P on."""
    columns = torch.arange(tokens.shape[1], device=tokens.device)
    question = columns < prompt_lengths[:, None]
    digit = is_digit(tokens) & question
    hint = _is_hint(tokens) & question
    member = (digit | hint | (tokens == TOKENS.id(SPACE))) & question
    none = torch.zeros_like(member[:, :1])
    start = member & ~torch.cat([none, member[:, :-1]], dim=1)  # first column of a run
    end = member & ~torch.cat([member[:, 1:], none], dim=1)  # last column of a run
    counted = digit.long().cumsum(1)  # digits at or before each column
    before = counted - digit.long()  # digits strictly before
    if layout.operands_lsd_first:
        # digits of the run before the column, + 1: a digit's own place, a hint its digit's
        run_before = torch.where(start, before, 0).cummax(1).values  # carried right from the run's start
        places = before - run_before + 1
    else:
        # digits of the run at or after the column: a digit's own place, a hint its digit's
        never = torch.full_like(counted, tokens.shape[1] + 1)
        run_total = torch.where(end, counted, never).flip(1).cummin(1).values.flip(1)  # from the run's end
        places = run_total - before
    return torch.where(digit | hint, places, 0)


def answer_places(tokens: torch.Tensor, prompt_lengths: torch.Tensor, layout: InputLayout, width: int) -> torch.Tensor:
    """(B, width) long: the place of the j-th answer token of each row (column P + j),
    j = 0 .. width - 1, from j alone (and A); see the module docstring."""
    j, _, _, count = _answer_columns(tokens, prompt_lengths, width)
    cell = j // layout.answer_place_width
    if layout.answer_lsd_first:
        places = cell + 1
    else:
        digits = answer_digits(tokens, prompt_lengths, width)
        places = (digits[:, None] - cell).clamp(min=0)
    return torch.where(j <= count[:, None], places, 0)


def answer_digits(tokens: torch.Tensor, prompt_lengths: torch.Tensor, width: int) -> torch.Tensor:
    """(B,) A, the digits of each row's answer (in its first `width` columns, before the
    end token): fixed by format.pad where an answer is written most significant digit
    first, so it never depends on which digits a decoder has written yet."""
    j, written, inside, count = _answer_columns(tokens, prompt_lengths, width)
    return (is_digit(written) & inside & (j < count[:, None])).sum(1)


def equals_sign(tokens: torch.Tensor, prompt_lengths: torch.Tensor) -> torch.Tensor:
    """(B, T) bool: where the question's "=" stands (model.coupled_equals moves its place)."""
    columns = torch.arange(tokens.shape[1], device=tokens.device)
    return (tokens == TOKENS.id("=")) & (columns < prompt_lengths[:, None])


def _answer_columns(tokens: torch.Tensor, prompt_lengths: torch.Tensor, width: int):
    """The answer's columns j (1, W), their tokens (B, W), which lie inside the row
    (B, W), and the answer tokens before the end token of each row (B,)."""
    length = tokens.shape[1]
    j = torch.arange(width, device=tokens.device)[None, :]  # (1, W)
    columns = prompt_lengths[:, None] + j  # (B, W)
    inside = columns < length
    written = tokens.gather(1, columns.clamp(max=length - 1))
    ends = (written == TOKENS.eos_id) & inside
    count = torch.where(ends.any(1), ends.long().argmax(1), length - prompt_lengths)  # answer tokens before the end
    return j, written, inside, count


def own_question_places(tokens: torch.Tensor, prompt_lengths: torch.Tensor, layout: InputLayout) -> torch.Tensor:
    """(B, T) long, coupled_answer own_place: question_places, with place 0 for every
    question token but the start token, digits, hints and spaces (the operators and
    "="), NONE for the start token, spaces and from column P on."""
    columns = torch.arange(tokens.shape[1], device=tokens.device)
    question = columns < prompt_lengths[:, None]
    placed = (is_digit(tokens) | _is_hint(tokens)) & question
    # the start token, "<s>" or, with format.end_as_start, "</s>" at column 0 (an end token stands nowhere else there)
    start = (tokens == TOKENS.bos_id) | ((tokens == TOKENS.eos_id) & (columns == 0))
    operator = question & ~placed & ~start & (tokens != TOKENS.id(SPACE))
    places = question_places(tokens, prompt_lengths, layout)
    return torch.where(placed, places, torch.where(operator, 0, NONE))


def own_answer_places(tokens: torch.Tensor, prompt_lengths: torch.Tensor, layout: InputLayout,
                      width: int) -> torch.Tensor:
    """(B, width) long, coupled_answer own_place: answer_places before the end token,
    NONE from it on (the end token is coupled with no digit)."""
    j, _, _, count = _answer_columns(tokens, prompt_lengths, width)
    return torch.where(j < count[:, None], answer_places(tokens, prompt_lengths, layout, width), NONE)


def coupled(places: torch.Tensor) -> torch.Tensor:
    """coupled_answer predicted_place: a place 0 (no digit) becomes NONE."""
    return torch.where(places > 0, places, NONE)


def along_rows(question: torch.Tensor, answer: torch.Tensor, prompt_lengths: torch.Tensor, lead: int) -> torch.Tensor:
    """(B, T): question[:, t] before column P - lead, answer[:, t - P + lead] from there
    (lead 1: the token at t carries the place of the answer token it predicts)."""
    columns = torch.arange(question.shape[1], device=question.device)[None, :]
    j = columns - prompt_lengths[:, None] + lead
    from_answer = answer.gather(1, j.clamp(0, answer.shape[1] - 1))
    return torch.where(j >= 0, from_answer, question)


def reach(question: torch.Tensor) -> torch.Tensor:
    """(B,) the largest ID a token of each row can carry at the lowest start (0 with
    predicted_place, 1 with own_place), from its question places alone: the longest
    operand + 2. Every task coupled positions accept has answers at most one digit
    longer than its longest operand; with predicted_place the token that predicts the
    end carries the place after the answer's last digit (ID up to W + 2 at start 0),
    with own_place the answer's top digit its own (up to W + 1, at start 1)."""
    return question.max(1).values + 2
