"""Attention Bias Calibration (000 §5, App. B; kappa of 002): the bias of synthetic
attention patterns, and one trial running both phases."""

import math

import numpy as np
import pytest
import torch

from lengthgen import TrialConfig, train
from lengthgen.config import EvalConfig, FormatConfig, ModelConfig, TaskConfig, TrainConfig
from lengthgen.layout import InputLayout
from lengthgen.model.position.attention_bias import CalibratedBias, Geometry
from lengthgen.model.position.attention_bias.calibrated import (
    Lines,
    dropoff,
    line_means,
    line_scores,
)

KAPPA_CROSS, KAPPA_SELF = 4.5, 0.87  # 002 §5


def extended(lines: Lines, rows: int, columns: int) -> torch.Tensor:
    return lines.extend(torch.arange(rows), columns, torch.tensor([columns]))[0]  # (H, rows, columns)


def successor_cross_attention() -> torch.Tensor:
    """Ā of a 9 x 7 cross-attention (7-digit Successor at 000's training width: "<s>" and
    8 answer digits read 7 question digits), four heads: a clean anti-diagonal (output
    t reads the digit t from the right, the answer being reversed), the same on a
    baseline of -2, noise, and a constant."""
    m, n = 9, 7
    noise = torch.randn(4, m, n, generator=torch.Generator().manual_seed(0))
    attention = 0.01 * noise
    rows = torch.arange(n)
    attention[0, rows, n - 1 - rows] += 5.0
    attention[1] -= 2.0
    attention[1, rows, n - 1 - rows] += 7.0
    attention[2] = noise[2]
    attention[3] = 0.1
    return attention


def kept_cells(attention: torch.Tensor, rows: int, columns: int) -> torch.Tensor:
    """(H, rows, columns) bool: the cells on a kept line of the bias at that size."""
    return torch.isfinite(extended(Lines.calibrate(attention, KAPPA_CROSS), rows, columns))


@pytest.mark.parametrize("M, N", [(52, 50), (10, 8), (9, 7)])
def test_a_clean_anti_diagonal_extends_along_its_line_and_drops_the_rest(M, N):
    bias = extended(Lines.calibrate(successor_cross_attention(), KAPPA_CROSS), M, N)
    i, j = torch.meshgrid(torch.arange(M), torch.arange(N), indexing="ij")
    on_line = i + j == N - 1  # the anti-diagonal anchored at the top-right corner, extended
    assert torch.equal(bias[0] == 0, on_line) and torch.isneginf(bias[0][~on_line]).all()
    assert torch.equal(bias[1] == 0, on_line) and torch.isneginf(bias[1][~on_line]).all()
    assert (bias[2] == 0).all() and (bias[3] == 0).all()  # no pattern: transparent (000 §5, 2.4)


@pytest.mark.parametrize("shift, scale", [(10.0, 1.0), (-10.0, 1.0), (0.0, 3.0), (-7.0, 0.5)])
def test_the_kept_lines_ignore_what_the_softmax_ignores_and_the_test_size(shift, scale):
    # 002 §5: mu and sigma of "all the d_l's"; a constant added to the logits leaves the
    # softmax as it is and must leave the kept lines as they are, as must the size
    attention = successor_cross_attention()
    reference = kept_cells(attention, 52, 50)
    assert reference[0].any() and reference[1].any()
    assert torch.equal(kept_cells(attention * scale + shift, 52, 50), reference)
    for M, N in [(10, 8), (9, 7), (30, 12)]:
        i, j = torch.meshgrid(torch.arange(M), torch.arange(N), indexing="ij")
        kept = kept_cells(attention * scale + shift, M, N)
        assert torch.equal(kept[0], i + j == N - 1) and torch.equal(kept[1], i + j == N - 1)
        assert kept[2:].all()  # transparent heads: 0 everywhere


def test_the_subdiagonal_of_causal_self_attention_extends_and_row_zero_stays_open():
    m, M = 8, 22
    future = torch.ones(m, m, dtype=torch.bool).triu(1)
    attention = torch.full((1, m, m), -2.0).masked_fill(future, float("nan"))  # a causal mask closed the future
    attention[0, torch.arange(1, m), torch.arange(m - 1)] = 5.0  # each output reads the one before
    # 002's kappa = 0.87 also keeps the two short anti-diagonals of Ā through the
    # subdiagonal and a -2 cell (mean 1.5); kappa = 2 isolates the diagonal
    bias = CalibratedBias(ModelConfig(attention_bias="abc", abc_kappa_self=2.0), InputLayout(), 1)
    bias.calibrate({"decoder_self": attention})
    zero = torch.zeros(1, dtype=torch.long)
    matrix = bias.decoder_self(Geometry(torch.arange(M), M, torch.tensor([M]), zero))[0, 0]
    subdiagonal = torch.arange(M)[None, :] == torch.arange(1, M)[:, None] - 1
    assert torch.equal(matrix[1:] == 0, subdiagonal) and torch.isneginf(matrix[1:][~subdiagonal]).all()
    assert (matrix[0] == 0).all()  # row 0 has no earlier output: closed everywhere, so transparent


