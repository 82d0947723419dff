"""train.compile: the forward compiles whole (no graph break) on every architecture and
positional encoding, a trial compiles a bounded number of graphs, and the compiled step
trains what the uncompiled one does; train.compile_scope step: the forward with its
loss compiles whole, and trains what the uncompiled step does up to float rounding. torch._dynamo runs on the CPU with its "eager"
backend (graphs captured, not code-generated): what breaks a graph is the same on a GPU."""


from dataclasses import replace
from pathlib import Path

import pytest
import torch
import torch._dynamo

from lengthgen.batches import placed_parts, training_batch
from lengthgen.compiled_step import MAX_GRAPHS, CompiledForward, CompiledLoss
from lengthgen.config import (
    EvalConfig,
    FormatConfig,
    ModelConfig,
    TaskConfig,
    TrainConfig,
    TrialConfig,
    derive,
)
from lengthgen.model import ARCHITECTURES, build_model
from lengthgen.model.position.pe import POSITIONAL_ENCODINGS
from lengthgen.tokenizer import CharTokenizer
from lengthgen.training_step import TrainingStep
from orchestrator.studies.study import load_study

tokenizer = CharTokenizer()
QUICKSTART = Path(__file__).resolve().parents[1] / "studies" / "quickstart.yaml"


def trial(arch: str, pe: str, layout: dict | None = None, **model) -> TrialConfig | None:
    """A small trial of the architecture's layout; None where the config refuses it."""
    options = {"arch": arch, "size": "tiny", "pe": pe, "max_positions": 96, **model}
    train, evaluation = TrainConfig(batch_size=8, steps=24, warmup=2), EvalConfig(digits=(3,), samples=4)
    try:
        if ARCHITECTURES[arch].aligned_outputs:
            return TrialConfig(task=TaskConfig(name="multiplication", train_digits=(1, 6)),
                               format=FormatConfig(fixed_length=True, reverse=False, pad=False),
                               model=ModelConfig(**options), train=train, eval=evaluation)
        return TrialConfig(task=TaskConfig(name="addition", train_digits=(1, 8)), format=FormatConfig(**(layout or {"index_hints": True})),
                           model=ModelConfig(**options), train=train, eval=evaluation)
    except ValueError:
        return None


INTERLEAVED = {"interleave": True}  # what a windowed bias reads (000 App. A.4)
EVERY_PE = [(arch, pe, {}) for arch in ARCHITECTURES for pe in POSITIONAL_ENCODINGS if trial(arch, pe)]
#: what else reads the data in a forward: random positions (rows that differ), coupled
#: positions, Abacus indices, structural biases, looped layers
MORE = [
    ("decoder", "fire", {"positions": "randomized"}),
    ("decoder", "learned", {"positions": "coupled", "max_positions": 40}),
    ("decoder", "nope", {"abacus": True}),
    ("decoder", "nope", {"abacus": True, "abacus_offset": "batch", "abacus_non_digits": "row_zero"}),
    ("decoder", "alibi", {"attention_bias": "windowed", "layout": INTERLEAVED}),
    ("encoder_decoder", "t5", {"attention_bias": "windowed", "positions": "randomized", "layout": INTERLEAVED}),
    ("decoder", "rope", {"loops": 2, "input_injection": "loop", "size": "tiny_1l"}),
]


def _step_inputs(config: TrialConfig, step: int = 0):
    model = build_model(config.model, len(tokenizer), 0, derive(config).input_layout)
    training_step = TrainingStep(config, model, torch.device("cpu"))
    derived = derive(config)
    return model, training_step.parts(step, training_batch(config, derived.task, derived.distribution, tokenizer, step))


@pytest.mark.parametrize("arch, pe, model", EVERY_PE + MORE,
                         ids=[f"{a}-{p}" + "".join(f"-{k}" for k in m) for a, p, m in EVERY_PE + MORE])
def test_the_forward_of_a_training_step_compiles_without_a_graph_break(arch, pe, model):
    config = trial(arch, pe, **model)
    assert config is not None
    model, parts = _step_inputs(config)
    (batch, positions), = parts
    inputs = model.training_inputs(batch, positions)
    torch._dynamo.reset()
    with model.rows_decided(positions):
        explained = torch._dynamo.explain(model.forward)(*inputs.args, **inputs.kwargs)
    assert explained.graph_break_count == 0, [str(reason.reason).splitlines()[0] for reason in explained.break_reasons]
    assert explained.graph_count == 1


