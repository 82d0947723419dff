"""McLeish et al. 2024's decoder (arXiv 2405.17399 §3.2; lengthgen.model.recurrence):
looped layers with shared weights, input injection, the embedding norm and post-LN,
each against a hand computation from the model's own modules; the plain decoder left as
it was; cached decoding of looped models; the presets; the refusals."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F
from model_helpers import SEQUENTIAL_PES, tokenizer

from lengthgen.config import ModelConfig, TaskConfig, TrialConfig
from lengthgen.evaluation import greedy_decode, teacher_forced_argmax
from lengthgen.model import build_model, count_parameters
from lengthgen.model.layers import GeGLUFeedForward, Residual
from lengthgen.model.position.samplers import build_position_sampler
from lengthgen.model.sizes import SIZES

VOCAB = len(tokenizer)


def rows(batch: int = 3, length: int = 11, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    tokens = torch.randint(3, 16, (batch, length), generator=torch.Generator().manual_seed(seed))
    return tokens, torch.arange(length).expand(batch, length)


def by_hand(model, tokens, positions, layers) -> torch.Tensor:
    """Logits of a NoPE decoder (no mask, no rotation) whose state goes through
    `layers(x, embedded)`: the embedding, then that, then the final norm and the head."""
    embedded = model.embedding_norm(model.embed(tokens, positions, model.pe, None))
    x = layers(embedded, embedded, positions)
    return model.lm_head(model.final_norm(x))


def block(model, index, x, positions):
    return model.blocks[index](x, positions, positions, None, None, 0, None)


def test_one_loop_without_injection_is_the_plain_stack_bit_for_bit():
    """The defaults (loops 1, injection none, no embedding norm) draw the weights and
    compute the logits of the decoder as it was: each layer once, in order."""
    cfg = ModelConfig(pe="nope")
    model = build_model(cfg, VOCAB, 5)
    explicit = build_model(replace(cfg, loops=1, input_injection="none", embedding_norm=False), VOCAB, 5)
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), explicit.state_dict().values(),
                                                 strict=True))
    tokens, positions = rows()

    def plain(x, embedded, positions):
        for index in range(len(model.blocks)):
            x = block(model, index, x, positions)
        return x

    assert torch.equal(model(tokens, positions), by_hand(model, tokens, positions, plain))
    assert isinstance(model.embedding_norm, torch.nn.Identity)


@pytest.mark.parametrize("variant", [{"loops": 3}, {"loops": 2, "input_injection": "loop"},
                                     {"input_injection": "layer"}, {"norm_placement": "post"}])
def test_loops_injection_and_post_ln_draw_the_plain_decoders_weights(variant):
    """Looping and injection add no weight; post-LN moves the norms (which draw nothing)
    and leaves every other weight as the weight seed draws it for pre-LN."""
    plain = build_model(ModelConfig(), VOCAB, 2).state_dict()
    other = build_model(ModelConfig(**variant), VOCAB, 2).state_dict()
    drawn = [k for k in plain if "norm" not in k]
    assert drawn == [k for k in other if "norm" not in k]
    assert all(torch.equal(plain[k], other[k]) for k in drawn)


def test_embedding_norm_adds_one_norm_and_normalises_the_embedded_input():
    plain = build_model(ModelConfig(pe="nope"), VOCAB, 2)
    normed = build_model(ModelConfig(pe="nope", embedding_norm=True), VOCAB, 2)
    assert set(normed.state_dict()) - set(plain.state_dict()) == {"embedding_norm.weight", "embedding_norm.bias"}
    assert all(torch.equal(v, normed.state_dict()[k]) for k, v in plain.state_dict().items())
    tokens, positions = rows()

    def plain_layers(x, embedded, positions):
        for index in range(len(normed.blocks)):
            x = block(normed, index, x, positions)
        return x

    expected = F.layer_norm(normed.token_embedding(tokens), (64,))  # unit gains, zero biases
    assert torch.equal(normed.embedding_norm(normed.embed(tokens, positions, normed.pe, None)), expected)
    assert torch.equal(normed(tokens, positions), by_hand(normed, tokens, positions, plain_layers))


def test_parameters_do_not_depend_on_loops_and_two_loops_apply_the_block_twice():
    one, two, four = (build_model(ModelConfig(pe="nope", loops=n), VOCAB, 1) for n in (1, 2, 4))
    assert count_parameters(one) == count_parameters(two) == count_parameters(four)
    tokens, positions = rows()

    def twice(x, embedded, positions):
        for _ in range(2):
            for index in range(len(two.blocks)):
                x = block(two, index, x, positions)
        return x

    assert torch.equal(two(tokens, positions), by_hand(two, tokens, positions, twice))
    assert not torch.allclose(two(tokens, positions), one(tokens, positions))


def test_loop_injection_adds_the_embedded_input_before_every_loop_after_the_first():
    """The authors' TransformerBlock.forward: states + injected_state, then the block's layers."""
    model = build_model(ModelConfig(pe="nope", abacus=True, loops=3, input_injection="loop",
                                    embedding_norm=True, max_positions=64), VOCAB, 4)
    tokens, positions = rows()
    abacus = torch.randint(0, 20, tokens.shape, generator=torch.Generator().manual_seed(1))
    embedded = model.embedding_norm(model.embed(tokens, positions, model.pe, abacus))
    assert model.abacus(tokens, abacus).abs().sum() > 0  # the injected input holds the Abacus vectors
    x = embedded
    for loop in range(3):
        x = x + embedded if loop > 0 else x
        for index in range(2):
            x = block(model, index, x, positions)
    expected = model.lm_head(model.final_norm(x))
    assert torch.equal(model(tokens, positions, abacus=abacus), expected)


def test_layer_injection_adds_the_embedded_input_before_every_layer_after_the_first():
    """The authors' ReplicaConcat (forward_only_model_with_skip): one block per layer."""
    model = build_model(ModelConfig(pe="nope", loops=2, input_injection="layer"), VOCAB, 4)
    tokens, positions = rows()

    def injected_everywhere(x, embedded, positions):
        for loop in range(2):
            for index in range(2):
                x = x + embedded if (loop, index) != (0, 0) else x
                x = block(model, index, x, positions)
        return x

    assert torch.equal(model(tokens, positions), by_hand(model, tokens, positions, injected_everywhere))


