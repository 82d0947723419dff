"""Each positional encoding equals its paper's formula; every registered one builds a
causal model."""

import math

import pytest
import torch

from lengthgen.config import ModelConfig
from lengthgen.model import build_model
from lengthgen.model.pe import POSITIONAL_ENCODINGS
from lengthgen.model.pe.biases import ALiBi, alibi_slopes
from lengthgen.model.pe.embeddings import LearnedEmbedding, SinusoidalEmbedding
from lengthgen.model.pe.rotary import Rotary
from lengthgen.model.positions import POSITION_SAMPLERS


def test_sinusoidal_matches_vaswani_section_3_5():
    d, positions = 8, torch.tensor([[0, 1, 5, 37]])
    table = SinusoidalEmbedding(d)(positions)[0]
    for row, pos in enumerate(positions[0].tolist()):
        for i in range(d // 2):
            angle = pos / 10000 ** (2 * i / d)
            assert table[row, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-6)
            assert table[row, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-6)


def test_rope_matches_complex_rotation_of_roformer_eq_34():
    head_dim, pos = 6, 7
    x = torch.randn(1, 1, 1, head_dim)
    rotated = Rotary(head_dim).rotate(x, torch.tensor([[pos]]))[0, 0, 0]
    for i in range(head_dim // 2):
        theta = 10000 ** (-2 * i / head_dim)
        z = complex(x[0, 0, 0, 2 * i], x[0, 0, 0, 2 * i + 1]) * complex(math.cos(pos * theta), math.sin(pos * theta))
        assert rotated[2 * i].item() == pytest.approx(z.real, abs=1e-5)
        assert rotated[2 * i + 1].item() == pytest.approx(z.imag, abs=1e-5)


def test_rope_scores_depend_on_relative_position_only():
    rope = Rotary(8)
    q, k = torch.randn(1, 1, 1, 8), torch.randn(1, 1, 1, 8)

    def score(m, n):
        rq, rk = rope(q, k, torch.tensor([[m]]), torch.tensor([[n]]))
        return (rq * rk).sum().item()

    assert score(3, 1) == pytest.approx(score(13, 11), abs=1e-4)
    assert score(40, 0) == pytest.approx(score(140, 100), abs=1e-3)
    assert score(3, 1) != pytest.approx(score(3, 2), abs=1e-4)


def test_alibi_slopes_of_press_et_al():
    assert alibi_slopes(8).tolist() == pytest.approx([2 ** (-h) for h in range(1, 9)])
    assert alibi_slopes(4).tolist() == pytest.approx([2 ** (-2 * h) for h in range(1, 5)])
    # 6 heads: the 4 slopes of 4 heads, then every other slope of 8 heads
    assert alibi_slopes(6).tolist() == pytest.approx([0.25, 0.0625, 2**-6, 2**-8, 0.5, 0.125])


def test_alibi_bias_is_minus_slope_times_distance():
    positions = torch.arange(5)[None]
    bias = ALiBi(4)(positions, positions)  # (1, H, T, T)
    slopes = alibi_slopes(4)
    for h in range(4):
        for i in range(5):
            for j in range(i + 1):
                assert bias[0, h, i, j].item() == pytest.approx(-slopes[h].item() * (i - j))


def test_learned_embedding_refuses_positions_past_its_table():
    table = LearnedEmbedding(4, max_positions=10)
    assert table(torch.arange(10)[None]).shape == (1, 10, 4)
    with pytest.raises(ValueError, match="max_positions"):
        table(torch.arange(11)[None])


@pytest.mark.parametrize("pe", sorted(POSITIONAL_ENCODINGS))
def test_every_encoding_gives_a_causal_model(pe):
    model = build_model(ModelConfig(pe=pe, size="tiny", max_positions=64), vocab_size=16, weight_seed=0).eval()
    tokens = torch.randint(0, 16, (2, 12))
    positions = POSITION_SAMPLERS["plain"]()(2, 12, torch.device("cpu"))
    changed = tokens.clone()
    changed[:, 8:] = (changed[:, 8:] + 1) % 16
    with torch.no_grad():
        before, after = model(tokens, positions), model(changed, positions)
    assert before.shape == (2, 12, 16)
    assert torch.allclose(before[:, :8], after[:, :8], atol=1e-5)  # the future does not leak
    assert not torch.allclose(before[:, 8:], after[:, 8:])


@pytest.mark.parametrize("pe", sorted(POSITIONAL_ENCODINGS))
def test_explicit_positions_are_used(pe):
    """Shifting every position changes the output for absolute encodings only."""
    model = build_model(ModelConfig(pe=pe, size="tiny", max_positions=64), vocab_size=16, weight_seed=0).eval()
    tokens = torch.randint(0, 16, (1, 10))
    plain = torch.arange(10)[None]
    with torch.no_grad():
        same = torch.allclose(model(tokens, plain), model(tokens, plain + 5), atol=1e-5)
    relative_or_none = {"nope", "rope", "alibi"}
    assert same == (pe in relative_or_none)
