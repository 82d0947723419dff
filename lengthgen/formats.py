"""How a question and its answer are written as tokens (lengthgen.config.FormatConfig).

Sequential layout (decoder models), e.g. addition, n = 3, default format:

    <s>085+050=5310</s>

Operands are written most significant digit first (least significant first with
`reverse_operands`, 001 App. B), the answer least significant digit first with
`reverse` (000 §3.2, 001 App. B). The loss is taken on the answer tokens and the
end token only. The flags, each with its source and the choices made where the
source is silent:

- `pad` (000 §3.2 "we pad each operand with 0's to the left to a fixed length"; 001
  App. E.1 pads the answer to n + 1 digits): operands zero-padded to the question
  length n, the answer to task.answer_digits(n). With `pad` false numbers are
  written without leading zeros (at least one digit), and questions are drawn
  without them (an n-digit question has operands of exactly n digits,
  `leading_zeros`), so a question's written length still tells its length.
- `index_hints` (001 App. A.2 "42 + 39 = 81 is represented as a4b2 + a3b9 = a8b1",
  App. E.1): every digit, of the operands and of the answer, is preceded by a hint.
  The hints are a run of consecutive symbols of the ordered set of 102
  (lengthgen.tokenizer.HINTS), its start uniform per question, at training and at
  test time. Choice: the hint names the place value, so the digits of weight
  base^k in every operand and in the answer share hint HINTS[start + k] (what lets
  the model find the digits to combine); in the reversed formats the hints then
  appear in their order. The start is uniform on 0..102 - A, A = the answer's
  length, so at most 101-digit operands. The answer the model must write includes
  its hints; exact match compares the whole answer token sequence.
- `random_spaces` (001 Fig. 7, after Shen et al. 2023): at training only (an
  augmentation; test questions have none), each gap between two consecutive
  question symbols (between the start token and "="; a hint and its digit are two
  symbols) gets one space with
  probability RANDOM_SPACE_RATE = 0.5 (Shen et al. give no rate here; 1/2 makes the
  position of a digit vary the most).
- `interleave` (000 App. A.4, input alignment): "a_n..a_1 + b_n..b_1" becomes
  "+ a_n b_n ... a_1 b_1", and N x 1 "a_n..a_1 * b" becomes "* a_n b ... a_1 b".
  Binary tasks whose operands have equal length or one single digit, with `pad`.
- `shift_zeros` (003 §3.1 A3, §3.2 M3): at training only, the scaled operands (both
  addends; the multiplicand only) of each question get s zeros appended on the
  right, s uniform on 0..W - n, W the longest question length of the trial (003
  trains on "all shifted versions" within its fixed length); the shifted question
  is written as a question of length n + s, and its answer is computed exactly.
- `fixed_length` (003 §3, eq. 3.1-3.2), the aligned layout below.

Aligned layout (`fixed_length`, for models with one output per position):
every scaled operand is written most significant digit first, right-aligned in W
cells, W the longest question length of the trial; fixed operands (the multiplier)
keep their own length ("the multiplier is not padded"). The empty cells hold the
"pad" symbol "." (zeros with `pad`, which removes the spurious separator 003 §3.1
A2 blames for the 50-digit drop). The answer is aligned with the input: its
task.answer_digits(W) digits, right-aligned and filled the same way, are the
targets of the last answer_digits(W) input positions; the positions before carry
no loss ("_" in eq. 3.1). Example, addition, W = 5, `pad` false (003's 123 + 4095):

    tokens ..123+.4095   answer ..4218 (the targets of the last 6 positions, "+.4095")

and multiplication, k = 2: tokens 56*.4297, answer .240632 (003 eq. 3.2). A unary
task whose answer is longer than its question (successor) gets fill on the left.
An architecture finds the answer positions from `EncodedQuestions.aligned` and
`answer_positions()` (the last A columns); a training batch carries them as
`TrainingBatch.targets`; TrialConfig accepts fixed_length only for an architecture
whose registry entry has `aligned_outputs = True`.

Rows built in one call share their nominal length n, so building is a handful of
array operations, not a loop over questions; rows that differ in written length
(no padding, spaces, shifts) are compacted by one stable sort per array.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from lengthgen import digits
from lengthgen.layout import InputLayout
from lengthgen.tasks import Operands, Task
from lengthgen.tokenizer import FILL, N_HINTS, SPACE, CharTokenizer

if TYPE_CHECKING:
    from lengthgen.config import FormatConfig

RANDOM_SPACE_RATE = 0.5


@dataclass
class EncodedQuestions:
    """Token rows for questions of one nominal length."""

    #: (Q, T) token ids, right-padded with the pad id where rows differ in length.
    #: Sequential layout: prompt, answer, end token. Aligned layout: the question only.
    tokens: np.ndarray
    #: tokens of the prompt (through "="); all of T in the aligned layout. When rows
    #: differ, the longest (see prompt_lengths)
    prompt_length: int
    #: (Q, A) answer token ids in written order (hints included), right-padded with
    #: the pad id where rows differ; in the aligned layout, the targets of the last A
    #: positions of `tokens`
    answer: np.ndarray
    #: (Q,) prompt length of each row; None when all equal prompt_length
    prompt_lengths: np.ndarray | None = None
    #: (Q,) answer tokens of each row (end token excluded); None when all equal A
    answer_lengths: np.ndarray | None = None
    #: 003 §3 fixed-length layout: the model reads `tokens` and its outputs at the
    #: last A positions are the answer (no start or end token, nothing generated)
    aligned: bool = False

    def row_prompt_lengths(self) -> np.ndarray:
        if self.prompt_lengths is None:
            return np.full(len(self.tokens), self.prompt_length, dtype=np.int64)
        return self.prompt_lengths

    def row_answer_lengths(self) -> np.ndarray:
        if self.answer_lengths is None:
            return np.full(len(self.answer), self.answer.shape[1], dtype=np.int64)
        return self.answer_lengths

    def answer_positions(self) -> np.ndarray:
        """(A,) columns of `tokens` whose outputs are the answer (aligned layout)."""
        width = self.tokens.shape[1]
        return np.arange(width - self.answer.shape[1], width)


def answer_targets(questions: EncodedQuestions, tokenizer: CharTokenizer) -> np.ndarray:
    """What exact match compares: (Q, A + 1) answer tokens then the end token, then the
    pad id after a shorter answer's end (sequential layout); the answer itself
    (aligned layout). Positions holding the pad id are not compared."""
    if questions.aligned:
        return questions.answer
    rows, width = questions.answer.shape
    target = np.full((rows, width + 1), tokenizer.pad_id, dtype=np.int64)
    target[:, :width] = questions.answer
    target[np.arange(rows), questions.row_answer_lengths()] = tokenizer.eos_id
    return target


def answer_width(questions: EncodedQuestions) -> int:
    """Columns of a token row that carry the answer: A (aligned), A + 1 with the end token."""
    return questions.answer.shape[1] + (0 if questions.aligned else 1)


def leading_zeros(fmt: FormatConfig) -> bool:
    """Whether n-digit questions are drawn uniform over [0, base^n) (numbers padded by
    zeros or by the fixed-length pad symbol) or with exactly n digits (`pad` false)."""
    return fmt.pad or fmt.fixed_length


def encode_questions(
    task: Task,
    operands: Operands,
    fmt: FormatConfig,
    tokenizer: CharTokenizer,
    rng: np.random.Generator | None = None,
    *,
    training: bool = False,
    width: int | None = None,
) -> EncodedQuestions:
    """Operands of one nominal length n -> token rows.

    `rng` draws the hints, spaces and shifts (the data-seeded Generator at training,
    the eval-seeded one at evaluation); `training` enables the training-only
    augmentations (random_spaces, shift_zeros); `width` is W, the longest question
    length of the trial (needed by fixed_length and shift_zeros)."""
    needs_rng = fmt.index_hints or (training and (fmt.random_spaces or fmt.shift_zeros))
    if needs_rng and rng is None:
        raise ValueError("this format draws hints, spaces or shifts: pass the Generator `rng`")
    needs_width = fmt.fixed_length or (training and fmt.shift_zeros)
    if needs_width and width is None:
        raise ValueError("fixed_length and shift_zeros need `width`, the longest question length")
    n = task.scaled(operands)[0].shape[1]
    lengths = np.full(len(operands[0]), n, dtype=np.int64)
    if training and fmt.shift_zeros:
        operands, lengths = shift_by_zeros(task, operands, rng, width)
    if fmt.fixed_length:
        return _aligned(task, operands, fmt, tokenizer, width)
    return _sequential(task, operands, lengths, fmt, tokenizer, rng, training)


def shift_by_zeros(
    task: Task, operands: Operands, rng: np.random.Generator, width: int
) -> tuple[Operands, np.ndarray]:
    """003 A3/M3: append s ~ U{0..width - n} zeros to the scaled operands of each
    question -> (operands of width `width`, (Q,) new question lengths n + s)."""
    n = task.scaled(operands)[0].shape[1]
    shift = rng.integers(0, width - n + 1, size=len(operands[0]))
    source = np.arange(width)[None, :] - shift[:, None]  # (Q, W) digit read from
    inside = (source >= 0) & (source < n)

    def shifted(operand: np.ndarray) -> np.ndarray:
        moved = np.take_along_axis(operand, np.clip(source, 0, n - 1), axis=1)
        return np.where(inside, moved, 0).astype(digits.DIGIT_DTYPE)

    return tuple(shifted(o) if s else o for o, s in zip(operands, task.scales)), n + shift


def _written_widths(task: Task, numbers: list[np.ndarray], lengths: np.ndarray, pad: bool) -> list[np.ndarray]:
    """(Q,) digits written for each operand and the answer."""
    if not pad:
        widths = [digits.significant_digits(number) for number in numbers]
        if not task.answer_is_number:  # a scratchpad keeps every digit
            widths[-1] = np.asarray(task.answer_digits(lengths))
        return widths
    fixed = iter(task.fixed_digits())
    widths = [lengths if s else np.full_like(lengths, next(fixed)) for s in task.scales]
    return widths + [np.asarray(task.answer_digits(lengths))]


def _number_cells(
    number: np.ndarray, width: np.ndarray, lsd_first: bool, hints: np.ndarray | None, tokenizer: CharTokenizer
) -> tuple[np.ndarray, np.ndarray]:
    """One number as (Q, L, c) token cells and (Q, L) keep mask, in written order;
    c = 2 (hint, digit) with hints, else 1."""
    place = np.arange(number.shape[1])[None, :]
    cells = (number.astype(np.int64) + tokenizer.digit_offset)[:, :, None]
    if hints is not None:
        hint_ids = tokenizer.hint_offset + hints[:, None] + place
        cells = np.concatenate([hint_ids[:, :, None], cells], axis=2)
    keep = place < width[:, None]
    if not lsd_first:
        cells, keep = cells[:, ::-1], keep[:, ::-1]
    return cells, keep


def _flat(cells: np.ndarray, keep: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    rows, places, per_cell = cells.shape
    return cells.reshape(rows, places * per_cell), np.repeat(keep, per_cell, axis=1)


def _symbol(tokenizer: CharTokenizer, symbol_id: int, rows: int) -> tuple[np.ndarray, np.ndarray]:
    return np.full((rows, 1), symbol_id, dtype=np.int64), np.ones((rows, 1), dtype=bool)


def _compact(parts: list[tuple[np.ndarray, np.ndarray]], pad_id: int) -> tuple[np.ndarray, np.ndarray]:
    """Concatenate (tokens, keep) parts and drop the cells not kept, row by row:
    -> (Q, longest) tokens right-padded with pad_id, (Q,) lengths."""
    tokens = np.concatenate([p[0] for p in parts], axis=1)
    keep = np.concatenate([p[1] for p in parts], axis=1)
    lengths = keep.sum(axis=1)
    if keep.all():
        return tokens, lengths
    order = np.argsort(~keep, axis=1, kind="stable")  # kept cells first, in order
    tokens = np.take_along_axis(tokens, order, axis=1)[:, : lengths.max()]
    tokens[np.arange(tokens.shape[1])[None, :] >= lengths[:, None]] = pad_id
    return tokens, lengths


def _question_parts(task, operands, widths, fmt, tokenizer, hints) -> list[tuple[np.ndarray, np.ndarray]]:
    rows = len(operands[0])
    blocks = [
        _number_cells(o, w, fmt.reverse_operands, hints, tokenizer) for o, w in zip(operands, widths)
    ]
    operator = _symbol(tokenizer, tokenizer.id(task.operator), rows) if task.operator else None
    if pairs_places(task, fmt):  # 000 App. A.4: "+ a_n b_n ... a_1 b_1", "* a_n b ... a_1 b"
        (first, first_keep), (second, second_keep) = blocks
        if first.shape[1] < second.shape[1]:  # the long operand leads
            (first, first_keep), (second, second_keep) = (second, second_keep), (first, first_keep)
        places = first.shape[1]
        second = np.broadcast_to(second, first.shape)
        second_keep = np.broadcast_to(second_keep, first_keep.shape)
        cells = np.stack([first, second], axis=2).reshape(rows, 2 * places, -1)
        keep = np.stack([first_keep, second_keep], axis=2).reshape(rows, 2 * places)
        return [operator, _flat(cells, keep)]
    parts = []
    for i, block in enumerate(blocks):
        if i:
            parts.append(operator)
        parts.append(_flat(*block))
    return parts


def _with_random_spaces(question: np.ndarray, lengths: np.ndarray, rng, tokenizer, first: int = 1) -> tuple:
    """A space in each gap between question symbols (after the start token, before
    "=") with probability RANDOM_SPACE_RATE; question is (Q, P) compacted, its first
    symbol at column `first` (0 without a start token)."""
    rows, width = question.shape
    gap = np.arange(width)[None, :]
    # gap j follows symbol j: symbols are columns first .. length-2 ("=" is length-1)
    spaced = (rng.random((rows, width)) < RANDOM_SPACE_RATE) & (gap >= first) & (gap <= lengths[:, None] - 3)
    tokens = np.stack([question, np.full_like(question, tokenizer.id(SPACE))], axis=2).reshape(rows, 2 * width)
    keep = np.stack([gap < lengths[:, None], spaced], axis=2).reshape(rows, 2 * width)
    return _compact([(tokens, keep)], tokenizer.pad_id)


def _sequential(task, operands, lengths, fmt, tokenizer, rng, training) -> EncodedQuestions:
    rows = len(operands[0])
    answer = task.solve(operands)
    widths = _written_widths(task, list(operands) + [answer], lengths, fmt.pad)
    hints = None
    if fmt.index_hints:  # one start per question, the run covering every place used
        places = np.asarray(task.answer_digits(lengths))
        hints = rng.integers(0, N_HINTS - places + 1, size=rows)
    written = operands
    if fmt.pad_overflow:  # one more zero on each operand of the question's length
        written = tuple(np.pad(o, ((0, 0), (0, 1))) if scaled else o for o, scaled in zip(operands, task.scales))
        widths = [w + 1 if scaled else w for w, scaled in zip(widths[:-1], task.scales)] + widths[-1:]
    opening = tokenizer.eos_id if fmt.end_as_start else tokenizer.bos_id  # Cho et al. 2024's bos_to_eos
    start = [_symbol(tokenizer, opening, rows)] if fmt.start_token else []
    equals = _symbol(tokenizer, tokenizer.id("="), rows)
    question, prompt_lengths = _compact(
        [*start, *_question_parts(task, written, widths[:-1], fmt, tokenizer, hints), equals], tokenizer.pad_id
    )
    if training and fmt.random_spaces:
        question, prompt_lengths = _with_random_spaces(question, prompt_lengths, rng, tokenizer, len(start))
    answer_tokens, answer_lengths = _compact(
        [_flat(*_number_cells(answer, widths[-1], fmt.reverse, hints, tokenizer))], tokenizer.pad_id
    )
    end = _symbol(tokenizer, tokenizer.eos_id, rows)
    prompt_keep = np.arange(question.shape[1])[None, :] < prompt_lengths[:, None]
    answer_keep = np.arange(answer_tokens.shape[1])[None, :] < answer_lengths[:, None]
    tokens, _ = _compact([(question, prompt_keep), (answer_tokens, answer_keep), end], tokenizer.pad_id)
    uniform_prompt = bool((prompt_lengths == prompt_lengths[0]).all())
    uniform_answer = bool((answer_lengths == answer_lengths[0]).all())
    return EncodedQuestions(
        tokens=tokens,
        prompt_length=int(prompt_lengths.max()),
        answer=answer_tokens,
        prompt_lengths=None if uniform_prompt else prompt_lengths,
        answer_lengths=None if uniform_answer else answer_lengths,
    )


def _aligned_field(number: np.ndarray, cells: int, fill_id: int, fill: bool, tokenizer) -> np.ndarray:
    """(Q, cells) tokens: the number MSD first, right-aligned; with `fill`, the cells
    left of its leading digit hold the fill symbol, else zeros."""
    rows, width = number.shape
    if width > cells:
        if np.any(number[:, cells:]):
            raise ValueError(f"a {width}-digit number does not fit in {cells} cells")
        number = number[:, :cells]
    padded = np.zeros((rows, cells), dtype=np.int64)
    padded[:, : number.shape[1]] = number
    tokens = (padded + tokenizer.digit_offset)[:, ::-1]
    if fill:
        significant = digits.significant_digits(padded)
        empty = np.arange(cells)[None, :] < (cells - significant)[:, None]
        tokens = np.where(empty, fill_id, tokens)
    return tokens


def _zero_extended(operands, cells) -> tuple[np.ndarray, ...]:
    """Each operand (least significant digit first) with zeros up to its field's cells.
    A scratchpad (parity's running parity) runs on through the zero cells of the input
    field: solved on the question's own digits alone, it would restart at 0 there, and
    two questions with the same padded input (01 and 001) would have different targets."""
    return tuple(np.pad(o, ((0, 0), (0, int(c) - o.shape[1]))) for o, c in zip(operands, cells, strict=True))


def _aligned(task, operands, fmt, tokenizer, width) -> EncodedQuestions:
    n = task.scaled(operands)[0].shape[1]
    if n > width:
        raise ValueError(f"{n}-digit questions do not fit the fixed length {width}")
    rows = len(operands[0])
    fill_id = tokenizer.id(FILL)
    fields = [
        _aligned_field(o, cells, fill_id, not fmt.pad, tokenizer)
        for o, cells in zip(operands, task.operand_digits(width))
    ]
    parts = []
    for i, field in enumerate(fields):
        if i:
            parts.append(np.full((rows, 1), tokenizer.id(task.operator), dtype=np.int64))
        parts.append(field)
    question = np.concatenate(parts, axis=1)
    answer_cells = int(task.answer_digits(width))
    if question.shape[1] < answer_cells:  # a unary task: fill on the left
        fill = np.full((rows, answer_cells - question.shape[1]), tokenizer.digit_offset if fmt.pad else fill_id)
        question = np.concatenate([fill, question], axis=1)
    fill_answer = not fmt.pad and task.answer_is_number
    solved = task.solve(_zero_extended(operands, task.operand_digits(width)) if fmt.pad and not
                        task.answer_is_number else operands)
    answer = _aligned_field(solved, answer_cells, fill_id, fill_answer, tokenizer)
    return EncodedQuestions(tokens=question, prompt_length=question.shape[1], answer=answer, aligned=True)


def input_layout(task: Task, fmt: FormatConfig, width: int) -> InputLayout:
    """Where the digits of a question sit, for the model: places of one token (two,
    "a_i b_i", with `interleave`, after the leading operator), in the aligned layout
    the columns of the fixed operands' digits (the multiplier, for UPE), and which end
    of each number its places count from (coupled positions, Abacus embeddings)."""
    uniform: list[int] = []
    if fmt.fixed_length:
        cells = task.operand_digits(width)
        column = max(0, int(task.answer_digits(width)) - (sum(cells) + len(cells) - 1))  # fill on the left
        for i, (length, scaled) in enumerate(zip(cells, task.scales)):
            column += 1 if i else 0  # the operator
            if not scaled:
                uniform += range(column, column + length)
            column += length
    paired = pairs_places(task, fmt)
    return InputLayout(
        place_width=2 if paired else 1, lead=1 if paired else 0, uniform_columns=tuple(uniform),
        operands_lsd_first=fmt.reverse_operands, answer_lsd_first=fmt.reverse,
        answer_place_width=2 if fmt.index_hints else 1,
    )


def pairs_places(task: Task, fmt: FormatConfig) -> bool:
    """Whether the question is written as place pairs "a_i b_i" (`interleave`). A
    one-operand task is already aligned with its answer, so `interleave` leaves it
    as it is: one study can cross unary and binary tasks with the same format."""
    return fmt.interleave and task.n_operands == 2


def sequence_length(task: Task, n_digits: int, fmt: FormatConfig, *, training: bool = False,
                    width: int | None = None) -> int:
    """The longest row for n-digit questions, start (format.start_token) and end tokens included."""
    if fmt.fixed_length:
        cells = task.operand_digits(width)
        return max(sum(cells) + len(cells) - 1, int(task.answer_digits(width)))
    if training and fmt.shift_zeros:
        n_digits = width
    per_digit = 2 if fmt.index_hints else 1
    operand_cells = task.operand_digits(n_digits)
    if pairs_places(task, fmt):
        symbols = 1 + 2 * max(operand_cells) * per_digit
    else:
        symbols = per_digit * (sum(operand_cells) + fmt.pad_overflow * sum(task.scales))
        symbols += (len(operand_cells) - 1) * bool(task.operator)
    if training and fmt.random_spaces:
        symbols += symbols - 1
    return int(fmt.start_token) + symbols + 1 + per_digit * int(task.answer_digits(n_digits)) + 1


def check_format(fmt: FormatConfig, task: Task, longest: int) -> None:
    """Refuse combinations that cannot work, naming the field (ValueError).
    `longest`: the longest question length of the trial."""
    if fmt.pad_overflow and (not fmt.pad or fmt.fixed_length or fmt.interleave):
        raise ValueError("format.pad_overflow writes one more zero before every padded operand (Cho et al. "
                         "2024's paper-era code); it needs format.pad: true, and neither format.fixed_length "
                         "nor format.interleave, which place the digits themselves")
    if fmt.end_as_start and (fmt.fixed_length or not fmt.start_token):
        raise ValueError("format.end_as_start writes the end token in the start token's place of a sequential "
                         "row; with format.start_token: false or format.fixed_length (aligned rows) a row has no "
                         "start token: remove format.end_as_start")
    if fmt.fixed_length and not fmt.start_token:
        raise ValueError("format.start_token: false removes the start token of a sequential row; "
                         "format.fixed_length's aligned rows have none: remove format.start_token")
    if fmt.fixed_length:
        for flag in ("reverse", "reverse_operands", "index_hints", "random_spaces", "interleave"):
            if getattr(fmt, flag):
                raise ValueError(
                    f"format.fixed_length aligns the answer under the operands, most significant digit "
                    f"first (003 eq. 3.1), and cannot be combined with format.{flag}: set it to false"
                )
    if fmt.interleave:
        if task.n_operands == 2 and not (all(task.scales) or task.fixed_digits() == (1,)):
            raise ValueError(
                f"format.interleave pairs the digits of two operands of equal length, or repeats a "
                f"one-digit operand (000 App. A.4), and leaves one operand as it is; task.name {task.name} has operand lengths "
                f"{task.operand_digits(longest)}"
            )
        if not fmt.pad:
            raise ValueError("format.interleave aligns digits by place value and needs format.pad: true")
        if fmt.index_hints:
            raise ValueError("format.interleave and format.index_hints both align digits: choose one")
    if fmt.shift_zeros and not task.shift_equivariant:
        raise ValueError(
            f"format.shift_zeros appends zeros to the operands (003 A3, M3), which shifts the answer "
            f"only for addition and multiplication; task.name {task.name} does not shift"
        )
    if fmt.index_hints and task.answer_digits(longest) > N_HINTS:
        raise ValueError(
            f"format.index_hints has {N_HINTS} hint symbols (001 App. E.1), fewer than the "
            f"{task.answer_digits(longest)} answer digits of {longest}-digit questions: shorten "
            f"eval.digits or task.train_digits"
        )