class CountingBackend:
    """A torch.compile backend that counts the graphs it is given and runs them as captured."""

    def __init__(self) -> None:
        self.graphs = 0

    def __call__(self, graph_module, example_inputs):
        self.graphs += 1
        return graph_module.forward


@pytest.mark.parametrize("positions", ["plain", "randomized"])
def test_a_trial_compiles_a_bounded_number_of_graphs_and_trains_as_uncompiled(positions, monkeypatch):
    """24 steps of 1-8-digit additions: batch widths change from step to step; the rows
    share their positions (plain) or not (randomized), one graph family each."""
    config = trial("decoder", "fire", positions=positions)
    widths, counting = set(), CountingBackend()
    model, _ = _step_inputs(config)
    eager = build_model(config.model, len(tokenizer), 0, derive(config).input_layout)
    compiled_step = TrainingStep(config, model, torch.device("cpu"), CompiledForward(model, backend=counting))
    eager_step = TrainingStep(config, eager, torch.device("cpu"))
    derived = derive(config)
    torch._dynamo.reset()
    for step in range(config.train.steps):
        batch = training_batch(config, derived.task, derived.distribution, tokenizer, step)
        widths.add(batch.tokens.shape[1])
        compiled_loss, eager_loss = compiled_step(step, batch), eager_step(step, batch)
        assert compiled_loss.item() == pytest.approx(eager_loss.item(), rel=1e-4, abs=1e-6)
    assert len(widths) > MAX_GRAPHS  # widths enough to make an unbounded count show
    assert 1 <= counting.graphs <= MAX_GRAPHS


def test_a_compiled_step_refuses_positions_past_the_table_as_the_uncompiled_one():
    config = trial("decoder", "learned", max_positions=96)
    model, parts = _step_inputs(config)
    (batch, positions), = parts
    too_far = (positions[0] + 200,)
    with pytest.raises(ValueError, match="past model.max_positions"):
        placed_parts(model, [(batch, too_far)], torch.device("cpu"))  # a training step checks on the host
    batch = batch._replace(supervised_index=None, rows_shared=None)  # no decisions: the forwards check
    with pytest.raises(ValueError, match="past model.max_positions"):
        model.forward_batch(batch, too_far)
    with pytest.raises(ValueError, match="past model.max_positions"):
        CompiledForward(model, backend=CountingBackend())(batch, too_far)


def test_the_rows_decision_is_undone_after_the_step():
    config = trial("decoder", "alibi")
    model, parts = _step_inputs(config)
    with model.rows_decided(parts[0][1]):
        assert model.pe.rows_shared is True  # plain positions: every row alike
    assert model.pe.rows_shared is None


#: train.compile_scope step's loss, on the quickstart's models (a decoder of each kind of
#: position it trains: RoPE, the windowed bias, coupled positions), an encoder-decoder, a
#: looped model's passes of the progressive loss, and written-out attention
STEP_MODELS = [
    ("decoder", "rope", {}),
    ("decoder", "nope", {"attention_bias": "windowed", "layout": INTERLEAVED}),
    ("decoder", "learned", {"positions": "coupled", "max_positions": 40}),
    ("decoder", "alibi", {"attention_kernel": "math"}),
    ("encoder_decoder", "t5", {"positions": "randomized"}),
    ("decoder", "rope", {"loops": 2, "input_injection": "loop", "size": "tiny_1l"}),
]


def _step_config(config: TrialConfig, **train) -> TrialConfig:
    return replace(config, train=replace(config.train, compile=True, compile_scope="step", **train))


@pytest.mark.parametrize("arch, pe, model", STEP_MODELS,
                         ids=[f"{a}-{p}" + "".join(f"-{k}" for k in m) for a, p, m in STEP_MODELS])
def test_the_loss_of_a_compiled_step_compiles_without_a_graph_break(arch, pe, model):
    config = trial(arch, pe, **model)
    model, parts = _step_inputs(config)
    (batch, positions), = parts
    inputs = model.training_inputs(batch, positions)
    compiled = CompiledLoss(model, torch.device("cpu"), backend="eager")
    options = {"loops": (1, 1)} if config.model.loops > 1 else {}
    torch._dynamo.reset()
    with model.rows_decided(positions):
        explained = torch._dynamo.explain(compiled.supervised_loss)(
            inputs.targets, inputs.supervised, inputs.args, inputs.kwargs, options)
    assert explained.graph_break_count == 0, [str(reason.reason).splitlines()[0] for reason in explained.break_reasons]
    assert explained.graph_count == 1


