"""Each positional encoding equals its paper's formula; every registered one builds a
causal model."""

import inspect
import math

import pytest
import torch

from lengthgen.config import ModelConfig
from lengthgen.model import build_model
from lengthgen.model.attention import SelfAttention
from lengthgen.model.position.pe import POSITIONAL_ENCODINGS
from lengthgen.model.position.pe.biases import (
    FIRE,
    ALiBi,
    KerpleLog,
    T5Bias,
    alibi_slopes,
    t5_bucket,
)
from lengthgen.model.position.pe.embeddings import LearnedEmbedding, SinusoidalEmbedding
from lengthgen.model.position.pe.relative_keys import ShawRelativeKeys
from lengthgen.model.position.pe.rotary import Rotary
from lengthgen.model.position.samplers import (
    POSITION_SAMPLERS,
    CyclicPositions,
    RandomizedPositions,
    build_position_sampler,
)


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
        rq, rk = rope.rotate(q, torch.tensor([[m]])), rope.rotate(k, torch.tensor([[n]]))
        return (rq * rk).sum().item()

    assert score(3, 1) == pytest.approx(score(13, 11), abs=1e-4)
    assert score(40, 0) == pytest.approx(score(140, 100), abs=1e-3)
    assert score(3, 1) != pytest.approx(score(3, 2), abs=1e-4)


class RealFormPerLayer:
    """The rotation as each layer computed it for itself before the model shared one:
    eq. (34)'s real form from the layer's own positions."""

    def __init__(self, theta: torch.Tensor, positions: torch.Tensor) -> None:
        self.theta, self.positions = theta, positions

    def rotate(self, x):
        angles = self.positions.float()[:, None, :, None] * self.theta  # (B, 1, T, hd/2)
        cos, sin = angles.cos(), angles.sin()
        even, odd = x[..., 0::2], x[..., 1::2]
        return torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).flatten(-2)


@pytest.mark.parametrize("sampler", sorted(POSITION_SAMPLERS))
def test_rope_rotation_built_once_per_forward_equals_one_built_per_layer(sampler):
    """The model builds one rotation per forward pass and hands it to every layer; the
    logits equal those of layers that each rotate by the real form from their own
    positions, on a full pass and on KV-cached decoding (new tokens at an offset)."""
    cfg = ModelConfig(pe="rope", size="tiny", positions=sampler, max_positions=64,
                      randomized_at_eval=sampler == "randomized")
    model = build_model(cfg, vocab_size=16, weight_seed=0).eval()
    tokens = torch.randint(0, 16, (3, 12), generator=torch.Generator().manual_seed(0))
    positions = model.sample_positions(tokens, torch.full((3,), 5), build_position_sampler(cfg),
                                       torch.Generator().manual_seed(1), training=False)[0]
    built = []
    model.pe.qk_transform.register_forward_hook(lambda *_: built.append(1))

    def logits():
        with torch.no_grad():
            full = model(tokens, positions)
            cache = model.empty_cache()
            steps = [model(tokens[:, :5], positions[:, :5], cache)]
            steps += [model(tokens[:, t : t + 1], positions[:, t : t + 1], cache) for t in range(5, 12)]
        return full, torch.cat(steps, dim=1)

    def per_layer(attention, args, kwargs):
        call = inspect.signature(attention.forward).bind(*args, **kwargs)
        call.arguments["rotation"] = RealFormPerLayer(model.pe.qk_transform.theta, call.arguments["positions"])
        return call.args, call.kwargs

    shared = logits()
    assert len(built) == 1 + 1 + 7  # once per forward pass, not once per layer
    layers = [m for m in model.modules() if isinstance(m, SelfAttention)]
    hooks = [layer.register_forward_pre_hook(per_layer, with_kwargs=True) for layer in layers]
    try:
        recomputed = logits()
    finally:
        for hook in hooks:
            hook.remove()
    for ours, reference in zip(shared, recomputed):
        torch.testing.assert_close(ours, reference, rtol=1e-6, atol=1e-6)


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
    # FIRE is relative while positions stay below its threshold L (512 at init)
    relative_or_none = {"nope", "rope", "alibi", "kerple_log", "fire", "t5", "shaw", "upe"}
    assert same == (pe in relative_or_none)


def test_kerple_log_matches_001_appendix_d1():
    kerple = KerpleLog(3)
    kerple.initialize(torch.Generator().manual_seed(0))
    positions = torch.arange(6)[None]
    bias = kerple(positions, positions)
    for h in range(3):
        r1, r2 = kerple.r1[h].item(), kerple.r2[h].item()
        assert r1 > 0 and r2 > 0
        for i, j in [(0, 0), (5, 0), (4, 2)]:
            assert bias[0, h, i, j].item() == pytest.approx(-r1 * math.log(1 + r2 * abs(i - j)), rel=1e-5)


