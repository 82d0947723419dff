"""The layer-level options that reproduce the authors' released code (model.ffn
geglu_tanh, model.attention_projection_bias, format.end_as_start, model.init
deepnorm_straight, model.output_adapter), each against a transcription of the release
(Cho et al. 2024: HanseulJo/position-coupling at b9cad94; McLeish et al. 2024:
mcleish7/arithmetic at 86022a5), refused where it means nothing and keeping the trial
id at its default; then the two study models with every option on: the coupling
model's logits against a transcription of the release's forward with the same weights,
the Abacus model's initial standard deviations against the release's."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch
from model_helpers import batch_of, tokenizer, written
from test_paper_departures import trials
from test_release_departures import release_t5_attention_unscaled

from lengthgen import TrialConfig
from lengthgen.config import FormatConfig, ModelConfig
from lengthgen.model import build_model
from lengthgen.model.attention import SelfAttention
from lengthgen.model.layers import GeGLUFeedForward, TanhGeGLUFeedForward
from lengthgen.model.position.samplers import build_position_sampler
from lengthgen.model.sizes import SIZES


def release_gelu_new(x: torch.Tensor) -> torch.Tensor:
    """transformers.activations.NewGELUActivation, T5's `gated-gelu` activation."""
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


def release_t5_gated_act_dense(hidden, wi_0, wi_1, wo):
    """transformers' T5DenseGatedActDense.forward (dropout 0): wo(act(wi_0 h) * wi_1 h)."""
    hidden_gelu = release_gelu_new(hidden @ wi_0.T)
    hidden_linear = hidden @ wi_1.T
    return (hidden_gelu * hidden_linear) @ wo.T


def test_geglu_tanh_is_t5s_gated_gelu():
    torch.manual_seed(0)
    dims = SIZES["tiny"]
    ff = TanhGeGLUFeedForward(dims, 0.0)
    with torch.no_grad():
        for p in ff.parameters():
            p.normal_(0, 0.3)
    x = torch.randn(3, 5, dims.d_model)
    wi_0, wi_1 = ff.gate_and_value.weight.chunk(2)
    expected = release_t5_gated_act_dense(x, wi_0, wi_1, ff.down.weight)
    torch.testing.assert_close(ff(x), expected, rtol=1e-5, atol=1e-5)
    exact = GeGLUFeedForward(dims, 0.0)
    exact.load_state_dict(ff.state_dict())  # the same weights: only the activation differs
    assert (exact(x) - expected).abs().max() > 1e-4


def release_pytorch_attention(hidden, in_proj_weight, out_weight, n_heads):
    """mcleish7/arithmetic cramming/architectures/attention.py SelfAttentionPyTorch with
    crammed-depthrecurrent.yaml's qkv_bias False and bias_in_proj False: torch's own
    nn.MultiheadAttention(bias=False, add_bias_kv=False), causal, run as the release runs it."""
    d_model, length = hidden.shape[-1], hidden.shape[1]
    attention = torch.nn.MultiheadAttention(d_model, n_heads, dropout=0.0, batch_first=True, bias=False,
                                            add_bias_kv=False)
    with torch.no_grad():
        attention.in_proj_weight.copy_(in_proj_weight)
        attention.out_proj.weight.copy_(out_weight)
    mask = torch.nn.Transformer.generate_square_subsequent_mask(length)
    return attention(hidden, hidden, hidden, attn_mask=mask, need_weights=False, is_causal=True)[0]


def test_attention_without_biases_is_the_releases():
    torch.manual_seed(1)
    dims = SIZES["tiny"]
    attention = SelfAttention(dims, None, 0.0, bias=False)
    assert set(attention.state_dict()) == {"qkv.weight", "out.weight"}
    with torch.no_grad():
        for p in attention.parameters():
            p.normal_(0, 0.3)
    x = torch.randn(2, 6, dims.d_model)
    positions = torch.arange(6).expand(2, 6)
    expected = release_pytorch_attention(x, attention.qkv.weight, attention.out.weight, dims.n_heads)
    torch.testing.assert_close(attention(x, positions, positions, None), expected, rtol=1e-5, atol=1e-5)
    # the block builds it from the config, and every other weight is drawn as with biases
    without = build_model(ModelConfig(size="tiny", attention_projection_bias=False), 16, weight_seed=0)
    plain = build_model(ModelConfig(size="tiny"), 16, weight_seed=0)
    assert all(b.attention.sublayer.qkv.bias is None and b.attention.sublayer.out.bias is None for b in without.blocks)
    kept = without.state_dict()
    assert all(torch.equal(value, kept[name]) for name, value in plain.state_dict().items() if name in kept)


