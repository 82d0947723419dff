"""Windowed attention biasing (000 §4.1, App. A.4, Fig. 10-11): the masks of small
hand-made cases, both window centres, no fully closed row, refusals, decoding."""

import numpy as np
import pytest
import torch

from lengthgen import TrialConfig
from lengthgen.config import FormatConfig, ModelConfig, TaskConfig
from lengthgen.evaluation import greedy_decode, teacher_forced_argmax
from lengthgen.formats import encode_questions, input_layout
from lengthgen.layout import InputLayout
from lengthgen.model import build_model
from lengthgen.model.position.attention_bias import WINDOW_CENTRES, Geometry, WindowedBias
from lengthgen.model.position.samplers import POSITION_SAMPLERS
from lengthgen.tasks import TASKS
from lengthgen.tokenizer import CharTokenizer

tokenizer = CharTokenizer()


def windowed(window=1, centre="previous", place_width=1) -> WindowedBias:
    cfg = ModelConfig(attention_bias="windowed", window=window, window_centre=centre)
    return WindowedBias(cfg, InputLayout(place_width=place_width, lead=place_width - 1), n_heads=2)


def opened(mask: torch.Tensor) -> list[set[int]]:
    """Row by row, the open key columns of the first batch row."""
    return [set(torch.nonzero(row == 0).flatten().tolist()) for row in mask[0, 0]]


def cross(bias, question_length, rows, lead=0):
    lengths = torch.tensor([question_length])
    zero = torch.zeros(1, dtype=torch.long)
    return bias.cross(Geometry(torch.arange(rows), question_length, lengths, zero, zero + lead, lengths))


# Successor, n = 3: the encoder reads x_3 x_2 x_1 (columns 0, 1, 2); the decoder has
# 5 rows (<s> y_1 .. y_4), row t predicting y_(t+1).
@pytest.mark.parametrize(
    "centre, window, expected",
    [
        # centred on x_t, the place of the row's own input token: the start row sees x_1 only
        ("previous", 1, [{2}, {1, 2}, {0, 1, 2}, {0, 1}, {0}]),
        # centred on x_(t+1), the digit being produced: the start row sees {x_1, x_2}
        ("produced", 1, [{1, 2}, {0, 1, 2}, {0, 1}, {0}, {0}]),
        ("previous", 0, [{2}, {2}, {1}, {0}, {0}]),  # rows 0 and 4 fall outside: the nearest place
        ("produced", 0, [{2}, {1}, {0}, {0}, {0}]),
        ("previous", 2, [{1, 2}, {0, 1, 2}, {0, 1, 2}, {0, 1, 2}, {0, 1}]),
    ],
)
def test_cross_attention_windows_run_along_the_anti_diagonal(centre, window, expected):
    assert opened(cross(windowed(window, centre), 3, 5)) == expected


def test_binary_windows_span_and_step_over_aligned_pairs():
    # Addition, n = 2, interleaved: "+ a_2 b_2 a_1 b_1", places 1 = columns 3-4, 2 = columns 1-2
    bias = windowed(1, "previous", place_width=2)
    assert opened(cross(bias, 5, 4, lead=1)) == [{3, 4}, {1, 2, 3, 4}, {1, 2, 3, 4}, {1, 2}]
    produced = windowed(0, "produced", place_width=2)
    assert opened(cross(produced, 5, 4, lead=1)) == [{3, 4}, {1, 2}, {1, 2}, {1, 2}]  # never the operator


def test_decoder_self_attention_sees_itself_and_w_outputs_before():
    zero = torch.zeros(1, dtype=torch.long)
    mask = windowed(2).decoder_self(Geometry(torch.arange(5), 5, torch.tensor([5]), zero))
    assert opened(mask) == [{0}, {0, 1}, {0, 1, 2}, {1, 2, 3}, {2, 3, 4}]  # 000: diagonal and w below


def test_decoder_only_rows_combine_both_windows():
    # "<s> 1 9 9 = y_1 y_2 y_3" (successor, n = 3; the fed row stops before </s>): the
    # question tokens see themselves, the outputs from "=" on see w outputs and their place
    prompt = torch.tensor([5])
    mask = windowed(1).lm(Geometry(torch.arange(8), 8, torch.tensor([8]), prompt - 1, torch.tensor([1]), prompt - 1))
    assert opened(mask) == [{0}, {1}, {2}, {3}, {4, 3}, {4, 5, 2, 3}, {5, 6, 1, 2, 3}, {6, 7, 1, 2}]


