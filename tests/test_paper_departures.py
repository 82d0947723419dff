"""The bundled studies train and test as their papers say (issue 16): the settings a
study file gets right or wrong, checked on the trials it expands to."""

from pathlib import Path

import numpy as np
import pytest

from lengthgen.config import build_task
from lengthgen.distributions import DISTRIBUTIONS, UNIFORM_OPERANDS_TRAIN_SHARE, _split, pool_bits
from orchestrator.studies.study import load_study

STUDIES = Path(__file__).parents[1] / "studies"


def trials(name: str, profile: str | None = None):
    return load_study(STUDIES / f"{name}.yaml", profile).trials


def test_attention_bias_draws_every_task_from_000s_pool():
    # 000 §3.3: "a random permutation of numbers in the range [0, 2^20]", split 7:1;
    # 002 §3.3: for parity "we still generate train and test numbers in the way
    # described above and convert them into binary sequences"
    study = trials("attention_bias")
    assert {t.task.name for t in study} == {"successor", "addition", "parity", "n_by_1"}
    training, _, _ = _split(20)
    assert len(training) == int((2**20 + 1) * UNIFORM_OPERANDS_TRAIN_SHARE)
    for trial in study:
        task = build_task(trial.task)
        assert trial.data.distribution == "uniform_operands"
        assert pool_bits(task, trial.task.train_digits[1]) == 20, trial.task
        groups = DISTRIBUTIONS["uniform_operands"]().sample(task, np.random.default_rng(0), 4000, trial.task.train_digits)
        width = 21 if trial.task.name == "parity" else 7  # the digits of 2^20 in the task's base
        assert list(groups) == [width]
        assert len(np.unique(groups[width][0], axis=0)) > 3900  # not a 56-number pool
        assert trial.in_distribution(width - 1) and not trial.in_distribution(width)


def test_abc_reads_the_natural_expression_and_the_scaffolding_the_aligned_one():
    # 000 App. A.4: input alignment is scaffolding for the windowed bias; ABC (000 §5,
    # 002 §6) extends lines of the natural expression's attention
    for trial in trials("attention_bias"):
        assert trial.format.interleave == (trial.model.attention_bias != "abc"), trial.model
    assert any(t.model.attention_bias == "abc" and t.task.name == "addition" for t in trials("attention_bias"))


def test_rope_on_addition_has_000s_embedding_size_512():
    # 000 App. A.2: "the RoPE implementation for Addition must use an embedding size of 512"
    rope = [t for t in trials("attention_bias") if t.model.pe == "rope"]
    assert {(t.task.name, t.model.size) for t in rope} == {
        ("successor", "ed_128"), ("addition", "ed_512"), ("parity", "ed_128"), ("n_by_1", "ed_128")
    }


@pytest.mark.parametrize("study", ["symmetry", "cascade_distribution"])
def test_003_trains_on_all_pairs_below_10_to_the_5(study):
    # 003 §3: "samples are generated uniformly from D_s", the pairs below 10^l_s, l_s = 5
    for profile in (None, "cpu"):
        for trial in trials(study, profile):
            assert trial.task.train_digits == (5, 5)
    cascade = next(t for t in trials("cascade_distribution") if t.data.distribution == "cascade_uniform")
    task = build_task(cascade.task)
    groups = DISTRIBUTIONS["cascade_uniform"]().sample(task, np.random.default_rng(0), 6000, cascade.task.train_digits)
    levels = np.concatenate([task.complexity(operands) for operands in groups.values()])
    assert np.mean(levels == 5) == pytest.approx(1 / 6, abs=0.02)  # 1/30 with lengths 1..5


def test_003_multiplication_is_tested_to_20_digits_addition_to_50():
    # 003 §3.2: "multiplication of a 3-digit number with a 20-digit number"; Fig. 2: sums to 50
    for trial in trials("symmetry"):
        assert trial.longest_digits == (50 if trial.task.name == "addition" else 20)
    for trial in trials("symmetry") + trials("cascade_distribution"):
        assert trial.model.dropout == 0.1 and trial.train.weight_decay in (3e-6, 1e-5, 3e-5, 1e-4)  # 003 App. B


def test_sota_coupling_trains_and_tests_as_the_released_code():
    # Cho et al. 2024, scripts/addition/run_coupling.sh and configs/ of the released code
    study = trials("sota_coupling")
    assert len(study) == 6 and {(t.seeds.weight, t.seeds.data) for t in study} == {
        (w, d) for w in (0, 1, 2) for d in (0, 1)}
    for trial in study:
        assert trial.task.train_digits == (1, 30) and trial.data.distribution == "independent_lengths"
        assert (trial.format.reverse, trial.format.reverse_operands, trial.format.pad) == (True, False, True)
        assert (trial.model.positions, trial.model.pe, trial.model.size) == ("coupled", "learned", "1l_1024_4h")
        assert (trial.train.batch_size, trial.train.steps, trial.train.lr) == (1000, 50_000, 1e-4)
        assert (trial.train.min_lr_ratio, trial.train.warmup, trial.train.weight_decay) == (0.1, 500, 0.0)
        assert trial.eval.digits == tuple(range(5, 201, 5)) and trial.eval.questions == "exact_length"
        assert trial.eval.select == "best_long_loss" and trial.eval.validation_digits == tuple(range(51, 101))
    # the CPU profile stays sized for a 2-core machine
    cpu = trials("sota_coupling", "cpu")
    assert len(cpu) == 2 and all(t.model.size == "tiny_1l" and t.train.steps <= 2000 for t in cpu)