def release_row_start(text: str) -> str:
    """position-coupling src/tokenization/tokenization.py build_tokenizer with eos True
    and bos_to_eos True: `if bos_to_eos: BOS = EOS`, the template f"{BOS} $A {EOS}"."""
    eos = "</s>"
    bos = eos
    return f"{bos}{text}{eos}"


def test_end_as_start_opens_the_row_with_the_end_token():
    coupled = ModelConfig(pe="learned", positions="coupled", max_positions=16)
    trial = TrialConfig(format=FormatConfig(end_as_start=True), model=coupled)
    tokens, prompt = written(trial, "085", "050")
    text = tokenizer.decode(tokens[0].tolist(), keep_specials=True).replace("<pad>", "")
    assert text == release_row_start("085+050=5310")
    plain = replace(trial, format=FormatConfig())
    plain_tokens, plain_prompt = written(plain, "085", "050")
    assert prompt == plain_prompt and (tokens[0, 1:] == plain_tokens[0, 1:]).all()
    # the start token keeps ID 0 of the coupled numbering (the release's start is 1)
    model = build_model(coupled, len(tokenizer), 0, trial.input_layout)
    sampler = build_position_sampler(coupled)
    ids = [model.sample_positions(torch.as_tensor(t), torch.tensor([prompt]), sampler, None, training=False)[0]
           for t in (tokens, plain_tokens)]
    assert torch.equal(ids[0], ids[1]) and ids[0][0, 0] == 0


@pytest.mark.parametrize(("section", "values", "field"), [
    (FormatConfig, {"end_as_start": True, "start_token": False}, "format.end_as_start"),
    (ModelConfig, {"arch": "encoder_decoder", "attention_projection_bias": False}, "model.attention_projection_bias"),
    (ModelConfig, {"arch": "encoder_decoder", "output_adapter": True}, "model.output_adapter"),
    (ModelConfig, {"arch": "encoder", "output_adapter": True}, "model.output_adapter"),
    (ModelConfig, {"arch": "encoder_decoder", "init": "deepnorm_straight"}, "model.init"),
])
def test_refused_where_it_means_nothing(section, values, field):
    with pytest.raises(ValueError, match=field.replace(".", r"\.")):
        TrialConfig(**{"format" if section is FormatConfig else "model": section(**values)})


def test_end_as_start_is_refused_with_aligned_rows():
    with pytest.raises(ValueError, match=r"format\.end_as_start"):
        TrialConfig(format=FormatConfig(end_as_start=True, fixed_length=True, reverse=False),
                    model=ModelConfig(arch="encoder"))


def test_the_new_fields_at_their_defaults_keep_the_trial_id():
    assert TrialConfig(format=FormatConfig(end_as_start=False),
                       model=ModelConfig(attention_projection_bias=True, output_adapter=False)).trial_id == \
        TrialConfig().trial_id


def release_output(model, hidden):
    """mcleish7/arithmetic crammed_depthrecurrent.py: the logits of a last state,
    `self.decoder(self.adapter(output_states))` with output_states =
    final_norm(head(hidden)) (lines 347-348; the forward's model_call likewise), head
    identity (lg-study has no prediction head), TransposedAdapter.forward
    F.linear(inputs, weight.T) with its [hidden, embedding] weight (lines 120-133)."""
    adapter_weight = model.output_adapter.weight.T  # the release stores the transposed map
    return model.lm_head(torch.nn.functional.linear(model.final_norm(hidden), adapter_weight.T))


