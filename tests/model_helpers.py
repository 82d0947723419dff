"""What the model tests (Abacus, coupling, encoder-decoder, length bucketing) share:
one tokenizer, the CPU, the encodings that read positions in sequence, numbers as a
task holds them, questions as a format writes them, and a trained model."""

from __future__ import annotations

import numpy as np
import torch

from lengthgen import TrialConfig, train
from lengthgen.digits import DIGIT_DTYPE
from lengthgen.formats import encode_questions
from lengthgen.model import build_model
from lengthgen.model.position.pe import POSITIONAL_ENCODINGS
from lengthgen.tasks import build_task
from lengthgen.tokenizer import CharTokenizer

tokenizer = CharTokenizer()
CPU = torch.device("cpu")
#: encodings that read positions in sequence (not those that need every row's columns aligned)
SEQUENTIAL_PES = sorted(pe for pe, encoding in POSITIONAL_ENCODINGS.items() if not encoding.needs_uniform_columns)


def number(text: str) -> np.ndarray:
    """"085" -> the digits least significant first, as a task holds them."""
    return np.array([[int(d) for d in reversed(text)]], dtype=DIGIT_DTYPE)


def written(trial: TrialConfig, *operands: str):
    """The token rows and prompt length of the question on ``operands``, as the trial's
    format writes it."""
    questions = encode_questions(build_task(trial.task), tuple(number(o) for o in operands), trial.format, tokenizer,
                                 np.random.default_rng(0), width=trial.longest_digits)
    return questions.tokens, questions.prompt_length


def trained_model(trial: TrialConfig) -> torch.nn.Module:
    """The trial's model after training, from its last checkpoint, in eval mode."""
    states = []
    train(trial, on_report=lambda r: r.checkpoint and states.append(r.checkpoint()))
    model = build_model(trial.model, len(tokenizer), trial.seeds.weight, trial.input_layout)
    model.load_state_dict(states[-1]["model"])
    return model.eval()
