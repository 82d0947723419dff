"""Training distributions: which questions a training batch holds.

Each distribution draws with the numpy Generator it is given and nothing else;
the trainer seeds that Generator from `seeds.data` and the step number only.
`leading_zeros` (lengthgen.formats.leading_zeros) says whether an n-digit operand
is uniform over [0, base^n) or has exactly n digits (format.pad false).

003's "uniform distribution over D_s" (all pairs below 10^l_s) is uniform_length
with task.train_digits = [l_s, l_s]: zero-padded uniform digits.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from functools import lru_cache
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from lengthgen import digits
from lengthgen.complexity import MAX_CASCADE_DIGITS
from lengthgen.formats import leading_zeros
from lengthgen.tasks import TASKS, Operands, Task

if TYPE_CHECKING:
    from lengthgen.config import TrialConfig

#: operands of a batch grouped by question length n
Groups = dict[int, Operands]


class Distribution(ABC):
    name: ClassVar[str]
    #: the training set is a finite pool that the test questions must stay out of
    excludes_training_numbers: ClassVar[bool] = False
    #: DataConfig fields only this distribution reads (passed to its constructor; refused
    #: on the others: lengthgen.config.refuse_unread_options)
    options: ClassVar[tuple[str, ...]] = ()

    @abstractmethod
    def sample(
        self,
        task: Task,
        rng: np.random.Generator,
        questions: int,
        digit_range: tuple[int, int],
        leading_zeros: bool = True,
    ) -> Groups:
        """Operands for `questions` questions grouped by length n, {n: operands}, the
        group sizes summing to `questions`."""

    def eval_operands(
        self,
        task: Task,
        rng: np.random.Generator,
        questions: int,
        n_digits: int,
        digit_range: tuple[int, int],
        leading_zeros: bool = True,
    ) -> Operands:
        """The test questions of length n (uniform; a distribution whose training set is
        a finite pool excludes it, so that no test question was trained on)."""
        return task.sample_operands(rng, questions, n_digits, leading_zeros)

    def longest_digits(self, task: Task, digit_range: tuple[int, int]) -> int:
        """The longest question length this distribution trains on."""
        return digit_range[1]

    def longest_questions(
        self, task: Task, rng: np.random.Generator, questions: int, digit_range: tuple[int, int],
        leading_zeros: bool = True,
    ) -> Operands:
        """Training questions of the longest length, uniform (ABC's S_gen, "a random
        subset of training samples", 000 §5 step 1)."""
        return task.sample_operands(rng, questions, self.longest_digits(task, digit_range), leading_zeros)

    def check(self, task: Task, config: TrialConfig) -> None:
        """Refuse a configuration this distribution cannot serve (ValueError naming the field)."""


def _merge(parts: list[Groups]) -> Groups:
    merged: dict[int, list[Operands]] = {}
    for groups in parts:
        for n, operands in groups.items():
            merged.setdefault(n, []).append(operands)
    return {
        n: tuple(np.concatenate(column) for column in zip(*pieces)) for n, pieces in sorted(merged.items())
    }


def _lengths(rng: np.random.Generator, questions: int, digit_range: tuple[int, int]) -> dict[int, int]:
    low, high = digit_range
    counts = np.bincount(rng.integers(low, high + 1, size=questions), minlength=high + 1)
    return {n: int(counts[n]) for n in range(low, high + 1) if counts[n]}


class UniformLength(Distribution):
    """001 App. E.1: the operand length is drawn uniformly from the training range,
    then every scaled operand of that length with every digit uniform (zero-padded, so
    a leading zero is allowed: uniform over [0, base^n)); exactly n digits without
    leading zeros."""

    name = "uniform_length"

    def sample(self, task, rng, questions, digit_range, leading_zeros=True):
        return {
            n: task.sample_operands(rng, count, n, leading_zeros)
            for n, count in _lengths(rng, questions, digit_range).items()
        }


class CascadeUniform(Distribution):
    """Uniform over complexity, 003 §4 (C3) and Fig. 8c ("samples that are selected
    equally for their complexity"): the length n is uniform on the training range
    (as in uniform_length), then the complexity uniform among those n-digit
    questions can have (0..n carry-cascade lengths for addition), then the question
    uniform among those of exactly that complexity, built directly by the task
    (Task.sample_with_complexity) rather than by rejection. Choice where 003 is
    silent: levels are uniform per length, not over the whole range."""

    name = "cascade_uniform"

    def sample(self, task, rng, questions, digit_range, leading_zeros=True):
        groups = {}
        for n, count in _lengths(rng, questions, digit_range).items():
            levels = rng.choice(task.complexity_levels(n, leading_zeros), size=count)
            groups[n] = task.sample_with_complexity(rng, levels, n, leading_zeros)
        return groups

    def check(self, task, config):
        if config.task.train_digits[1] > MAX_CASCADE_DIGITS:
            raise ValueError(
                f"data.distribution {config.data.distribution} builds questions of at most "
                f"{MAX_CASCADE_DIGITS} digits: lower task.train_digits"
            )
        if not task.constructible_complexity:
            able = [name for name, t in TASKS.items() if t.constructible_complexity]
            raise ValueError(
                f"data.distribution {config.data.distribution} needs questions of a chosen "
                f"complexity, which task.name {task.name} cannot build (tasks that can: {able})"
            )


class Mixed(Distribution):
    """003 §4 (C3), Fig. 8c: "each sample is chosen based on a 50/50 probability" from
    uniform_length and cascade_uniform, independently per question."""

    name = "mixed"

    def sample(self, task, rng, questions, digit_range, leading_zeros=True):
        from_uniform = int((rng.random(questions) < 0.5).sum())
        return _merge([
            UniformLength().sample(task, rng, from_uniform, digit_range, leading_zeros),
            CascadeUniform().sample(task, rng, questions - from_uniform, digit_range, leading_zeros),
        ])

    def check(self, task, config):
        CascadeUniform().check(task, config)


#: seed of the fixed train/validation split of uniform_operands (never a trial seed)
UNIFORM_OPERANDS_SPLIT_SEED = 2**20
#: share of the pool that is training data (000 §3.3: "split the set by a 7:1 ratio")
UNIFORM_OPERANDS_TRAIN_SHARE = 7 / 8
#: the largest pool, 2^22 + 1 numbers (000 uses 2^20)
MAX_POOL_BITS = 22


def pool_bits(task: Task, high: int) -> int:
    """B of the pool [0, 2^B]: round(high * log2(base)), B = 20 for 000's L_int = 6."""
    return round(high * math.log2(task.base))


@lru_cache(maxsize=4)
def _split(bits: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(training values in permuted order, sorted validation values, is_training[v])."""
    permutation = np.random.default_rng(UNIFORM_OPERANDS_SPLIT_SEED).permutation(2**bits + 1)
    cut = int(len(permutation) * UNIFORM_OPERANDS_TRAIN_SHARE)
    is_training = np.zeros(len(permutation), dtype=bool)
    is_training[permutation[:cut]] = True
    return permutation[:cut], np.sort(permutation[cut:]), is_training


class UniformOperands(Distribution):
    """000 §3.3: "a random permutation of numbers in the range [0, 2^20], split by a
    7:1 ratio for training and validation; both operands drawn independently".

    Choices where 000 is silent, so the setting generalises:
    - task.train_digits = [1, L_int] sets the pool [0, 2^B] with
      B = round(L_int * log2(base)), L_int counted in the task's own digits: B = 20
      for 000's L_int = 6 in base 10; parity (base 2) takes 002 §3.3's "we still
      generate train and test numbers in the way described above and convert them
      into binary sequences" with train_digits [1, 20] (B = 20: 21-bit strings),
      not [1, 6] (B = 6: a pool of 65 numbers, 56 of them training ones).
      The lower bound must be 1: the pool holds numbers of every length.
    - Every scaled operand is drawn from the training part; the other operands
      (N x 1's digit, the multiplier) as the task draws them. Questions are written at
      the width of 2^B (7 decimal digits for B = 20), zero-padded with format.pad
      (000 §3.2: "we pad each operand with 0's to the left to a fixed length").
    - In-distribution test lengths are still task.train_digits, [1, L_int]; the
      padded length of 2^B (7) counts as out of distribution, as in 000's L_int <= 6.
      A test question of n <= L_int digits is written at the training width, as the
      training questions are (its answer as long as theirs), so that 000's
      in-distribution columns measure the trained format.
    - The permutation is fixed by UNIFORM_OPERANDS_SPLIT_SEED, not by a trial seed, so
      every trial shares one split. Test questions (drawn from seeds.eval) never use
      a training number as a scaled operand: at lengths whose numbers all lie in the
      pool they are drawn from the validation part, and beyond, training numbers are
      redrawn (rejection), so the test questions stay uniform over the rest.
    - ABC's S_gen (longest_questions) is drawn from the training part too.
    """

    name = "uniform_operands"
    excludes_training_numbers = True

    def _pool(self, task, digit_range):
        bits = pool_bits(task, digit_range[1])
        return bits, len(np.base_repr(2**bits, task.base))

    def longest_digits(self, task, digit_range):
        return self._pool(task, digit_range)[1]

    def longest_questions(self, task, rng, questions, digit_range, leading_zeros=True):
        return self.sample(task, rng, questions, digit_range, leading_zeros)[self._pool(task, digit_range)[1]]

    def sample(self, task, rng, questions, digit_range, leading_zeros=True):
        bits, width = self._pool(task, digit_range)
        training, _, _ = _split(bits)
        scaled = [
            digits.from_ints(training[rng.integers(0, len(training), size=questions)], width, task.base)
            for _ in range(sum(task.scales))
        ]
        return {width: task.assemble(scaled, rng)}

    def eval_operands(self, task, rng, questions, n_digits, digit_range, leading_zeros=True):
        bits, width = self._pool(task, digit_range)
        _, validation, is_training = _split(bits)
        low = 0 if leading_zeros else task.base ** (n_digits - 1)
        if n_digits <= width and task.base**n_digits <= 2**bits + 1:  # all inside the pool
            allowed = validation[(validation >= low) & (validation < task.base**n_digits)]
            if not len(allowed):
                raise ValueError(f"no validation number of uniform_operands has {n_digits} digits")
            scaled = [  # written at the training width
                digits.from_ints(allowed[rng.integers(0, len(allowed), size=questions)], width, task.base)
                for _ in range(sum(task.scales))
            ]
            return task.assemble(scaled, rng)
        operands = list(task.sample_operands(rng, questions, n_digits, leading_zeros))
        for i, scaled in enumerate(task.scales):
            while scaled:
                trained = self._trained(operands[i], bits, width, is_training, task.base)
                if not trained.any():
                    break
                operands[i][trained] = digits.uniform_digits(
                    rng, int(trained.sum()), n_digits, task.base, leading_zeros
                )
        return tuple(operands)

    @staticmethod
    def _trained(operand, bits, width, is_training, base) -> np.ndarray:
        low = operand[:, :width].astype(np.int64) @ (base ** np.arange(min(width, operand.shape[1])))
        inside = (low <= 2**bits) & ~operand[:, width:].any(axis=1)
        return inside & is_training[np.minimum(low, 2**bits)]

    def check(self, task, config):
        low, high = config.task.train_digits
        if low != 1:
            raise ValueError(
                f"task.train_digits must start at 1 with data.distribution uniform_operands: "
                f"the pool [0, 2^B] holds numbers of every length (got {low})"
            )
        bits = pool_bits(task, high)
        if bits > MAX_POOL_BITS:
            raise ValueError(
                f"data.distribution uniform_operands draws from [0, 2^B], B = round(train_digits "
                f"high * log2(base)) = {bits} > {MAX_POOL_BITS}: lower task.train_digits"
            )
        for n in (*config.eval.digits, *config.eval.validation_digits):
            try:
                self.eval_operands(task, np.random.default_rng(0), 1, n, (low, high), leading_zeros(config.format))
            except ValueError as error:
                raise ValueError(f"eval.digits: {error}; remove {n}") from None


def exact_length_digits(
    rng: np.random.Generator, lengths: np.ndarray, width: int, base: int, zero_is_one_digit: bool
) -> np.ndarray:
    """(Q, width) LSD-first operands, row q uniform among the numbers of exactly
    lengths[q] digits and zero above them: the most significant digit 1..base-1, and a
    1-digit operand 0..base-1 if ``zero_is_one_digit`` (the authors differ there)."""
    drawn = rng.integers(0, base, size=(len(lengths), width), dtype=digits.DIGIT_DTYPE)
    top = rng.integers(1, base, size=len(lengths), dtype=digits.DIGIT_DTYPE)
    place = np.arange(width)[None, :]
    drawn[place >= lengths[:, None]] = 0
    rows = np.flatnonzero(lengths > (1 if zero_is_one_digit else 0))
    drawn[rows, lengths[rows] - 1] = top[rows]
    return drawn


def _by_longest(task: Task, rng: np.random.Generator, lengths: np.ndarray, zero_is_one_digit: bool) -> Groups:
    """Questions whose scaled operands have the given lengths (Q, operands), grouped by
    their longest operand: a question's length n is its longest operand's, and the
    shorter ones are zero-extended to n (the format writes them zero-padded with
    format.pad, at their own length without)."""
    longest = lengths.max(axis=1)
    groups = {}
    for n in np.unique(longest):
        rows = lengths[longest == n]
        scaled = [exact_length_digits(rng, rows[:, i], int(n), task.base, zero_is_one_digit)
                  for i in range(rows.shape[1])]
        groups[int(n)] = task.assemble(scaled, rng)
    return groups


def _check_two_lengths(task: Task, config: TrialConfig) -> None:
    if sum(task.scales) < 2:
        able = [name for name, t in TASKS.items() if sum(t.scales) >= 2]
        raise ValueError(
            f"data.distribution {config.data.distribution} draws the lengths of several operands, "
            f"and task.name {task.name} has one operand of the question's length: use uniform_length "
            f"(tasks with several: {able})"
        )


class IndependentLengths(Distribution):
    """Position coupling's training data (Cho et al. 2024, "Position Coupling: Improving
    Length Generalization of Arithmetic Transformers Using Task Structure", arXiv
    2405.20671, §4 and App. C; released code, src/data/addition.py AdditionDataset):
    each operand's length drawn on its own, uniform over the training range; each
    operand uniform among the numbers of exactly that length (0..base-1 at one digit);
    the question's length is the longer operand's, the shorter zero-padded to it
    (format.pad; their `padding` with pad token 0)."""

    name = "independent_lengths"

    def sample(self, task, rng, questions, digit_range, leading_zeros=True):
        low, high = digit_range
        lengths = rng.integers(low, high + 1, size=(questions, sum(task.scales)))
        return _by_longest(task, rng, lengths, zero_is_one_digit=True)

    def check(self, task, config):
        _check_two_lengths(task, config)


class LengthPairs(Distribution):
    """Abacus's training data (McLeish et al. 2024, "Transformers Can Do Arithmetic with
    the Right Embeddings", arXiv 2405.17399, §3; released code, create_data_split.py
    bucket_method_gen): every pair of operand lengths in the training range equally
    often, each operand uniform among the numbers of exactly that length (1..base-1 at
    one digit: their keep_0_for_len_1 is off by default), written unpadded in their
    recipe (format.pad false). The authors cycle through the pairs in a fixed order
    over a fixed set, then shuffle the whole set (create_data_split.py,
    bucket_method_main's random.shuffle). data.balance `batch` (the default): a batch
    holds each pair floor(Q / P) times and the Q mod P questions left over at distinct
    pairs drawn at random, so every batch is balanced to within one question per pair;
    `shuffle`: every question's pair drawn uniformly on its own, the batches of a
    shuffled set of equal pair counts (a set of millions: drawing a batch from it
    without replacement is drawing with replacement, up to a correction of the order
    of batch / set size). Either way the pairs are equally likely over batches."""

    name = "length_pairs"
    options = ("balance",)

    def __init__(self, balance: str = "batch") -> None:
        self.balance = balance

    def sample(self, task, rng, questions, digit_range, leading_zeros=True):
        low, high = digit_range
        span, operands = high - low + 1, sum(task.scales)
        index = PAIR_BALANCES[self.balance](rng, questions, span**operands)
        lengths = low + np.stack([index // span**i % span for i in range(operands)], axis=1)
        return _by_longest(task, rng, lengths, zero_is_one_digit=False)

    def check(self, task, config):
        _check_two_lengths(task, config)


def _balanced_pairs(rng: np.random.Generator, questions: int, pairs: int) -> np.ndarray:
    counts = np.full(pairs, questions // pairs)
    counts[rng.choice(pairs, size=questions % pairs, replace=False)] += 1
    return np.repeat(np.arange(pairs), counts)


def _shuffled_pairs(rng: np.random.Generator, questions: int, pairs: int) -> np.ndarray:
    return rng.integers(pairs, size=questions)


#: data.balance -> the pair index of every question of a batch (LengthPairs)
PAIR_BALANCES = {"batch": _balanced_pairs, "shuffle": _shuffled_pairs}


DISTRIBUTIONS: dict[str, type[Distribution]] = {
    d.name: d for d in (UniformLength, UniformOperands, CascadeUniform, Mixed, IndependentLengths, LengthPairs)
}


class TestQuestions(ABC):
    """How the test questions of one length are drawn (`eval.questions`)."""

    name: ClassVar[str]

    @abstractmethod
    def operands(self, distribution: Distribution, task: Task, rng: np.random.Generator, questions: int,
                 n_digits: int, digit_range: tuple[int, int], leading_zeros: bool) -> Operands:
        """`questions` test questions of length `n_digits`."""

    def check(self, task: Task, config: TrialConfig) -> None:
        """Refuse a configuration these questions cannot serve (ValueError naming the field)."""


class UniformTestQuestions(TestQuestions):
    """Every digit uniform, as the training distribution's own test set
    (Distribution.eval_operands: a finite training pool stays out)."""

    name = "uniform"

    def operands(self, distribution, task, rng, questions, n_digits, digit_range, leading_zeros):
        return distribution.eval_operands(task, rng, questions, n_digits, digit_range, leading_zeros)


class ExactLengthTestQuestions(TestQuestions):
    """000 §3.3: "for each length L, we randomly sample min(base^L - base^(L-1), 10000)
    numbers of length L": every scaled operand has exactly n digits (1..base-1 at n = 1),
    drawn with replacement (eval.samples of them), as the training distribution's own
    test set (a finite training pool stays out) and written as `uniform` ones are."""

    name = "exact_length"

    def operands(self, distribution, task, rng, questions, n_digits, digit_range, leading_zeros):
        return distribution.eval_operands(task, rng, questions, n_digits, digit_range, leading_zeros=False)


class CascadeUniformTestQuestions(TestQuestions):
    """The complexity level uniform among those n-digit questions can have, then the
    question uniform among those of that level: 003 Fig. 8c scores 40-digit sums at
    every cascade length, which uniform questions almost never reach (P(cascade >= 5)
    is about 0.002 at 50 digits, App. C.4)."""

    name = "cascade_uniform"

    def operands(self, distribution, task, rng, questions, n_digits, digit_range, leading_zeros):
        levels = rng.choice(task.complexity_levels(n_digits, leading_zeros), size=questions)
        return task.sample_with_complexity(rng, levels, n_digits, leading_zeros)

    def check(self, task, config):
        if config.eval.longest_digits > MAX_CASCADE_DIGITS:
            raise ValueError(f"eval.questions cascade_uniform builds questions of at most "
                             f"{MAX_CASCADE_DIGITS} digits: lower eval.digits")
        if not task.constructible_complexity:
            raise ValueError(f"eval.questions cascade_uniform needs questions of a chosen complexity, "
                             f"which task.name {task.name} cannot build")
        if DISTRIBUTIONS[config.data.distribution]().excludes_training_numbers:
            raise ValueError(f"eval.questions cascade_uniform cannot keep the training pool of "
                             f"data.distribution {config.data.distribution} out of the test set; use uniform")


TEST_QUESTIONS: dict[str, type[TestQuestions]] = {
    q.name: q for q in (UniformTestQuestions, ExactLengthTestQuestions, CascadeUniformTestQuestions)
}
