"""Attention Bias Calibration (000 §5, App. B; kappa of 002): the bias of synthetic
attention patterns, and one trial running both phases."""

import math

import numpy as np
import pytest
import torch

from lengthgen import TrialConfig, train
from lengthgen.config import EvalConfig, FormatConfig, ModelConfig, TaskConfig, TrainConfig
from lengthgen.model.attention_bias import CalibratedBias, Geometry
from lengthgen.model.attention_bias.calibrated import Lines, dropoff, line_means
from lengthgen.model.base import InputLayout

KAPPA_CROSS, KAPPA_SELF = 4.5, 0.87  # 002 §5


def extended(lines: Lines, rows: int, columns: int) -> torch.Tensor:
    return lines.extend(torch.arange(rows), columns, torch.tensor([columns]))[0]  # (H, rows, columns)


@pytest.mark.parametrize("baseline", [0.0, -2.0])
def test_a_clean_anti_diagonal_extends_along_its_line_and_drops_the_rest(baseline):
    m, n, M, N = 8, 6, 52, 50  # an 8 x 6 Successor cross-attention, extended to a 50-digit question
    attention = torch.full((3, m, n), baseline)
    rows = torch.arange(n)
    attention[0, rows, n - 1 - rows] = 5.0  # output t reads the digit t from the right (reversed answer)
    attention[2, :, 3] = 5.0  # a head that reads one column from every row
    attention[2] += 0.01 * torch.randn(m, n, generator=torch.Generator().manual_seed(0))
    bias = extended(Lines.calibrate(attention, KAPPA_CROSS, (M, N), causal=False), M, N)
    i, j = torch.meshgrid(torch.arange(M), torch.arange(N), indexing="ij")
    on_line = i + j == N - 1  # the anti-diagonal anchored at the top-right corner, extended
    assert torch.equal(bias[0] == 0, on_line) and torch.isneginf(bias[0][~on_line]).all()
    assert (bias[1] == 0).all()  # no pattern: transparent (000 §5, 2.4)
    vertical = j == 3
    assert (bias[2][vertical] == 0).all() and torch.isneginf(bias[2][~vertical]).all()  # the vertical line


def test_a_subdiagonal_of_causal_self_attention_extends_and_row_zero_stays_open():
    m, M = 8, 22
    future = torch.ones(m, m, dtype=torch.bool).triu(1)
    attention = torch.full((1, m, m), -2.0).masked_fill(future, float("nan"))  # a causal mask closed the future
    attention[0, torch.arange(1, m), torch.arange(m - 1)] = 5.0  # each output reads the one before
    # 002's kappa = 0.87 also keeps the two short anti-diagonals of Ā through the
    # subdiagonal and a -2 cell (mean 1.5); kappa = 2 isolates the diagonal
    bias = CalibratedBias(ModelConfig(attention_bias="abc", abc_kappa_self=2.0), InputLayout(), 1)
    bias.calibrate({"decoder_self": attention}, {"decoder_self": (M, M)})
    zero = torch.zeros(1, dtype=torch.long)
    matrix = bias.decoder_self(Geometry(torch.arange(M), M, torch.tensor([M]), zero))[0, 0]
    subdiagonal = torch.arange(M)[None, :] == torch.arange(1, M)[:, None] - 1
    assert torch.equal(matrix[1:] == 0, subdiagonal) and torch.isneginf(matrix[1:][~subdiagonal]).all()
    assert (matrix[0] == 0).all()  # row 0 has no earlier output: closed everywhere, so transparent


def test_line_averages_and_the_dropoff_threshold_follow_000_and_algorithm_1():
    attention = torch.arange(12.0).reshape(1, 3, 4)  # rows 0..3, 4..7, 8..11
    means = line_means(attention)
    assert means["vertical"].tolist() == [[4.0, 5.0, 6.0, 7.0]]
    # diagonals j - i = -2 .. 3: the one-cell corners (j - i = -2 and 3) are shorter than
    # half of the longest diagonal (3 cells), so no lines
    diagonal = means["diagonal"][0]
    assert math.isnan(diagonal[0]) and math.isnan(diagonal[5])
    assert diagonal[1:5].tolist() == [(4 + 9) / 2, (0 + 5 + 10) / 3, (1 + 6 + 11) / 3, (2 + 7) / 2]
    assert means["anti_diagonal"][0, 1:5].tolist() == [(1 + 4) / 2, (2 + 5 + 8) / 3, (3 + 6 + 9) / 3, (7 + 10) / 2]
    # the threshold: mean and deviation over the cells of the extended matrix, a cell
    # on line l holding d_l, a cell on no line 0
    values = torch.tensor([[1.0, 2.0, 3.0, 10.0, float("nan")]])
    coverage = torch.tensor([5.0, 5.0, 5.0, 5.0, 5.0])
    cells = np.array([1.0] * 5 + [2.0] * 5 + [3.0] * 5 + [10.0] * 5 + [0.0] * 10)  # 30 cells, 10 on no line
    mu, sigma = cells.mean(), cells.std()
    for kappa in (0.0, 0.87, 4.5):
        kept = dropoff(values, coverage, 30, kappa)[0]
        expected = [v - 10.0 if v > mu + kappa * sigma else -math.inf for v in (1.0, 2.0, 3.0, 10.0)]
        assert kept[:4].tolist() == pytest.approx(expected) and kept[4] == -math.inf


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