def test_the_output_adapter_is_in_every_forward_and_in_generation():
    config = ModelConfig(size="tiny_1l", pe="nope", norm_placement="post", output_adapter=True)
    model = build_model(config, len(tokenizer), weight_seed=0).eval()
    plain = build_model(replace(config, output_adapter=False), len(tokenizer), weight_seed=0)
    # built last: every other weight is drawn as without it
    assert all(torch.equal(value, model.state_dict()[name]) for name, value in plain.state_dict().items())
    tokens = torch.randint(3, 14, (2, 7), generator=torch.Generator().manual_seed(0))
    positions = torch.arange(7).expand(2, 7)
    captured = {}
    model.final_norm.register_forward_hook(lambda m, args, out: captured.update(hidden=args[0]))
    logits = model(tokens, positions)
    torch.testing.assert_close(logits, release_output(model, captured["hidden"]), rtol=0, atol=0)
    # greedy decoding reads the same logits, token by token (the release's _generate)
    decoded = model.greedy_decode(tokens[:, :4], 3, (positions,), use_cache=True)
    by_hand = tokens[:, :4]
    with torch.no_grad():
        for _ in range(3):
            width = by_hand.shape[1]
            model(by_hand, positions[:, :width])
            step = release_output(model, captured["hidden"])[:, -1].argmax(-1, keepdim=True)
            by_hand = torch.cat([by_hand, step], dim=1)
    assert torch.equal(decoded, by_hand[:, 4:])


def release_rmsnorm(x, scale, eps):
    """position-coupling custom_t5_decoder_only.py RMSNorm.forward (p -1, no bias),
    lines 71-89: x / (||x|| d^-1/2 + eps) * scale."""
    rms_x = x.norm(2, dim=-1, keepdim=True) * x.shape[-1] ** (-1.0 / 2)
    return scale * (x / (rms_x + eps))


def release_coupling_forward(model, tokens, position_ids, eps):
    """CustomDecoderOnlyT5.forward of the release with position_encoding_type
    abs_learned, layer_norm_position pre_post, gated-gelu, dropout 0, transcribed:
    CustomT5Stack (inputs_embeds + wpe(position_ids)), per block CustomT5LayerSelfAttention
    and CustomT5LayerFF (h = layer_norm_2(h + f(layer_norm(h)))), T5Attention unscaled,
    causal through T5's extended mask (finfo.min), final_layer_norm, and the tied head:
    lm_head(h * d^-0.5) with lm_head the token embedding (lines 1484-1491)."""
    d_model = model.token_embedding.embedding_dim
    hidden = model.token_embedding.weight[tokens] + model.pe.input_embedding.table.weight[position_ids]
    length = tokens.shape[1]
    mask = torch.zeros(length, length, dtype=hidden.dtype).masked_fill(
        torch.ones(length, length).triu(1).bool(), torch.finfo(hidden.dtype).min)
    for block in model.blocks:
        attention, ff = block.attention, block.feed_forward
        q, k, v = attention.sublayer.qkv.weight.split(d_model)
        normed = release_rmsnorm(hidden, attention.norm_in.weight, eps)
        out = release_t5_attention_unscaled(normed, q, k, v, attention.sublayer.out.weight,
                                            attention.sublayer.n_heads, mask)
        hidden = release_rmsnorm(hidden + out, attention.norm_sum.weight, eps)
        wi_0, wi_1 = ff.sublayer.gate_and_value.weight.chunk(2)
        forwarded = release_t5_gated_act_dense(release_rmsnorm(hidden, ff.norm_in.weight, eps), wi_0, wi_1,
                                               ff.sublayer.down.weight)
        hidden = release_rmsnorm(hidden + forwarded, ff.norm_sum.weight, eps)
    hidden = release_rmsnorm(hidden, model.final_norm.weight, eps)
    return (hidden * d_model**-0.5) @ model.token_embedding.weight.T


