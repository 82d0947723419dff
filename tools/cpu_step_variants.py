"""Time a quickstart trial's training step on one CPU thread under variants that move
its numbers (and so would need a new science version): the attention's keys padded to
a multiple of 16 or written out, fused AdamW, torch.compile of the forward or of the
whole step. Each variant trains the same batches, interleaved in rounds in one
process, so that the machine's load falls on all alike.

    .venv/bin/python tools/cpu_step_variants.py [TRIAL] [STEPS] [ROUNDS] [VARIANT,...]

prints ms per step, the speed-up over the step trials take today (`sdpa+eager+foreach`,
the first variant) and each variant's model FLOP rate as a share of the one-thread
1024² float32 matmul rate measured in the same run (`lg-study bench --only
quickstart_step`'s ratio). A variant is KERNEL+MODE+ADAMW:

- KERNEL `sdpa` (today's), `padded` (sdpa over keys padded with masked zeros to a
  multiple of 16), `math_padded` (softmax(q kᵀ/√d + mask) v written out, keys padded
  likewise) or `math` (model.attention_kernel math: written out, keys as they are);
- MODE `eager`, `compile` (train.compile: the forward), `step` (train.compile_scope
  step: forward and loss, fused AdamW, Inductor's C++ wrapper) or `step_python` (the
  same with Inductor's Python wrapper);
- ADAMW `foreach` (today's) or `fused` (what `step` takes whatever is asked).

Why padding: on a CPU with 16-float vectors, torch's softmax over rows shorter than 16
keys runs a scalar path about 20 times slower per element.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from lengthgen import compiled_step, training_step
from lengthgen.batches import training_batch
from lengthgen.config import derive
from lengthgen.model import attention_kernels
from lengthgen.tokenizer import CharTokenizer
from lengthgen.training import phase_model
from orchestrator.benchmarks.bench_cpu_trial import matmul_rate
from orchestrator.studies.study import load_study
from orchestrator.studies.study_scale import trial_cost

VARIANTS = ("sdpa+eager+foreach", "sdpa+eager+fused", "padded+eager+fused", "math_padded+compile+fused",
            "math+compile+fused", "math+step_python+fused", "math+step+fused")
TODAY = attention_kernels.ATTENTION_KERNELS["sdpa"]
#: MODE: (train.compile, train.compile_scope, Inductor's CPU options for `step`)
MODES = {"eager": (False, "forward", {}), "compile": (True, "forward", {}),
         "step": (True, "step", {"cpp_wrapper": True}), "step_python": (True, "step", {})}


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


#: kernels patched in for `sdpa` (read when the model is built); `math` is a config value
KERNELS = {"sdpa": TODAY, "padded": padded, "math_padded": math_padded, "math": TODAY}


def variant_config(config, variant: str):
    """The trial's config under the variant (its compile mode and attention kernel)."""
    kernel, mode, _ = variant.split("+")
    compile_, scope, _ = MODES[mode]
    model = dataclasses.replace(config.model, attention_kernel="math") if kernel == "math" else config.model
    return dataclasses.replace(config, model=model, train=dataclasses.replace(
        config.train, compile=compile_, compile_scope=scope))


def build(config, variant: str, batches):
    """The variant's training step, warmed up (compiled) on the first 10 batches."""
    kernel, mode, adamw = variant.split("+")
    attention_kernels.ATTENTION_KERNELS["sdpa"] = KERNELS[kernel]
    training_step.ADAMW_OPTIONS["cpu"] = {adamw: True}
    compiled_step.INDUCTOR_CPU_OPTIONS = MODES[mode][2]  # read when the step is built
    model, step = phase_model(variant_config(config, variant), 0, None, {}, torch.device("cpu"))
    model.train()
    started = time.perf_counter()
    for n in range(10):
        step(n, batches[n]).item()
    print(f"{variant}: first 10 steps {time.perf_counter() - started:.1f} s (compilation included)", flush=True)
    return step


def main(trial: int = 2, steps: int = 300, rounds: int = 15, variants: tuple[str, ...] = VARIANTS) -> None:
    torch.set_num_threads(1)
    config = load_study(Path(__file__).resolve().parents[1] / "studies" / "quickstart.yaml").trials[trial]
    derived, tokenizer = derive(config), CharTokenizer()
    batches = [training_batch(config, derived.task, derived.distribution, tokenizer, n) for n in range(steps + 10)]
    steppers = {variant: build(config, variant, batches) for variant in variants}
    attention_kernels.ATTENTION_KERNELS["sdpa"], training_step.ADAMW_OPTIONS["cpu"] = TODAY, {"foreach": True}
    compiled_step.INDUCTOR_CPU_OPTIONS = MODES["step"][2]
    seconds, chunk, matmul = dict.fromkeys(variants, 0.0), steps // rounds, 0.0
    for r in range(rounds):
        matmul = max(matmul, matmul_rate(repeat=1))  # the best of the rounds, as the steps' load allows
        for variant, step in steppers.items():
            started = time.perf_counter()
            for n in range(10 + r * chunk, 10 + (r + 1) * chunk):
                step(n, batches[n]).item()
            seconds[variant] += time.perf_counter() - started
    flops = trial_cost(config).flops / config.train.steps
    print(f"trial {trial} ({study_label(config)}), {chunk * rounds} steps per variant in {rounds} rounds; "
          f"{flops / 1e9:.3f} GFLOP a step; one-thread 1024² matmul {matmul / 1e9:.1f} GFLOP/s")
    for variant in variants:
        per_step = seconds[variant] / (chunk * rounds)
        print(f"{variant:28s} {1000 * per_step:6.2f} ms/step  speed-up {seconds[variants[0]] / seconds[variant]:.2f}x  "
              f"{flops / per_step / 1e9:5.1f} GFLOP/s = {flops / per_step / matmul:.2f} of matmul")


def study_label(config) -> str:
    return f"{config.model.pe}, attention bias {config.model.attention_bias}"


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:4]), *([tuple(sys.argv[4].split(","))] if len(sys.argv) > 4 else []))
