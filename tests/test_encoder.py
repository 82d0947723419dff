"""The encoder-only model of 003 (§3, App. B) on the aligned layout, and UPE (003 §3.2,
eq. 3.3): loss and exact match on the aligned answer columns, every positional
encoding bidirectional, the uniform key vectors of the multiplier's digits."""

import math

import pytest
import torch

from lengthgen import TrialConfig, train
from lengthgen.config import EvalConfig, FormatConfig, ModelConfig, TaskConfig, TrainConfig
from lengthgen.evaluation import build_eval_sets, eval_generator
from lengthgen.formats import input_layout
from lengthgen.layout import InputLayout
from lengthgen.model import build_model
from lengthgen.model.encoder import EncoderLM
from lengthgen.model.position.pe import POSITIONAL_ENCODINGS
from lengthgen.model.position.pe.relative_keys import UniformRelativeKeys
from lengthgen.model.position.samplers import build_position_sampler
from lengthgen.model.sizes import SIZES
from lengthgen.tasks import TASKS, build_task
from lengthgen.tokenizer import CharTokenizer

tokenizer = CharTokenizer()
ALIGNED = FormatConfig(fixed_length=True, reverse=False, pad=False)


@pytest.mark.parametrize("pe", sorted(POSITIONAL_ENCODINGS))
def test_every_encoding_reads_both_ways(pe):
    layout = InputLayout(uniform_columns=(0, 1))
    model = build_model(ModelConfig(arch="encoder", pe=pe, max_positions=64), len(tokenizer), 0, layout).eval()
    tokens = torch.randint(3, len(tokenizer), (2, 12), generator=torch.Generator().manual_seed(0))
    changed = tokens.clone()
    changed[:, -1] = 3 + (changed[:, -1] + 1 - 3) % (len(tokenizer) - 3)
    positions = torch.arange(12).expand(2, 12)
    with torch.no_grad():
        before, after = model(tokens, positions), model(changed, positions)
    assert before.shape == (2, 12, len(tokenizer))
    assert not torch.allclose(before[:, 0], after[:, 0])  # the first position sees the last


def test_upe_gives_the_multiplier_keys_one_vector_each_and_shaw_elsewhere():
    """003 eq. 2.1 with eq. 3.3: score(i, j) += q_i . c_m for key j the m-th multiplier
    digit (every query i), q_i . p_clip(j - i) for every other key, over sqrt(d_head)."""
    keys = UniformRelativeKeys(head_dim=4, clip=2, uniform_columns=(0, 1))
    torch.nn.init.normal_(keys.uniform.weight)
    q = torch.randn(1, 2, 6, 4)
    positions = torch.arange(6)[None]
    scores = keys.scores(q, positions, positions)
    for i in range(6):
        for j in range(6):
            vector = keys.uniform.weight[j] if j in (0, 1) else keys.vectors.weight[max(-2, min(2, j - i)) + 2]
            assert torch.allclose(scores[0, :, i, j], q[0, :, i] @ vector / 2.0, atol=1e-5)


def test_the_aligned_layout_names_the_multiplier_columns():
    multiplication = TASKS["multiplication"].from_config(TaskConfig(name="multiplication", multiplier_digits=3))
    assert input_layout(multiplication, ALIGNED, 20).uniform_columns == (0, 1, 2)  # "k digits * W cells"
    assert input_layout(TASKS["n_by_1"](), ALIGNED, 6).uniform_columns == (7,)  # "W cells * b"
    assert input_layout(TASKS["addition"](), ALIGNED, 6).uniform_columns == ()


def aligned_config(task="addition", pe="shaw", steps=60, **task_options) -> TrialConfig:
    return TrialConfig(
        task=TaskConfig(name=task, train_digits=(1, 3), **task_options),
        format=ALIGNED,
        model=ModelConfig(arch="encoder", pe=pe),
        train=TrainConfig(steps=steps, batch_size=32, lr=3e-3, warmup=5, log_every=steps),
        eval=EvalConfig(digits=(2, 3, 4), samples=30),
    )


def test_exact_match_is_the_argmax_at_every_answer_column_in_one_pass():
    config = aligned_config()
    states, reports = [], []
    result = train(config, on_report=lambda r: (reports.append(r), r.checkpoint and states.append(r.checkpoint())))
    model = build_model(config.model, len(tokenizer), 0, config.input_layout)
    model.load_state_dict(states[-1]["model"])
    model.eval()
    sampler = build_position_sampler(config.model)
    for eval_set, length in zip(build_eval_sets(config, build_task(config.task), tokenizer), result.eval):
        questions = eval_set.questions
        tokens = torch.from_numpy(questions.tokens)
        positions = sampler(*tokens.shape, torch.device("cpu"), eval_generator(config, eval_set.digits))
        with torch.no_grad():
            argmax = model(tokens, positions).argmax(-1)[:, -questions.answer.shape[1] :].numpy()
        assert (argmax == questions.answer).all(axis=1).sum() == length[1].correct
    answers = [(s.target, s.prediction, s.correct) for s in result.samples]
    assert all((target == prediction) == correct for target, prediction, correct in answers)
    assert all(len(prediction) == len(target) for target, prediction, _ in answers)  # no end token cuts it
    assert 0 < sum(c for *_, c in answers) < len(answers), "the comparison needs right and wrong answers"


def test_upe_trains_on_003_multiplication():
    config = aligned_config("multiplication", pe="upe", steps=4, multiplier_digits=2)
    assert config.input_layout.uniform_columns == (0, 1)
    result = train(config)
    assert result.status == "done" and math.isfinite(result.train[-1].loss)
    model = build_model(config.model, len(tokenizer), 0, config.input_layout)
    assert model.blocks[0].attention.sublayer.relative_keys.uniform.weight.shape[0] == 2  # c_1, c_2


def test_003_presets_and_refusals():
    assert (SIZES["bert_6l"].n_layers, SIZES["bert_9l"].n_layers) == (6, 9)
    assert SIZES["bert_6l"].d_model == 768 and SIZES["bert_6l"].n_heads == 8
    assert isinstance(build_model(ModelConfig(arch="encoder", pe="nope"), len(tokenizer), 0), EncoderLM)
    with pytest.raises(ValueError, match="set format.fixed_length: true"):
        TrialConfig(model=ModelConfig(arch="encoder"))
    with pytest.raises(ValueError, match="model.pe upe .* format.fixed_length"):
        TrialConfig(task=TaskConfig(name="multiplication"), model=ModelConfig(pe="upe"))
    with pytest.raises(ValueError, match="not task.name addition"):
        TrialConfig(format=ALIGNED, model=ModelConfig(arch="encoder", pe="upe"), eval=EvalConfig(digits=(5,)))
    for bias in ("windowed", "abc"):
        with pytest.raises(ValueError, match=f"model.attention_bias {bias} .* model.arch encoder"):
            TrialConfig(format=ALIGNED, model=ModelConfig(arch="encoder", attention_bias=bias),
                        eval=EvalConfig(digits=(5,)))