def test_post_ln_normalises_the_residual_sum():
    sublayer = torch.nn.Linear(8, 8)
    residual = Residual(sublayer, 8, "layernorm", "post")
    x = torch.randn(2, 8)
    assert torch.equal(residual(x), residual.norm_sum(x + sublayer(x)))
    assert isinstance(residual.norm_in, torch.nn.Identity) and isinstance(residual.norm_out, torch.nn.Identity)
    torch.testing.assert_close(residual(x).mean(-1), torch.zeros(2), atol=1e-6, rtol=0)


@pytest.mark.parametrize("pe", SEQUENTIAL_PES)
@pytest.mark.parametrize("injection", ["loop", "layer"])
def test_cached_greedy_equals_uncached_greedy_for_looped_models(pe, injection):
    """Every pass through a layer has its own cache slot: a cached looped model decodes
    what it decodes re-running the whole sequence for every token."""
    cfg = ModelConfig(pe=pe, abacus=True, loops=3, input_injection=injection, embedding_norm=True,
                      norm_placement="post", max_positions=64)
    model = build_model(cfg, VOCAB, weight_seed=3).eval()
    tokens = torch.randint(3, 16, (6, 17), generator=torch.Generator().manual_seed(0))
    tokens[:, 0], tokens[:, 6] = tokenizer.bos_id, tokenizer.id("=")
    positions = model.sample_positions(tokens, torch.full((6,), 7), build_position_sampler(cfg),
                                       torch.Generator().manual_seed(1), training=True)
    cached = greedy_decode(model, tokens[:, :7], 9, positions, use_cache=True)
    uncached = greedy_decode(model, tokens[:, :7], 9, positions, use_cache=False)
    assert torch.equal(cached, uncached)
    assert len(set(cached.flatten().tolist())) > 1  # not one constant token: a strict comparison
    forced = teacher_forced_argmax(model, torch.cat([tokens[:, :7], cached], dim=1), positions, 7)
    assert torch.equal(forced, cached)
    # random weights give argmax tokens that hardly depend on the context: the logits too
    place, abacus = positions[0], positions[1]
    context = model._rows(6, 7, 16, tokens.device)  # the 16 columns the positions cover
    whole = model(tokens[:, :16], place, abacus=abacus, **context)
    cache = model.empty_cache()
    steps = [model(tokens[:, :7], place[:, :7], cache, abacus=abacus[:, :7], **context)]
    steps += [model(tokens[:, t : t + 1], place[:, t : t + 1], cache, abacus=abacus[:, t : t + 1]) for t in range(7, 16)]
    torch.testing.assert_close(torch.cat(steps, dim=1), whole, rtol=1e-5, atol=1e-6)