def test_the_coupling_model_with_every_option_is_the_release_forward():
    """sota_coupling's model (width 1024, one layer, 4 heads): its logits on its own rows
    and coupled IDs within 1e-5 of the release's forward with the same weights, both in
    float64, so that what differs is the models, not float32's rounding of logits up to
    about 20 (in float32 the two differ by 9.5e-6 here). What is left, 5.5e-6, is the
    release's RMSNorm dividing by rms + eps (a departure docs/methods.md lists); with the
    exact GELU the logits differ by 4.8e-4. The release ties the head to the embedding,
    read after a d^-1/2 rescale (listed too): here the head holds that product."""
    trial = trials("sota_coupling")[0]
    assert (trial.model.ffn, trial.model.attention_projection_bias, trial.format.end_as_start) == \
        ("geglu_tanh", False, True)
    model = build_model(trial.model, len(tokenizer), trial.seeds.weight, trial.input_layout).eval().double()
    d_model = model.token_embedding.embedding_dim
    generator = torch.Generator().manual_seed(7)
    with torch.no_grad():
        model.lm_head.weight.copy_(model.token_embedding.weight * d_model**-0.5)
        for norm in (m for m in model.modules() if isinstance(m, torch.nn.RMSNorm)):
            norm.weight.copy_(0.5 + torch.rand(norm.weight.shape, generator=generator))
    batch = batch_of(replace(trial, train=replace(trial.train, batch_size=4)))
    tokens = torch.as_tensor(batch.tokens)
    assert (tokens[:, 0] == tokenizer.eos_id).all()
    # training positions (a random start per row) for the fed tokens, all but the last column
    (position_ids,) = model.sample_positions(tokens, torch.as_tensor(batch.prompt_lengths),
                                             build_position_sampler(trial.model), generator, training=True)
    tokens = tokens[:, :-1]
    with torch.no_grad():
        ours = model(tokens, position_ids)
        theirs = release_coupling_forward(model, tokens, position_ids, trial.model.norm_eps)
    assert ours.abs().max() > 1.0  # logits of the order of one: the tolerance is not vacuous
    torch.testing.assert_close(ours, theirs, rtol=0, atol=1e-5)


#: mcleish7/arithmetic cramming/data/arithmetic_tokenizers.py, the "pad" tokenizer of the
#: shells (CustomCharLevelTokenizerForAddingPadding): [PAD] [UNK] [BOS] [EOS] and
#: "0123456789+-x= ", the vocabulary size of its embedding and decoder
RELEASE_VOCABULARY = 19


def release_deepnorm_straight_stds(model: torch.nn.Module, depth: int) -> dict[str, float]:
    """mcleish7/arithmetic cramming/architectures/components.py `_init_module` with
    init_method "deepnorm-straight" (lines 292-371), transcribed and applied to the
    release's modules of these shapes; the standard deviation each weight comes out with."""
    gain = torch.as_tensor(8 * depth).pow(-0.25).item()
    d_model = model.token_embedding.embedding_dim
    heads = model.blocks[0].attention.sublayer.n_heads
    ff_in, ff_out = model.blocks[0].feed_forward.sublayer.gate_and_value, model.blocks[0].feed_forward.sublayer.down
    release = {
        "attention": torch.nn.MultiheadAttention(d_model, heads, bias=False, add_bias_kv=False, batch_first=True),
        "ff_in": torch.nn.Linear(d_model, ff_in.out_features, bias=False),
        "ff_out": torch.nn.Linear(ff_out.in_features, d_model, bias=False),
        "embedding": torch.nn.Embedding(model.token_embedding.num_embeddings, d_model),
        "abacus": torch.nn.Embedding(model.abacus.table.num_embeddings, d_model),
        "adapter": torch.nn.Linear(d_model, d_model, bias=False),  # TransposedAdapter, an nn.Linear
        # crammed_depthrecurrent.py line 451: the decoder, over the release's vocabulary
        "head": torch.nn.Linear(d_model, RELEASE_VOCABULARY, bias=False),
    }
    torch.manual_seed(11)
    with torch.no_grad():
        for module in release.values():
            if isinstance(module, torch.nn.MultiheadAttention):
                h = module.in_proj_weight.shape[1]
                q, k, v = (module.in_proj_weight.new_empty([h, h]) for _ in range(3))
                torch.nn.init.xavier_normal_(q, gain=1.0)
                torch.nn.init.xavier_normal_(k, gain=1.0)
                torch.nn.init.xavier_normal_(v, gain=gain)
                module.in_proj_weight.data.copy_(torch.cat([q, k, v], dim=0).contiguous())
                torch.nn.init.xavier_normal_(module.out_proj.weight, gain=gain)
            elif isinstance(module, torch.nn.Linear):
                torch.nn.init.xavier_normal_(module.weight, gain=gain)
            else:
                torch.nn.init.normal_(module.weight, mean=0, std=module.weight.shape[1] ** -0.5)
    q, k, v = release["attention"].in_proj_weight.split(d_model)
    stds = {"q": q, "k": k, "v": v, "o": release["attention"].out_proj.weight}
    stds.update({name: release[name].weight for name in ("ff_in", "ff_out", "embedding", "abacus", "adapter", "head")})
    return {name: weight.std().item() for name, weight in stds.items()}