def test_fire_matches_001_appendix_a1_with_max_not_min():
    fire = FIRE(2, initial_threshold=4.0)
    fire.initialize(torch.Generator().manual_seed(0))
    with torch.no_grad():
        fire.c.fill_(0.5)
    positions = torch.arange(10)[None]
    bias = fire(positions, positions)

    def psi(x):
        return math.log(0.5 * x + 1)

    for i, j in [(2, 0), (3, 3), (9, 1), (7, 2)]:
        expected_input = psi(i - j) / (psi(max(4.0, i)) + 1e-6)  # L = 4: max(L, i)
        expected = fire.mlp(torch.tensor([[expected_input]], dtype=torch.float32))[0]
        assert torch.allclose(bias[0, :, i, j], expected, atol=1e-5), (i, j)
    # normalising by min(L, i) instead would differ for i > L
    wrong_input = psi(9 - 1) / (psi(min(4.0, 9)) + 1e-6)
    assert not torch.allclose(bias[0, :, 9, 1], fire.mlp(torch.tensor([[wrong_input]]))[0])


@pytest.mark.parametrize(
    "distance, bucket",
    # K + 1 = 8 buckets, L_1 = 32: exact below 4; then 4 + floor(4 log(d/4) / log(8)); 7 from 32 on
    [(0, 0), (1, 1), (3, 3), (4, 4), (6, 4), (7, 5), (8, 5), (15, 6), (16, 6), (19, 6), (20, 7), (32, 7), (500, 7)],
)
def test_t5_buckets_match_001_eq_d2(distance, bucket):
    expected = 4 + math.floor(4 * math.log(2 * distance / 8) / math.log(2 * 32 / 8)) if 4 <= distance < 32 else None
    if expected is not None:
        assert bucket == expected
    assert t5_bucket(torch.tensor([float(distance)]), 8, 32).item() == bucket


def test_t5_bias_looks_up_one_scalar_per_bucket_and_head():
    t5 = T5Bias(2, n_buckets=8, max_distance=32)
    positions = torch.arange(40)[None]
    bias = t5(positions, positions)
    assert bias[0, 1, 39, 0].item() == pytest.approx(t5.values.weight[7, 1].item())
    assert bias[0, 0, 10, 5].item() == pytest.approx(t5.values.weight[4, 0].item())


def test_shaw_scores_are_query_times_clipped_relative_vector():
    shaw = ShawRelativeKeys(head_dim=4, clip=2)
    q = torch.randn(1, 2, 5, 4)
    positions = torch.arange(5)[None]
    scores = shaw.scores(q, positions, positions)
    for i in range(5):
        for j in range(5):
            vector = shaw.vectors.weight[max(-2, min(2, j - i)) + 2]
            expected = (q[0, :, i] @ vector) / 2.0  # / sqrt(head_dim)
            assert torch.allclose(scores[0, :, i, j], expected, atol=1e-5)


def test_randomized_positions_are_sorted_distinct_and_in_range():
    sampler = RandomizedPositions(max_positions=50)
    positions = sampler(64, 20, torch.device("cpu"), torch.Generator().manual_seed(0), training=True)
    assert positions.shape == (64, 20)
    assert (positions[:, 1:] > positions[:, :-1]).all()  # sorted and distinct
    assert positions.min() >= 0 and positions.max() < 50
    assert positions.max() > 40  # the range beyond the sequence length is used
    again = sampler(64, 20, torch.device("cpu"), torch.Generator().manual_seed(0), training=True)
    assert torch.equal(positions, again)  # the generator alone decides them
    plain = sampler(2, 5, torch.device("cpu"), training=False)
    assert plain.tolist() == [list(range(5))] * 2  # test time: plain unless at_eval


def test_cyclic_positions_are_i_mod_t():
    assert CyclicPositions(3)(1, 8, torch.device("cpu"))[0].tolist() == [0, 1, 2, 0, 1, 2, 0, 1]


@pytest.mark.parametrize("sampler", sorted(POSITION_SAMPLERS))
def test_every_position_sampler_trains_a_model(sampler):
    from lengthgen import TrialConfig, train
    from lengthgen.config import EvalConfig, TaskConfig, TrainConfig

    config = TrialConfig(
        task=TaskConfig(name="successor", train_digits=(1, 2)),
        model=ModelConfig(pe="rope", positions=sampler, max_positions=64,
                          randomized_at_eval=sampler == "randomized"),
        train=TrainConfig(steps=3, batch_size=4, warmup=1, log_every=1),
        eval=EvalConfig(digits=(2, 4), samples=3),
    )
    first, second = train(config), train(config)
    assert first.status == "done"
    assert [r.correct for _, r in first.eval] == [r.correct for _, r in second.eval]
