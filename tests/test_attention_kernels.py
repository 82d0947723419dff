"""model.attention_kernel flex and math against the reference (sdpa) on the CPU: the
forward of every architecture and positional encoding, and the value and gradient of every bias
computed inside the kernel. torch 2.13 runs FlexAttention's forward on a CPU (unfused)
but has no backward there: the gradients are checked on the function the kernel
evaluates, the score_mod, evaluated over every (b, h, q, k) at once."""

from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F
from test_compiled_step import EVERY_PE, trial

from lengthgen.batches import training_batch
from lengthgen.config import ModelConfig, derive
from lengthgen.model import build_model
from lengthgen.model.attention_kernels import PointwiseBias, sdpa_attend
from lengthgen.model.position.pe.biases import ALiBi, KerpleLog, T5Bias
from lengthgen.tokenizer import CharTokenizer
from lengthgen.training_step import TrainingStep

tokenizer = CharTokenizer()
#: FlexAttention unfused on a CPU says so once; that is what these tests run
pytestmark = pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")


def _both(config, kernel: str = "flex"):
    """The trial's model with the reference kernel and with `kernel`, the same weights,
    and a training batch's inputs."""
    other_config = replace(config, model=replace(config.model, attention_kernel=kernel))
    layout = derive(config).input_layout
    reference = build_model(config.model, len(tokenizer), 0, layout)
    other = build_model(other_config.model, len(tokenizer), 0, layout)
    derived = derive(config)
    batch = training_batch(config, derived.task, derived.distribution, tokenizer, 0)
    (part, positions), = TrainingStep(config, reference, torch.device("cpu")).parts(0, batch)
    return reference, other, reference.training_inputs(part, positions)


@pytest.mark.parametrize("arch, pe, model", EVERY_PE + [("decoder", "t5", {"positions": "randomized"}),
                                                        ("encoder_decoder", "alibi", {"positions": "randomized"})],
                         ids=[f"{a}-{p}" + "".join(f"-{k}" for k in m) for a, p, m in EVERY_PE] + ["t5-random", "ed-alibi-random"])
@pytest.mark.parametrize("kernel", ["flex", "math"])
def test_the_flex_and_math_forwards_are_the_reference_forward(arch, pe, model, kernel):
    reference, other, inputs = _both(trial(arch, pe, **model), kernel)
    assert torch.equal(torch.cat([p.flatten() for p in reference.parameters()]),
                       torch.cat([p.flatten() for p in other.parameters()]))
    with torch.no_grad():
        expected, actual = reference(*inputs.args, **inputs.kwargs), other(*inputs.args, **inputs.kwargs)
    torch.testing.assert_close(actual, expected, rtol=1e-5, atol=1e-5)


def _materialised(bias: PointwiseBias, rows: int, length: int, keys: int) -> torch.Tensor:
    """The score_mod over every (b, h, q, k), from a zero score: the bias the kernel adds."""
    b = torch.arange(rows)[:, None, None, None]
    h = torch.arange(bias.n_heads)[None, :, None, None]
    q, k = torch.arange(length)[None, None, :, None], torch.arange(keys)[None, None, None, :]
    return bias.score_mod()(torch.zeros(()), b, h, q, k)


BIASES = {"alibi": lambda: ALiBi(4), "kerple_log": lambda: KerpleLog(4), "t5": lambda: T5Bias(4),
          "t5_bidirectional": lambda: T5Bias(4, bidirectional=True)}


@pytest.mark.parametrize("name", sorted(BIASES))
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("shared", [True, False])
def test_an_in_kernel_bias_has_the_reference_values_and_gradients(name, causal, shared):
    torch.manual_seed(0)
    module = BIASES[name]()
    if hasattr(module, "initialize"):
        module.initialize(torch.Generator().manual_seed(1))
    with torch.no_grad():
        for parameter in module.parameters():  # T5's values start at zero: give them some
            parameter.add_(torch.rand(parameter.shape))
    rows, length = (1 if shared else 3), 9
    positions = torch.sort(torch.randperm(60)[:length].repeat(rows, 1) if shared else
                           torch.stack([torch.randperm(60)[:length] for _ in range(rows)]), dim=1).values
    bias = PointwiseBias(module.kernel_function(), positions, positions, 4, causal)

    def reference() -> torch.Tensor:
        values = module(positions, positions)
        return values.masked_fill(torch.ones(length, length).triu(1).bool(), -torch.inf) if causal else values

    assert torch.equal(_materialised(bias, rows, length, length), reference())
    assert torch.equal(bias.dense(), reference())
    if not list(module.parameters()):
        return  # ALiBi's slopes are fixed: nothing to differentiate
    q, k, v = (torch.randn(3, 4, length, 8) for _ in range(3))
    gradients = []
    for mask in (reference, lambda: _materialised(bias, rows, length, length)):
        module.zero_grad()
        F.scaled_dot_product_attention(q, k, v, attn_mask=mask()).square().sum().backward()
        gradients.append([p.grad.clone() for p in module.parameters()])
    for expected, actual in zip(*gradients, strict=True):
        torch.testing.assert_close(actual, expected, rtol=1e-6, atol=1e-7)


def test_flex_is_refused_with_dropout_and_for_training_on_the_cpu():
    with pytest.raises(ValueError, match="model.attention_kernel flex has no attention dropout"):
        ModelConfig(attention_kernel="flex", dropout=0.1)
    config = trial("decoder", "alibi")
    config = replace(config, model=replace(config.model, attention_kernel="flex"))
    model = build_model(config.model, len(tokenizer), 0, derive(config).input_layout)
    with pytest.raises(ValueError, match="trains on CUDA only"):
        TrainingStep(config, model, torch.device("cpu"))


def test_the_flex_kernel_is_part_of_the_trials_identity_only_when_chosen():
    config = trial("decoder", "alibi")
    flex = replace(config, model=replace(config.model, attention_kernel="flex"))
    assert "attention_kernel" not in config.identity_json() and flex.trial_id != config.trial_id


def test_the_reference_attention_is_the_plain_sdpa_call():
    q, k, v = (torch.randn(2, 4, 5, 8) for _ in range(3))
    assert torch.equal(sdpa_attend(q, k, v, None, 0.0, True), F.scaled_dot_product_attention(q, k, v, is_causal=True))