def test_line_averages_and_the_dropoff_threshold_follow_000_and_002():
    attention = torch.arange(12.0).reshape(1, 3, 4)  # rows 0..3, 4..7, 8..11
    means = line_means(attention)
    assert means["vertical"].tolist() == [[4.0, 5.0, 6.0, 7.0]]
    # diagonals j - i = -2 .. 3: the one-cell corners (j - i = -2 and 3) are shorter than
    # half of the longest diagonal (3 cells), so no lines
    diagonal = means["diagonal"][0]
    assert math.isnan(diagonal[0]) and math.isnan(diagonal[5])
    assert diagonal[1:5].tolist() == [(4 + 9) / 2, (0 + 5 + 10) / 3, (1 + 6 + 11) / 3, (2 + 7) / 2]
    assert means["anti_diagonal"][0, 1:5].tolist() == [(1 + 4) / 2, (2 + 5 + 8) / 3, (3 + 6 + 9) / 3, (7 + 10) / 2]
    # the threshold: mean and deviation of all the line means of the head, the three
    # directions pooled; d_max the largest of them
    nan = float("nan")
    lines = {
        "vertical": torch.tensor([[1.0, 2.0, nan]]),
        "diagonal": torch.tensor([[3.0, 10.0]]),
        "anti_diagonal": torch.tensor([[nan, 0.5, 12.0, -1.0]]),
    }
    values = np.array([1.0, 2.0, 3.0, 10.0, 0.5, 12.0, -1.0])
    mu, sigma = values.mean(), values.std()
    for kappa in (0.0, 0.87, 1.5, 4.5):
        kept = dropoff(lines, kappa)
        for direction, line in lines.items():
            expected = [v - 12.0 if v > mu + kappa * sigma else -math.inf for v in line[0].tolist()]
            assert kept[direction][0].tolist() == pytest.approx(expected)
    # the score the dropoff compares with kappa, NaN where there is no line
    scores = line_scores(lines)
    for direction, line in lines.items():
        expected = [(v - mu) / sigma for v in line[0].tolist()]
        assert scores[direction][0].tolist() == pytest.approx(expected, nan_ok=True)


def test_a_line_is_kept_exactly_where_its_score_exceeds_kappa():
    attention = 0.1 * torch.randn(6, 9, 7, generator=torch.Generator().manual_seed(1))
    attention[2] = 0.5  # a flat head: no pattern, no score, nothing kept
    attention[3, torch.arange(7) + 2, torch.arange(7).flip(0)] += 6.0  # a strong anti-diagonal
    means = line_means(attention)
    scores = line_scores(means)
    assert all(torch.isnan(scores[d][2]).all() for d in scores)
    assert scores["anti_diagonal"][3].nan_to_num(nan=-math.inf).max() > KAPPA_CROSS
    for kappa in (0.0, KAPPA_SELF, 2.0, KAPPA_CROSS):
        kept = dropoff(means, kappa)
        for direction in kept:
            assert torch.equal(torch.isfinite(kept[direction]), scores[direction] > kappa)


def abc_config(arch: str, steps: int = 8) -> TrialConfig:
    return TrialConfig(
        task=TaskConfig(name="successor", train_digits=(1, 3)),
        model=ModelConfig(arch=arch, pe="nope", attention_bias="abc", abc_samples=16),
        train=TrainConfig(steps=steps, batch_size=8, lr=3e-3, warmup=2, log_every=4),
        eval=EvalConfig(digits=(2, 6), samples=5),
    )


@pytest.mark.parametrize("arch, sites", [("encoder_decoder", ("decoder_self", "cross")), ("decoder", ("lm",))])
def test_one_trial_runs_both_phases_and_returns_the_bias(arch, sites):
    config = abc_config(arch)
    reports = []
    result = train(config, on_report=reports.append)
    assert result.status == "done" and result.steps == 16
    assert sorted({s for s, _ in result.eval}) == [8, 16]  # the interpolating model, then the calibrated one
    assert reports[-1].final and set(reports[-1].attention_biases) == set(result.attention_biases)
    heads = 4
    for site in sites:
        extracted, bias = result.attention_biases[f"{site}/extracted"], result.attention_biases[f"{site}/bias"]
        assert extracted.shape[0] == bias.shape[0] == heads
        assert bias.shape[1] > extracted.shape[1]  # extended to the longest test question (6 > 3 digits)
        assert not np.isnan(bias).any() and np.isfinite(bias).any(axis=-1).all()  # no row fully closed
    # 6-digit successor: "<s>" + 6 + "=" + 7 + "</s>" = 16 tokens
    shapes = {"lm": (15, 15), "decoder_self": (8, 8), "cross": (8, 6)}
    assert {site: result.attention_biases[f"{site}/bias"].shape[1:] for site in sites} == {s: shapes[s] for s in sites}


def test_a_resumed_abc_trial_equals_an_uninterrupted_one():
    config = abc_config("encoder_decoder", steps=6)
    uninterrupted = train(config)
    saved = {}

    def stop_after_the_first_phase(report):
        if report.checkpoint is not None and report.step == 6:
            saved.update(report.checkpoint())
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train(config, on_report=stop_after_the_first_phase)
    resumed = train(config, resume_state=saved)
    assert [t.loss for t in resumed.train] == [t.loss for t in uninterrupted.train]
    assert [s.prediction for s in resumed.samples] == [s.prediction for s in uninterrupted.samples]
    for key, value in uninterrupted.attention_biases.items():
        assert np.array_equal(resumed.attention_biases[key], value, equal_nan=True)


def test_abc_refusals_and_options():
    with pytest.raises(ValueError, match="format.pad: true"):
        TrialConfig(format=FormatConfig(pad=False), model=ModelConfig(attention_bias="abc"))
    with pytest.raises(ValueError, match="model.abc_samples does not apply to model.attention_bias none"):
        ModelConfig(abc_samples=8)
    assert ModelConfig(attention_bias="abc").abc_kappa_cross == KAPPA_CROSS
    assert ModelConfig(attention_bias="abc").abc_kappa_self == KAPPA_SELF