def test_the_abacus_model_with_every_option_draws_the_release_stds():
    """sota_abacus's looped arm (width 1024, one layer looped 16 times: the gain of 16
    layers, as the stacks): every weight's standard deviation within 2 % of the
    release's; at width 1024: queries and keys 0.03125, values and the output map 0.0093,
    the output layer, Linear(1024, 19) in the release, 0.0130 (model.head_init_fan_out 19:
    lg-study's head has 120 outputs)."""
    trial = next(t for t in trials("sota_abacus") if t.model.loops == 16)
    assert (trial.model.init, trial.model.attention_projection_bias, trial.model.output_adapter) == \
        ("deepnorm_straight", False, True)
    model = build_model(trial.model, len(tokenizer), trial.seeds.weight, trial.input_layout)
    attention, ff = model.blocks[0].attention.sublayer, model.blocks[0].feed_forward.sublayer
    q, k, v = attention.qkv.weight.split(model.token_embedding.embedding_dim)
    ours = {"q": q, "k": k, "v": v, "o": attention.out.weight, "ff_in": ff.gate_and_value.weight,
            "ff_out": ff.down.weight, "embedding": model.token_embedding.weight, "abacus": model.abacus.table.weight,
            "adapter": model.output_adapter.weight, "head": model.lm_head.weight}
    theirs = release_deepnorm_straight_stds(model, 16)
    for name, weight in ours.items():
        assert abs(weight.std().item() / theirs[name] - 1) < 0.02, (name, weight.std().item(), theirs[name])
        assert abs(weight.mean().item()) < 0.02 * theirs[name], name
    assert theirs["q"] == pytest.approx(0.03125, rel=0.01) and theirs["v"] == pytest.approx(0.0093, rel=0.01)
    assert theirs["head"] == pytest.approx(0.0130, rel=0.01)
    assert all(b.attention.sublayer.qkv.bias is None for b in model.blocks)


def test_the_head_fan_out_is_the_releases_and_moves_nothing_else():
    """model.head_init_fan_out: the output layer of sota_abacus's model drawn as the
    release's Linear(1024, 19); its own 120 outputs leave it 4-5 % narrower, which the
    test of the stds above sees. Only the head moves, by the ratio of the two stds (one
    draw, scaled)."""
    trial = next(t for t in trials("sota_abacus") if t.model.loops == 16)
    assert trial.model.head_init_fan_out == RELEASE_VOCABULARY
    model = build_model(trial.model, len(tokenizer), trial.seeds.weight, trial.input_layout)
    own = build_model(replace(trial.model, head_init_fan_out=None), len(tokenizer), trial.seeds.weight,
                      trial.input_layout)
    theirs = release_deepnorm_straight_stds(model, 16)["head"]
    narrow = own.lm_head.weight.std().item() / theirs
    assert 0.94 < narrow < 0.98  # 120 outputs: sqrt((1024 + 19) / (1024 + 120)) = 0.955
    assert abs(model.lm_head.weight.std().item() / theirs - 1) < 0.02
    ratio = math.sqrt((1024 + len(tokenizer)) / (1024 + RELEASE_VOCABULARY))
    torch.testing.assert_close(model.lm_head.weight, own.lm_head.weight * ratio, rtol=1e-6, atol=0)
    kept = own.state_dict()
    assert all(torch.equal(value, kept[name]) for name, value in model.state_dict().items() if name != "lm_head.weight")
    with pytest.raises(ValueError, match=r"model\.head_init_fan_out does not apply to model\.init gpt2"):
        ModelConfig(head_init_fan_out=RELEASE_VOCABULARY)
    assert TrialConfig(model=ModelConfig(init="deepnorm_straight", head_init_fan_out=None)).trial_id == \
        TrialConfig(model=ModelConfig(init="deepnorm_straight")).trial_id