#: a quickstart-like decoder in 2 length buckets (the parts' weights), an encoder-decoder whole
STEP_TRAINED = [(*STEP_MODELS[1], 2), (*STEP_MODELS[4], 1)]


@pytest.mark.parametrize("arch, pe, model, buckets", STEP_TRAINED, ids=["windowed-buckets", "encoder_decoder"])
def test_a_compiled_step_trains_what_the_eager_step_trains_to_rounding(arch, pe, model, buckets):
    """The graph of forward and loss as torch._dynamo captures it (run by its eager
    backend; the slow test below has Inductor compile it), fused AdamW: the losses and
    weights of 4 steps are the eager step's (sdpa, foreach AdamW) up to float rounding."""
    eager_config = trial(arch, pe, **model)
    eager_config = replace(eager_config, train=replace(eager_config.train, length_buckets=buckets))
    config = _step_config(eager_config)
    derived, cpu = derive(config), torch.device("cpu")
    eager = build_model(config.model, len(tokenizer), 0, derived.input_layout)
    compiled = build_model(config.model, len(tokenizer), 0, derived.input_layout)
    eager_step = TrainingStep(eager_config, eager, cpu)
    compiled_step = TrainingStep(config, compiled, cpu, CompiledLoss(compiled, cpu, backend="eager"))
    assert compiled_step.optimizer.defaults["fused"] and not eager_step.optimizer.defaults.get("fused")
    torch._dynamo.reset()
    for step in range(4):
        batch = training_batch(config, derived.task, derived.distribution, tokenizer, step)
        assert compiled_step(step, batch).item() == pytest.approx(eager_step(step, batch).item(), rel=1e-5)
    _weights_agree(compiled, eager, config.train.lr)


def _weights_agree(actual: torch.nn.Module, expected: torch.nn.Module, lr: float) -> None:
    """To rounding: AdamW's normalised update amplifies the rounding of a gradient near
    zero up to a step's size, about lr, so a weight near zero may differ by a little of it."""
    for a, e in zip(actual.parameters(), expected.parameters(), strict=True):
        torch.testing.assert_close(a, e, rtol=1e-4, atol=1e-2 * lr)


def test_the_compiled_step_is_the_trials_and_needs_train_compile():
    config = trial("decoder", "rope")
    model = build_model(config.model, len(tokenizer), 0, derive(config).input_layout)
    assert isinstance(TrainingStep(_step_config(config), model, torch.device("cpu")).forward_batch, CompiledLoss)
    assert isinstance(TrainingStep(replace(config, train=replace(config.train, compile=True)), model,
                                   torch.device("cpu")).forward_batch, CompiledForward)
    with pytest.raises(ValueError, match="train.compile_scope step is what train.compile compiles"):
        TrainConfig(compile_scope="step")
    assert "compile_scope" not in config.identity_json()


@pytest.mark.slow  # Inductor compiles a forward, a backward and its C++ wrappers: 15-40 s cold on one CPU thread
@pytest.mark.long
def test_a_quickstart_step_compiled_by_inductor_trains_what_the_eager_step_trains_to_rounding(monkeypatch):
    """The real thing on a quickstart model (the windowed bias, written-out attention):
    Inductor's generated C++ and its C++ wrapper, 4 steps."""
    eager_config = load_study(QUICKSTART).trials[2]
    config = _step_config(replace(eager_config, model=replace(eager_config.model, attention_kernel="math")))
    derived, cpu = derive(config), torch.device("cpu")
    eager = build_model(eager_config.model, len(tokenizer), 0, derived.input_layout)
    compiled = build_model(config.model, len(tokenizer), 0, derived.input_layout)
    eager_step, compiled_step = TrainingStep(eager_config, eager, cpu), TrainingStep(config, compiled, cpu)
    for step in range(4):
        batch = training_batch(config, derived.task, derived.distribution, tokenizer, step)
        assert compiled_step(step, batch).item() == pytest.approx(eager_step(step, batch).item(), rel=1e-5)
    _weights_agree(compiled, eager, config.train.lr)
