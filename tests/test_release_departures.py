"""The options that reproduce what the authors' released code does where lg-study's
defaults differ (model.norm_placement pre_post_sum, model.init, model.attention_scale,
model.norm_eps, train.adam_eps): each against a transcription of the released code
(Cho et al. 2024: HanseulJo/position-coupling at b9cad94; McLeish et al. 2024:
mcleish7/arithmetic at 86022a5), each refused where it means nothing, and each at its
default building the model exactly as before it existed; position coupling's paper-era
numbering against that era's code; and every departure from the released code that
docs/methods.md lists, named in its study file. The Abacus training recipe's options:
tests/test_release_abacus_recipe.py."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from torch import nn

from lengthgen import TrialConfig, train
from lengthgen.config import EvalConfig, ModelConfig, TaskConfig, TrainConfig
from lengthgen.model import build_model
from lengthgen.model.attention import SelfAttention
from lengthgen.model.block import Block
from lengthgen.model.init import UnscaledQueries
from lengthgen.model.layers import GeGLUFeedForward, Residual, RMSNorm
from lengthgen.model.sizes import SIZES
from lengthgen.training_step import build_optimizer


def release_t5_layer_ff_pre_post(hidden, layer_norm, dense_relu_dense, layer_norm_2):
    """position-coupling src/model/modeling/custom_t5_decoder_only.py,
    CustomT5LayerFF.forward with layer_norm_position 'pre_post' (alpha 1.0 without
    deepnorm, dropout 0), transcribed."""
    forwarded_states = layer_norm(hidden)
    forwarded_states = dense_relu_dense(forwarded_states)
    hidden = 1.0 * hidden + forwarded_states
    return layer_norm_2(hidden)


def test_pre_post_sum_is_the_release_pre_post():
    torch.manual_seed(0)
    dims = SIZES["tiny"]
    ff = GeGLUFeedForward(dims, 0.0)
    residual = Residual(ff, dims.d_model, "rmsnorm", "pre_post_sum")
    with torch.no_grad():
        residual.norm_in.weight.uniform_(0.5, 1.5)
        residual.norm_sum.weight.uniform_(0.5, 1.5)
    x = torch.randn(3, 7, dims.d_model) * 4 + 1
    expected = release_t5_layer_ff_pre_post(x, residual.norm_in, ff, residual.norm_sum)
    assert torch.equal(residual(x), expected)
    # and it differs from lg-study's pre_post, x + N(f(N(x))), which never normalises the stream
    pre_post = Residual(ff, dims.d_model, "rmsnorm", "pre_post")
    assert not torch.allclose(pre_post(x), expected, atol=1e-3)


def test_norm_eps_reaches_every_norm_and_its_default_keeps_each_norms_own():
    config = ModelConfig(size="tiny", norm="layernorm", norm_placement="post", embedding_norm=True,
                         norm_eps=1e-12)
    model = build_model(config, 16, weight_seed=0)
    norms = [m for m in model.modules() if isinstance(m, (nn.LayerNorm, RMSNorm))]
    assert len(norms) == 2 * SIZES["tiny"].n_layers + 2 and {m.eps for m in norms} == {1e-12}
    plain = build_model(ModelConfig(size="tiny", norm="rmsnorm"), 16, weight_seed=0)
    assert {m.eps for m in plain.modules() if isinstance(m, RMSNorm)} == {None}
    assert {m.eps for m in build_model(ModelConfig(size="tiny"), 16, 0).modules()
            if isinstance(m, nn.LayerNorm)} == {1e-5}


def release_t5_stds(d_model: int, d_kv: int, n_heads: int, d_ff: int, factor: float = 1.0) -> dict[str, float]:
    """position-coupling custom_t5_decoder_only.py, CustomDecoderOnlyT5._init_weights
    (T5DenseGatedActDense and T5Attention branches, beta 1.0 without deepnorm), the
    learned positions of CustomT5Stack.__init__ (std factor * 1.0), the shared token
    embedding (nn.Embedding's own N(0, 1): CustomDecoderOnlyT5 is none of the classes
    whose `shared` _init_weights redraws) and the tied head, whose logits are the
    embedding applied to the last state times d_model ** -0.5."""
    return {
        "q": factor * (d_model * d_kv) ** -0.5, "k": factor * d_model**-0.5, "v": factor * d_model**-0.5,
        "o": factor * (n_heads * d_kv) ** -0.5, "wi": factor * d_model**-0.5, "wo": factor * d_ff**-0.5,
        "embedding": factor * 1.0, "positions": factor * 1.0, "head": factor * 1.0 * d_model**-0.5,
    }


def test_t5_initialisation_draws_the_release_standard_deviations():
    dims = SIZES["1l_1024_4h"]
    config = ModelConfig(size="1l_1024_4h", pe="learned", ffn="geglu", norm="rmsnorm", init="t5",
                         attention_scale="none", max_positions=203)
    model = build_model(config, 64, weight_seed=3)
    want = release_t5_stds(dims.d_model, dims.head_dim, dims.n_heads, dims.d_ff)
    attention = model.blocks[0].attention.sublayer
    q, k, v = attention.qkv.weight.split(dims.d_model)
    ff = model.blocks[0].feed_forward.sublayer
    drawn = {"q": q, "k": k, "v": v, "o": attention.out.weight, "wi": ff.gate_and_value.weight,
             "wo": ff.down.weight, "embedding": model.token_embedding.weight,
             "positions": model.pe.input_embedding.table.weight, "head": model.lm_head.weight}
    for name, weight in drawn.items():
        assert abs(weight.std().item() / want[name] - 1) < 0.05, name
        assert abs(weight.mean().item()) < 0.05 * want[name], name
    assert torch.count_nonzero(attention.qkv.bias) == 0
    assert all(torch.equal(m.weight, torch.ones_like(m.weight)) for m in model.modules() if isinstance(m, RMSNorm))
    # from the weight seed alone
    again = build_model(config, 64, weight_seed=3)
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), again.state_dict().values(), strict=True))


def release_t5_attention_unscaled(hidden, q_weight, k_weight, v_weight, o_weight, n_heads, mask):
    """transformers' T5Attention.forward as CustomT5Attention runs it for abs_learned
    positions: scores = q k^T with no 1/sqrt(d_kv), plus the mask, softmax in float,
    weights times values, then the output map (dropout 0), transcribed."""
    batch, length, _ = hidden.shape

    def shape(states):
        return states.view(batch, -1, n_heads, states.shape[-1] // n_heads).transpose(1, 2)

    query_states, key_states, value_states = (shape(hidden @ w.T) for w in (q_weight, k_weight, v_weight))
    scores = torch.matmul(query_states, key_states.transpose(3, 2))
    scores += mask
    attn_weights = nn.functional.softmax(scores.float(), dim=-1).type_as(scores)
    attn_output = torch.matmul(attn_weights, value_states).transpose(1, 2).reshape(batch, length, -1)
    return attn_output @ o_weight.T


def test_unscaled_attention_is_t5s_scores():
    torch.manual_seed(1)
    dims = SIZES["tiny"]  # head_dim 16: sqrt(16) = 4, a power of two, so scaling is exact
    attention = SelfAttention(dims, None, 0.0)
    attention.qkv = UnscaledQueries(attention.qkv, dims.head_dim)
    with torch.no_grad():
        for p in attention.parameters():
            p.normal_(0, 0.3)
        attention.qkv.bias.zero_()
        attention.out.bias.zero_()
    x = torch.randn(2, 6, dims.d_model)
    positions = torch.arange(6).expand(2, 6)
    causal = torch.full((6, 6), float("-inf")).triu(1)
    q, k, v = attention.qkv.weight.split(dims.d_model)
    expected = release_t5_attention_unscaled(x, q, k, v, attention.out.weight, dims.n_heads, causal)
    got = attention(x, positions, positions, None)
    assert torch.allclose(got, expected, atol=1e-5, rtol=1e-5)
    assert set(attention.state_dict()) == {"qkv.weight", "qkv.bias", "out.weight", "out.bias"}


def test_defaults_build_the_gpt2_model_bit_for_bit():
    """model.init gpt2 and attention_scale inv_sqrt_d are the model before they existed:
    every weight N(0, 0.02) and a plain query-key-value map."""
    model = build_model(ModelConfig(size="tiny"), 16, weight_seed=0)
    assert all(type(m.attention.sublayer.qkv) is nn.Linear for m in model.blocks)
    assert abs(model.token_embedding.weight.std().item() / 0.02 - 1) < 0.1


def test_adam_eps_reaches_the_optimizer():
    model = nn.Linear(2, 2)
    assert build_optimizer(model, TrainConfig()).defaults["eps"] == 1e-8  # torch's default
    assert build_optimizer(model, TrainConfig(adam_eps=1e-12)).defaults["eps"] == 1e-12


@pytest.mark.parametrize(("section", "values", "field"), [
    ("model", {"arch": "encoder_decoder", "init": "t5"}, "model.init"),
    ("model", {"arch": "encoder_decoder", "attention_scale": "none"}, "model.attention_scale"),
    ("model", {"norm_eps": 0.0}, "model.norm_eps"),
    ("train", {"adam_eps": -1.0}, "train.adam_eps"),
])
def test_refused_where_it_means_nothing(section, values, field):
    with pytest.raises(ValueError, match=field.replace(".", r"\.")):
        (ModelConfig if section == "model" else TrainConfig)(**values)


def test_block_takes_the_scale_of_the_config():
    dims = SIZES["tiny"]
    block = Block(dims, ModelConfig(attention_scale="none"), None)
    assert isinstance(block.attention.sublayer.qkv, UnscaledQueries)
    assert math.isclose(float(block.attention.sublayer.qkv.gain[0]), 4.0)


def test_new_fields_at_their_defaults_keep_the_trial_id():
    assert TrialConfig(model=ModelConfig(init="gpt2", attention_scale="inv_sqrt_d", norm_eps=None),
                       train=TrainConfig(adam_eps=1e-8)).trial_id == TrialConfig().trial_id


def paper_era_coupled_addition(a: int, b: int, reverse_input: bool, reverse_output: bool):
    """HanseulJo/position-coupling at e050132, src/data/addition.py: AdditionDataset
    with padding (every number 'P'-padded to overflow = max_len + 1, pad token '0') and
    AdditionDatasetWithCoupledPositions.__getitem__'s coupled branch with randomize
    False (start 1), transcribed: the question "a+b", its IDs (the last one "="'s), the
    answer and its IDs."""
    numbers, result = [a, b], a + b
    overflow = max(len(str(a)), len(str(b))) + 1
    inputs = [f"{'P' * (overflow - len(str(c)))}{c}" for c in numbers]
    labels = f"{'P' * (overflow - len(str(result)))}{result}"
    if reverse_input:
        inputs = [x[::-1] for x in inputs]
    if reverse_output:
        labels = labels[::-1]
    inputs = "+".join(inputs)
    a_str, b_str = inputs.split("+")
    max_len = max(len(a_str), len(b_str))
    start = 1
    end = start + max_len + 1
    input_positions = list(range(end - len(a_str), end + 1)) + list(range(end - len(b_str), end + 1))
    label_positions = list(range(end - len(labels), end))
    if reverse_input:
        input_positions[:-1] = input_positions[:-1][::-1]
    if reverse_output:
        label_positions = label_positions[::-1]
    return inputs.replace("P", "0"), input_positions, labels.replace("P", "0"), label_positions


@pytest.mark.parametrize(("reverse_operands", "reverse"), [(False, True), (False, False), (True, True)])
def test_paper_era_numbering_is_the_paper_era_code(reverse_operands, reverse):
    """Every row of 1- to 6-digit additions of independent operand lengths, at the
    lowest start: the paper-era code's text and IDs, "<s>" and "</s>" 0."""
    from model_helpers import tokenizer, written

    from lengthgen.config import FormatConfig
    from lengthgen.model.position.samplers import build_position_sampler

    trial = TrialConfig(task=TaskConfig(train_digits=(1, 6)),
                        format=FormatConfig(reverse=reverse, reverse_operands=reverse_operands, pad_overflow=True),
                        model=ModelConfig(pe="learned", positions="coupled", max_positions=16,
                                          coupled_equals="paper_era"), eval=EvalConfig(digits=(6,)))
    model = build_model(trial.model, len(tokenizer), 0, trial.input_layout)
    rng = np.random.default_rng(0)
    for _ in range(60):
        a, b = (int(rng.integers(0, 10 ** int(rng.integers(1, 7)))) for _ in range(2))
        n = max(len(str(a)), len(str(b)))
        tokens, prompt = written(trial, str(a).zfill(n), str(b).zfill(n))
        (ids,) = model.sample_positions(torch.as_tensor(tokens), torch.tensor([prompt]),
                                        build_position_sampler(trial.model), None, training=False)
        question, question_ids, answer, answer_ids = paper_era_coupled_addition(a, b, reverse_operands, reverse)
        text = tokenizer.decode(tokens[0].tolist(), keep_specials=True).replace("<pad>", "")
        assert text == f"<s>{question}={answer}</s>"
        assert ids[0].tolist()[: len(question) + len(answer) + 2] == [0, *question_ids, *answer_ids], text
        assert ids[0, len(question) + len(answer) + 2] == 0  # </s>


def test_paper_era_numbering_is_refused_without_its_padding_and_trains():
    from lengthgen.config import FormatConfig

    with pytest.raises(ValueError, match=r"format\.pad_overflow"):
        TrialConfig(model=ModelConfig(pe="learned", positions="coupled", coupled_equals="paper_era"))
    with pytest.raises(ValueError, match=r"format\.pad_overflow"):
        TrialConfig(format=FormatConfig(pad=False, pad_overflow=True))
    trial = TrialConfig(task=TaskConfig(train_digits=(1, 3)), format=FormatConfig(pad_overflow=True),
                        model=ModelConfig(size="tiny_1l", pe="learned", positions="coupled", max_positions=8,
                                          coupled_equals="paper_era"),
                        train=TrainConfig(steps=4, batch_size=8, warmup=1, log_every=2),
                        eval=EvalConfig(digits=(3,), samples=10))
    with pytest.raises(ValueError, match=r"model\.max_positions = 6"):
        replace(trial, model=replace(trial.model, max_positions=6))  # 3-digit rows: IDs 0 .. 6 (end = 1 + 4 + 1)
    replace(trial, model=replace(trial.model, max_positions=7))
    assert train(trial).status == "done"
    assert TrialConfig(format=FormatConfig(pad_overflow=False)).trial_id == TrialConfig().trial_id


#: every row of docs/methods.md's table of what remains beside the released code ("The
#: released code, read line by line"), by what opens the row (study, release file and
#: lines), and the words by which its study file's description names that departure
LISTED_DEPARTURES: dict[str, tuple[str, tuple[str, ...]]] = {
    "coupling, `custom_t5_decoder_only.py` lines 82–83": ("sota_coupling", ("rms + eps",)),
    "coupling, lines 1489–1492": ("sota_coupling", ("output head is untied",)),
    "coupling, `configs/training/default.yaml` line 15": ("sota_coupling", ("betas",)),
    "coupling, `scripts/addition/run_coupling.sh` line 61": (
        "sota_coupling", ("questions are drawn fresh each step", "two operands of one length")),
    "coupling, `scripts/addition/run_coupling.sh` lines 6, 55 and 58": ("sota_coupling", ("maxpos is 150",)),
    "coupling, `src/training/optimization.py` lines 14–15": ("sota_coupling", ("lr/500 at step 0",)),
    "coupling, `scripts/addition/eval_coupling.sh` lines 16 and 36": (
        "sota_coupling", ("1,000 test questions a length",)),
    "Abacus, `cramming.yaml` lines 17–20": ("sota_abacus", ("24-hour GPU budget", "warm-up, constant")),
    "Abacus, `torch_default.py` lines 214–232": ("sota_abacus", ("batch ramp read against the steps",)),
    "Abacus, `shells/addition_ff.sh` lines 3 and 9": ("sota_abacus", ("256 for the plain stack",)),
    "Abacus, `cramming/config/impl/torch-default.yaml` lines 19–21": ("sota_abacus", ("bf16 where they train in fp16",)),
    "Abacus, a set of 20 million questions": ("sota_abacus", ("a set of 20 million",)),
    "Abacus, `crammed-depthrecurrent.yaml` line 29": ("sota_abacus", ("no prediction head",)),
}


def remaining_release_departures() -> list[str]:
    """The first cells of the rows of docs/methods.md's table of what remains beside the
    released code."""
    text = (Path(__file__).parents[1] / "docs" / "methods.md").read_text()
    section = text.split("### The released code, read line by line", 1)[1].split("\n#", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith(("| coupling,", "| Abacus,"))]
    return [row[2:].split(" | ", 1)[0] for row in rows]


def test_every_study_file_lists_every_departure_from_the_release():
    """A departure docs/methods.md lists beside the released code is named in its study's
    description too (the study file says what it does not reproduce), and the table has
    no row this test does not know: a new departure needs its words here and there."""
    rows = remaining_release_departures()
    assert len(rows) == len(LISTED_DEPARTURES)
    for row in rows:
        opening = next((key for key in LISTED_DEPARTURES if row.startswith(key)), None)
        assert opening is not None, f"docs/methods.md's row {row!r} names no study description's words"
        study, words = LISTED_DEPARTURES[opening]
        document = yaml.safe_load((Path(__file__).parents[1] / "studies" / f"{study}.yaml").read_text())
        description = " ".join(document["description"].split())
        for word in words:
            assert word in description, (study, row, word)
