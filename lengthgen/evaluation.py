"""Evaluation: fixed questions per test length, greedy decoding, exact match.

The questions of length n are drawn from a Generator seeded by (seeds.eval, n)
alone, so every trial of a study with the same eval seed answers the same
questions. A question counts as right only when the greedy answer matches every
answer digit and then ends (the end token) exactly where the target ends.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from lengthgen.config import TrialConfig
from lengthgen.distributions import DISTRIBUTIONS, TEST_QUESTIONS
from lengthgen.formats import EncodedQuestions, answer_targets, encode_questions, leading_zeros
from lengthgen.model.base import Architecture, Positions, rows_of
from lengthgen.model.position.samplers import PositionSampler
from lengthgen.tasks import Task
from lengthgen.tokenizer import N_HINTS, CharTokenizer


@dataclass
class EvalSet:
    digits: int
    questions: EncodedQuestions
    #: (Q,) complexity of each question, Task.complexity: the carry-cascade length of
    #: sums, the dependency level of products (003 §4, App. C.4), parity's one-bits
    cascade: np.ndarray
    #: (Q, P) carry into each answer place, least significant place first
    #: (answer_carries); None when the answer is not a number
    carry_in: np.ndarray | None = None
    #: the answer is written least significant digit first (format.reverse)
    lsd_first: bool = True


@dataclass
class LengthResult:
    digits: int
    n: int
    correct: int
    accuracy: float
    in_distribution: bool


@dataclass
class SampleRecord:
    digits: int
    idx: int
    cascade: int
    correct: bool
    #: answer positions (in written order) whose predicted token differs from the target
    wrong_digits: int
    #: written-order index of the first wrong token; len(target) when only the end is wrong
    first_wrong: int | None
    #: answer as written (least significant digit first when format.reverse)
    target: str
    prediction: str
    #: one character per answer place, least significant place first: the carry into
    #: the place from the places below it, as a digit (answer_carries); None when the
    #: answer is not a number (parity)
    carry_in: str | None
    #: one character per answer place, least significant place first: "1" where the
    #: place is wrong (its digit or, with index hints, its hint differs from the target,
    #: or the prediction ended before it), else "0"
    wrong_places: str


def build_eval_sets(config: TrialConfig, task: Task, tokenizer: CharTokenizer) -> list[EvalSet]:
    """The test questions of each length, from a Generator seeded by (seeds.eval, n)
    alone (operands, then hints); a distribution with a finite training pool keeps
    its training numbers out (lengthgen.distributions.UniformOperands)."""
    distribution = DISTRIBUTIONS[config.data.distribution]()
    questions_of = TEST_QUESTIONS[config.eval.questions]()
    sets = []
    for n in config.eval.digits:
        rng = np.random.default_rng([config.seeds.eval, n])
        operands = questions_of.operands(
            distribution, task, rng, config.eval.samples, n, config.task.train_digits, leading_zeros(config.format)
        )
        questions = encode_questions(task, operands, config.format, tokenizer, rng, width=config.longest_digits)
        if questions.prompt_lengths is not None:
            raise ValueError(f"the {n}-digit test prompts differ in length; greedy decoding needs one length")
        sets.append(EvalSet(n, questions, task.complexity(operands), answer_carries(task, operands),
                            lsd_first=config.format.reverse))
    return sets


def _as_positions(positions: torch.Tensor | Positions) -> Positions:
    return (positions,) if isinstance(positions, torch.Tensor) else tuple(positions)


def greedy_decode(
    model: Architecture, prompts: torch.Tensor, new_tokens: int, positions: torch.Tensor | Positions,
    use_cache: bool = True,
) -> torch.Tensor:
    """Append `new_tokens` argmax tokens to equal-length prompts (B, P) -> (B, new_tokens),
    with the positions `model.sample_positions` gave the whole rows (a bare tensor for
    the decoder), fixed up front (Architecture.greedy_decode)."""
    return model.greedy_decode(prompts, new_tokens, _as_positions(positions), use_cache)


def teacher_forced_argmax(
    model: Architecture, tokens: torch.Tensor, positions: torch.Tensor | Positions, answer_start: int
) -> torch.Tensor:
    """Argmax prediction of every answer token given the true prefix, in one forward
    pass: (B, T) -> (B, T - answer_start). A question is answered exactly by greedy
    decoding if and only if all of these equal the target: the first wrong argmax is
    where greedy decoding would first leave the target, on the same prefix."""
    return model.teacher_forced_argmax(tokens, _as_positions(positions), answer_start)


def eval_generator(config: TrialConfig, n_digits: int, stream: int = 1) -> torch.Generator:
    """Torch randomness of the evaluation at one length, from the eval seed only: stream
    1 the position sampling, stream 3 the noise of model.state_init noise."""
    seed = np.random.SeedSequence([config.seeds.eval, n_digits, stream]).generate_state(1)[0]
    return torch.Generator().manual_seed(int(seed))


def evaluate(
    model: Architecture,
    eval_sets: list[EvalSet],
    config: TrialConfig,
    tokenizer: CharTokenizer,
    positions: PositionSampler,
    device: torch.device,
    with_samples: bool,
) -> tuple[list[LengthResult], list[SampleRecord]]:
    was_training = model.training
    model.eval()
    results: list[LengthResult] = []
    samples: list[SampleRecord] = []
    for eval_set in eval_sets:
        questions = eval_set.questions
        tokens = torch.from_numpy(questions.tokens).to(device)
        target = answer_targets(questions, tokenizer)  # the answer and the end token (aligned: the answer)
        answer_start = tokens.shape[1] - target.shape[1]
        compared = target != tokenizer.pad_id  # a shorter answer (format.pad false) ends early
        prompt_lengths = torch.full((len(tokens),), questions.prompt_length, dtype=torch.long, device=device)
        all_positions = model.sample_positions(
            tokens, prompt_lengths, positions, eval_generator(config, eval_set.digits), training=False
        )
        with model.noise_from(eval_generator(config, eval_set.digits, stream=3)):
            predicted = _predictions(model, tokens, target, compared, all_positions, answer_start,
                                     config.eval.batch_size, with_samples)
        mismatch = (predicted != target) & compared  # (Q, answer + 1)
        correct = ~mismatch.any(axis=1)
        results.append(
            LengthResult(
                digits=eval_set.digits,
                n=len(correct),
                correct=int(correct.sum()),
                accuracy=float(correct.mean()),
                in_distribution=config.in_distribution(eval_set.digits),
            )
        )
        if with_samples:
            samples += _sample_records(eval_set, predicted, target, mismatch, correct, tokenizer)
    model.train(was_training)
    return results, samples


def _predictions(model: Architecture, tokens: torch.Tensor, target: np.ndarray, compared: np.ndarray,
                 all_positions, answer_start: int, batch_size: int, with_samples: bool) -> np.ndarray:
    """The model's answer to every question (Q, answer + 1): exact match in one
    teacher-forced pass; greedy decoding only for the wrong answers, and only when
    their predictions are recorded (an aligned model's one pass is already its answer).
    A model whose forward draws noise (model.state_init noise) decodes every question,
    as its one pass is not its answer."""
    if model.stochastic:
        return np.concatenate([
            greedy_decode(model, tokens[a:b, :answer_start], target.shape[1],
                          rows_of(all_positions, slice(a, b))).cpu().numpy()
            for a, b in _chunks(len(tokens), batch_size)
        ])
    predicted = np.concatenate([
        teacher_forced_argmax(model, tokens[a:b], rows_of(all_positions, slice(a, b)), answer_start).cpu().numpy()
        for a, b in _chunks(len(tokens), batch_size)
    ])
    if with_samples and not model.aligned_outputs:
        wrong = torch.from_numpy(np.flatnonzero(((predicted != target) & compared).any(axis=1)))
        for a, b in _chunks(len(wrong), batch_size):
            rows = wrong[a:b].to(tokens.device)
            predicted[rows.cpu().numpy()] = greedy_decode(
                model, tokens[rows, :answer_start], target.shape[1], rows_of(all_positions, rows)
            ).cpu().numpy()
    return predicted


def _chunks(total: int, size: int) -> list[tuple[int, int]]:
    return [(start, min(start + size, total)) for start in range(0, total, size)]


def answer_carries(task: Task, operands: tuple[np.ndarray, ...]) -> np.ndarray | None:
    """(Q, P) carry into each of the P answer places from the places below it, least
    significant place first: (answer digit - the same digit when every digit of the
    scaled operands below the place is 0) mod base. For a sum that is the carry, 0 or 1
    (001 Fig. 9); for a successor the carry of x + 1; for a product the carry of long
    multiplication (mod base). None when the answer is not a number (parity)."""
    if not task.answer_is_number:
        return None
    answer = task.solve(operands).astype(np.int64)
    n = task.scaled(operands)[0].shape[1]
    carries = np.zeros_like(answer)
    for place in range(1, answer.shape[1]):
        cut = []
        for operand, scaled in zip(operands, task.scales):
            if scaled:
                operand = operand.copy()
                operand[:, : min(place, n)] = 0
            cut.append(operand)
        carries[:, place] = (answer[:, place] - task.solve(tuple(cut))[:, place]) % task.base
    return carries


def _wrong_places(eval_set, predicted, target, mismatch, tokenizer, answer_length) -> list[np.ndarray]:
    """Per question, (L,) whether each of its L answer places is wrong, least significant
    place first. A place is its digit token (or fill symbol) and, with index hints, the
    hint token before it; it is wrong when one of them differs from the target or the
    prediction ended (its end token) before it."""
    answer = np.zeros(target.shape, dtype=bool)
    answer[:, :answer_length] = True
    answer &= (target != tokenizer.pad_id) & (target != tokenizer.eos_id)
    hint = np.zeros(target.shape, dtype=bool)
    if tokenizer.hint_offset is not None:
        hint = (target >= tokenizer.hint_offset) & (target < tokenizer.hint_offset + N_HINTS)
    closes = answer & ~hint  # the token that ends a place: its digit
    place_of = np.cumsum(closes, axis=1) - closes  # hint and digit of one place share it
    stopped = np.zeros(target.shape, dtype=bool)
    if not eval_set.questions.aligned:
        stopped = np.cumsum(predicted == tokenizer.eos_id, axis=1) > 0
    wrong = (mismatch | stopped) & answer
    lsd_first = eval_set.lsd_first and not eval_set.questions.aligned
    rows = []
    for i in range(len(target)):
        places = np.zeros(int(closes[i].sum()), dtype=bool)
        np.logical_or.at(places, place_of[i][answer[i]], wrong[i][answer[i]])
        rows.append(places if lsd_first else places[::-1])
    return rows


def _sample_records(eval_set, predicted, target, mismatch, correct, tokenizer) -> list[SampleRecord]:
    aligned = eval_set.questions.aligned
    answer_length = target.shape[1] if aligned else target.shape[1] - 1  # aligned answers have no end token
    wrong_digits = mismatch[:, :answer_length].sum(axis=1)
    first_wrong = mismatch.argmax(axis=1)
    wrong_places = _wrong_places(eval_set, predicted, target, mismatch, tokenizer, answer_length)
    records = []
    for i in range(len(target)):
        row = predicted[i].tolist()
        ended = row.index(tokenizer.eos_id) if tokenizer.eos_id in row and not aligned else len(row)
        places = len(wrong_places[i])
        carry_in = None
        if eval_set.carry_in is not None:  # the written places: fewer without padding, more when aligned
            carries = eval_set.carry_in[i, :places]
            carry_in = "".join(map(str, carries.tolist())) + "0" * (places - len(carries))
        records.append(
            SampleRecord(
                digits=eval_set.digits,
                idx=i,
                cascade=int(eval_set.cascade[i]),
                correct=bool(correct[i]),
                wrong_digits=int(wrong_digits[i]),
                first_wrong=None if correct[i] else int(first_wrong[i]),
                target=tokenizer.decode(target[i, :answer_length].tolist()),
                prediction=tokenizer.decode(row[:ended]),
                carry_in=carry_in,
                wrong_places="".join("1" if wrong else "0" for wrong in wrong_places[i]),
            )
        )
    return records


def summarize(results: list[LengthResult]) -> dict[str, float]:
    """Summary metrics of one evaluation: mean in-distribution accuracy, mean
    out-of-distribution accuracy, and the longest tested length with >= 99 %."""
    inside = [r.accuracy for r in results if r.in_distribution]
    outside = [r.accuracy for r in results if not r.in_distribution]
    passing = [r.digits for r in results if r.accuracy >= 0.99]
    return {
        "in_distribution_accuracy": float(np.mean(inside)) if inside else float("nan"),
        "ood_accuracy_mean": float(np.mean(outside)) if outside else float("nan"),
        "longest_99": float(max(passing, default=0)),
    }
