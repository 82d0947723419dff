"""Step 1-2 of Attention Bias Calibration (000 §5): read the attention of a model
trained to interpolation on S_gen, a random subset of training questions, and
average it (the rest of ABC is lengthgen.model.position.attention_bias.calibrated).

Choices (000 is silent): S_gen is `model.abc_samples` questions of the longest
training length (all of one length, so their matrices can be averaged), drawn
uniformly from a Generator seeded by (seeds.data, ABC_STREAM) alone ("a random
subset of training samples": with uniform_operands, from the pool's training part,
Distribution.longest_questions), written without the training-only augmentations.
000 "decodes" S_gen; we read the logits on one teacher-forced pass, which is the
same pass when the model answers them right (it interpolates by then).
"""

from __future__ import annotations

import numpy as np
import torch

from lengthgen.config import TrialConfig
from lengthgen.distributions import DISTRIBUTIONS
from lengthgen.formats import encode_questions, leading_zeros
from lengthgen.model.base import Architecture, rows_of
from lengthgen.model.position.samplers import PositionSampler
from lengthgen.tasks import Task
from lengthgen.tokenizer import CharTokenizer

#: the data-seeded stream S_gen is drawn from (apart from every training batch's)
ABC_STREAM = 0xABC


@torch.no_grad()
def mean_attention_logits(
    model: Architecture, config: TrialConfig, task: Task, tokenizer: CharTokenizer,
    positions: PositionSampler, device: torch.device,
) -> dict[str, torch.Tensor]:
    """{site: Ā (H, m, n)}: the last layer's attention logits averaged over S_gen."""
    rng = np.random.default_rng([config.seeds.data, ABC_STREAM])
    operands = DISTRIBUTIONS[config.data.distribution]().longest_questions(
        task, rng, config.model.abc_samples, config.task.train_digits, leading_zeros(config.format)
    )
    questions = encode_questions(task, operands, config.format, tokenizer, rng, width=config.longest_digits)
    tokens = torch.from_numpy(questions.tokens).to(device)
    prompt = questions.prompt_length
    generator = torch.Generator().manual_seed(int(rng.integers(2**31)))
    prompt_lengths = torch.full((len(tokens),), prompt, dtype=torch.long, device=device)
    sampled = model.sample_positions(tokens, prompt_lengths, positions, generator, training=False)
    was_training = model.training
    model.eval()
    sums: dict[str, torch.Tensor] = {}
    with model.noise_from(generator):  # model.state_init noise: the same stream, after the positions
        for start in range(0, len(tokens), config.eval.batch_size):
            rows = slice(start, start + config.eval.batch_size)
            for site, logits in model.attention_logits(tokens[rows], rows_of(sampled, rows), prompt).items():
                sums[site] = sums.get(site, 0) + logits.double().sum(0)
    model.train(was_training)
    return {site: (total / len(tokens)).float().cpu() for site, total in sums.items()}