def test_looped_model_trains_every_weight():
    model = build_model(ModelConfig(loops=2, input_injection="loop", embedding_norm=True,
                                    norm_placement="post"), VOCAB, 0)
    tokens, positions = rows()
    loss = F.cross_entropy(model(tokens, positions).flatten(0, 1), tokens.flatten())
    loss.backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in model.parameters())


@pytest.mark.parametrize("size", ["16l_1024", "8l_1024", "4l_1024", "1l_1024"])
def test_presets_have_the_authors_width_and_feed_forward(size):
    """hidden_size 1024, 16 heads; their GELU-GLU FFNComponent (no biases): dense_in
    1024 -> intermed_size 2048, split into value and gate, dense_out 1024 -> 1024."""
    dims = SIZES[size]
    assert (dims.d_model, dims.n_heads, dims.n_layers) == (1024, 16, int(size.split("l")[0]))
    ffn = GeGLUFeedForward(dims, dropout=0.0)
    assert ffn.gate_and_value.weight.shape == (2048, 1024) and ffn.down.weight.shape == (1024, 1024)
    assert ffn.gate_and_value.bias is None and ffn.down.bias is None


def test_refusals_name_the_field_and_the_choices():
    with pytest.raises(ValueError, match=r"model.loops must be an integer >= 1 .*got 0"):
        ModelConfig(loops=0)
    with pytest.raises(ValueError, match=r"model.loops must be an integer >= 1 .*got True"):
        ModelConfig(loops=True)
    with pytest.raises(ValueError, match=r"model.input_injection loop adds the embedded input nowhere in "
                                         r"model.loops 1.*Raise model.loops, or choose among none, layer$"):
        ModelConfig(input_injection="loop")
    with pytest.raises(ValueError, match=r"model.input_injection layer adds .* nowhere.*choose among none$"):
        ModelConfig(size="tiny_1l", input_injection="layer")
    ModelConfig(size="tiny_1l", loops=2, input_injection="layer")  # a one-layer block looped: it adds
    for arch in ("encoder", "encoder_decoder"):
        for option, value in (("loops", 2), ("input_injection", "layer"), ("embedding_norm", True)):
            with pytest.raises(ValueError, match=rf"model.{option} does not apply to model.arch {arch}, "
                                                 rf"only to decoder; remove it"):
                ModelConfig(arch=arch, **{option: value})


def test_new_options_at_their_defaults_keep_the_trial_id():
    assert TrialConfig(model=ModelConfig(loops=1, input_injection="none", embedding_norm=False)).trial_id == \
        TrialConfig().trial_id
    looped = TrialConfig(task=TaskConfig(), model=ModelConfig(loops=2, input_injection="loop"))
    assert looped.trial_id != TrialConfig().trial_id
