"""Time a quickstart trial's training step on one CPU thread under variants that move
its numbers (and so would need a new science version): the attention's keys padded to
a multiple of 16, fused AdamW, torch.compile. Each variant trains the same batches,
interleaved in rounds in one process, so that the machine's load falls on all alike.

    .venv/bin/python tools/cpu_step_variants.py [TRIAL] [STEPS] [ROUNDS]

prints ms per step and the speed-up over the step trials take today (`sdpa+eager+foreach`).
A variant is KERNEL+MODE+ADAMW: KERNEL `sdpa` (today's), `padded` (sdpa over keys padded
with masked zeros to a multiple of 16) or `math_padded` (softmax(q kᵀ/√d + mask) v written
out, keys padded likewise); MODE `eager` or `compile` (train.compile); ADAMW `foreach`
(today's) or `fused`. Why padding: on a CPU with 16-float vectors, torch's softmax over
rows shorter than 16 keys runs a scalar path about 20 times slower per element.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from lengthgen import training_step
from lengthgen.batches import training_batch
from lengthgen.config import derive
from lengthgen.model import attention_kernels
from lengthgen.tokenizer import CharTokenizer
from lengthgen.training import phase_model
from orchestrator.studies.study import load_study

VARIANTS = ("sdpa+eager+foreach", "sdpa+eager+fused", "padded+eager+fused", "math_padded+compile+fused")
TODAY = attention_kernels.ATTENTION_KERNELS["sdpa"]


def _padded_keys(q, k, v, mask, causal):
    """k, v and the additive mask with the keys padded to a multiple of 16 (masked)."""
    mask, length, keys = attention_kernels.dense(mask), q.shape[2], k.shape[2]
    if mask is None:
        zeros = q.new_zeros(1, 1, length, keys)
        mask = attention_kernels.causal_mask_with(zeros) if causal and length > 1 else zeros
    extra = -keys % 16
    return F.pad(k, (0, 0, 0, extra)), F.pad(v, (0, 0, 0, extra)), F.pad(mask, (0, extra), value=float("-inf"))


def padded(q, k, v, mask, dropout, causal):
    k, v, mask = _padded_keys(q, k, v, mask, causal)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout)


def math_padded(q, k, v, mask, dropout, causal):
    k, v, mask = _padded_keys(q, k, v, mask, causal)
    return torch.softmax((q @ k.transpose(-2, -1)) * q.shape[-1] ** -0.5 + mask, dim=-1) @ v


KERNELS = {"sdpa": TODAY, "padded": padded, "math_padded": math_padded}


def build(config, variant: str, batches):
    """The variant's training step, warmed up (compiled) on the first 10 batches."""
    kernel, mode, adamw = variant.split("+")
    attention_kernels.ATTENTION_KERNELS["sdpa"] = KERNELS[kernel]  # read when the model is built
    training_step.ADAMW_OPTIONS["cpu"] = {adamw: True}
    config = dataclasses.replace(config, train=dataclasses.replace(config.train, compile=mode == "compile"))
    model, step = phase_model(config, 0, None, {}, torch.device("cpu"))
    model.train()
    started = time.perf_counter()
    for n in range(10):
        step(n, batches[n]).item()
    print(f"{variant}: first 10 steps {time.perf_counter() - started:.1f} s (compilation included)", flush=True)
    return step


def main(trial: int = 2, steps: int = 300, rounds: int = 15) -> None:
    torch.set_num_threads(1)
    config = load_study(Path(__file__).resolve().parents[1] / "studies" / "quickstart.yaml").trials[trial]
    derived, tokenizer = derive(config), CharTokenizer()
    batches = [training_batch(config, derived.task, derived.distribution, tokenizer, n) for n in range(steps + 10)]
    steppers = {variant: build(config, variant, batches) for variant in VARIANTS}
    attention_kernels.ATTENTION_KERNELS["sdpa"], training_step.ADAMW_OPTIONS["cpu"] = TODAY, {"foreach": True}
    seconds, chunk = dict.fromkeys(VARIANTS, 0.0), steps // rounds
    for r in range(rounds):
        for variant, step in steppers.items():
            started = time.perf_counter()
            for n in range(10 + r * chunk, 10 + (r + 1) * chunk):
                step(n, batches[n]).item()
            seconds[variant] += time.perf_counter() - started
    print(f"trial {trial} ({study_label(config)}), {chunk * rounds} steps per variant in {rounds} rounds")
    for variant in VARIANTS:
        print(f"{variant:28s} {1000 * seconds[variant] / (chunk * rounds):6.2f} ms/step  "
              f"speed-up {seconds[VARIANTS[0]] / seconds[variant]:.2f}x")


def study_label(config) -> str:
    return f"{config.model.pe}, attention bias {config.model.attention_bias}"


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:]))
