"""How a question and its answer are written as one token sequence.

Layout of one row (001 §2, App. E.1; 000 §3.1), e.g. addition, n = 3, reversed:

    <s> 0 8 5 + 0 5 0 = 5 3 1 0 </s>

Operands are zero-padded to n digits and written most significant digit first
(least significant first with `reverse_operands`, 001 App. B); the answer has
task.answer_digits(n) digits (one more than n, for the carry), written least
significant digit first when `reverse` is set (000 §3.1, 001 App. B). The loss is taken
on the answer digits and the end token only.

All rows built in one call share n, so the build is a handful of array
concatenations rather than a loop over questions.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lengthgen.config import FormatConfig
from lengthgen.tasks import Task
from lengthgen.tokenizer import CharTokenizer


@dataclass
class EncodedQuestions:
    """Token rows for questions of one operand length."""

    #: (Q, T) token ids: prompt, answer, end token
    tokens: np.ndarray
    #: number of leading tokens that form the prompt (through "=")
    prompt_length: int
    #: (Q, answer_length) answer digit token ids in written order
    answer: np.ndarray


def encode_questions(
    task: Task, operands: np.ndarray, fmt: FormatConfig, tokenizer: CharTokenizer
) -> EncodedQuestions:
    """operands: (Q, n_operands, n) LSD-first digits -> token rows."""
    questions = operands.shape[0]

    def column(symbol: str) -> np.ndarray:
        return np.full((questions, 1), tokenizer.id(symbol), dtype=np.int64)

    def written(digits: np.ndarray, least_significant_first: bool) -> np.ndarray:
        ordered = digits if least_significant_first else digits[:, ::-1]
        return ordered.astype(np.int64) + tokenizer.digit_offset

    pieces = [np.full((questions, 1), tokenizer.bos_id, dtype=np.int64)]
    for i in range(task.n_operands):
        if i:
            pieces.append(column(task.operator))
        pieces.append(written(operands[:, i], least_significant_first=fmt.reverse_operands))
    pieces.append(column("="))
    prompt_length = sum(p.shape[1] for p in pieces)

    answer = written(task.solve(operands), least_significant_first=fmt.reverse)
    pieces += [answer, np.full((questions, 1), tokenizer.eos_id, dtype=np.int64)]
    return EncodedQuestions(np.concatenate(pieces, axis=1), prompt_length, answer)


def sequence_length(task: Task, n_digits: int) -> int:
    """Tokens in one row for n-digit operands, start and end tokens included."""
    operators = task.n_operands - 1
    return 1 + task.n_operands * n_digits + operators + 1 + task.answer_digits(n_digits) + 1