@pytest.mark.parametrize("arch", ["decoder", "encoder_decoder"])
def test_no_row_of_a_mask_is_fully_closed(arch):
    """Through whole models, on real rows of several lengths, every task, window and
    centre: a row closed everywhere would give NaN (softmax over -inf only)."""
    closed_rows = []
    for task, interleave in [("successor", False), ("parity", False), ("addition", True), ("n_by_1", True)]:
        fmt = FormatConfig(interleave=interleave)
        layout = input_layout(TASKS[task](), fmt, 7)
        model = build_model(ModelConfig(arch=arch, pe="nope"), len(tokenizer), 0, layout).eval()
        for n in (1, 2, 7):
            questions = encode_questions(TASKS[task](), TASKS[task]().sample_operands(np.random.default_rng(n), 3, n),
                                         fmt, tokenizer)
            tokens, prompt = torch.from_numpy(questions.tokens), questions.prompt_length
            positions = model.sample_positions(tokens, torch.full((3,), prompt), POSITION_SAMPLERS["plain"](), None,
                                               training=False)
            for window in (0, 1, 3):
                for centre in WINDOW_CENTRES:
                    model.structural_bias = windowed(window, centre, layout.place_width)
                    logits = model.attention_logits(tokens, positions, prompt)  # NaN where the mask closes
                    closed_rows += [(task, n, window, centre) for recorded in logits.values()
                                    if torch.isnan(recorded).all(-1).any()]
                    assert torch.isfinite(model.teacher_forced_argmax(tokens, positions, prompt).float()).all()
    assert not closed_rows


@pytest.mark.parametrize("arch", ["decoder", "encoder_decoder"])
@pytest.mark.parametrize("pe", ["nope", "sinusoidal", "rope", "alibi"])
def test_windowed_decoding_cached_equals_uncached(arch, pe):
    config = ModelConfig(arch=arch, pe=pe, attention_bias="windowed", positions="cyclic")
    model = build_model(config, len(tokenizer), 1, InputLayout(place_width=2, lead=1)).eval()
    addition = TASKS["addition"]()
    operands = addition.sample_operands(np.random.default_rng(0), 4, 5)
    questions = encode_questions(addition, operands, FormatConfig(interleave=True), tokenizer)
    tokens = torch.from_numpy(questions.tokens)
    prompt = questions.prompt_length
    positions = model.sample_positions(tokens, torch.full((4,), prompt), POSITION_SAMPLERS["cyclic"](3), None, False)
    cached = greedy_decode(model, tokens[:, :prompt], tokens.shape[1] - prompt, positions, use_cache=True)
    uncached = greedy_decode(model, tokens[:, :prompt], tokens.shape[1] - prompt, positions, use_cache=False)
    assert torch.equal(cached, uncached)
    assert torch.equal(teacher_forced_argmax(model, torch.cat([tokens[:, :prompt], cached], 1), positions, prompt),
                       cached)


def test_the_layout_names_the_places():
    assert input_layout(TASKS["successor"](), FormatConfig(), 5) == InputLayout(1, 0, ())
    assert input_layout(TASKS["addition"](), FormatConfig(interleave=True), 5) == InputLayout(2, 1, ())


@pytest.mark.parametrize(
    "task, flags, arch, message",
    [
        ("addition", {}, "encoder_decoder", "format.interleave: true"),
        ("successor", {"index_hints": True}, "decoder", "format.index_hints"),
        ("successor", {"random_spaces": True}, "decoder", "format.random_spaces"),
        ("successor", {"reverse": False}, "encoder_decoder", "format.reverse and format.pad"),
        ("parity", {"pad": False}, "decoder", "format.reverse and format.pad"),
    ],
)
def test_combinations_without_an_alignment_are_refused(task, flags, arch, message):
    with pytest.raises(ValueError, match=message):
        TrialConfig(task=TaskConfig(name=task), format=FormatConfig(**flags),
                    model=ModelConfig(arch=arch, attention_bias="windowed"))


def test_window_options_need_the_windowed_bias():
    with pytest.raises(ValueError, match="model.window does not apply to model.attention_bias none"):
        ModelConfig(window=2)
    with pytest.raises(ValueError, match="model.window_centre does not apply"):
        ModelConfig(window_centre="produced")
