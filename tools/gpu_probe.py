"""What a GPU session measures besides `pytest -m gpu` and the bench rows (a developer's
tool, run by tools/gpu_check.sh on a lent GPU): where a training step synchronises with
the host (torch's sync debug mode, each site counted), the top kernels of a profiled
step with the share that is matrix products, 16 seeds of the 2m decoder as one seed
batch against one trial alone, and FlexAttention beside SDPA for a biased study.

    python tools/gpu_probe.py OUT_DIR [section ...]   (sections: syncs profile seeds flex noise)

Every section's numbers go to OUT_DIR/probe.json (rewritten after each) and a summary
is printed; a section that fails records its traceback and the others still run."""

from __future__ import annotations

import collections
import json
import sys
import time
import traceback
import warnings
from dataclasses import replace
from pathlib import Path

import torch

from lengthgen import train
from lengthgen.batches import training_batch
from lengthgen.compiled_step import CompiledForward
from lengthgen.config import derive
from lengthgen.model import build_model
from lengthgen.precision import precision_mode
from lengthgen.seed_batch import train_seed_batch
from lengthgen.tokenizer import CharTokenizer
from lengthgen.training import _train_step
from lengthgen.training_step import TrainingStep
from orchestrator.benchmarks.bench_gpu import small_trial
from orchestrator.benchmarks.bench_gpu_studies import (
    STUDIES,
    mode_config,
    second_width_steps,
    time_steps,
)
from orchestrator.benchmarks.bench_seed_batch import seeds_of
from orchestrator.studies.study import load_study

CUDA = torch.device("cuda")
REPO = str(Path(__file__).resolve().parents[1])


def study_trial(name: str):
    return load_study(STUDIES / f"{name}.yaml").trials[0]


def sync_sites(config, steps: int = 6, warmup: int = 3) -> dict:
    """Host synchronisations per training step of `config` (lengthgen.training's own
    step function and its loss read), each counted at the repository line that made it."""
    tokenizer, derived = CharTokenizer(), derive(config)
    model = build_model(config.model, len(tokenizer), config.seeds.weight, derived.input_layout).to(CUDA)
    training_step = TrainingStep(config, model, CUDA)
    sites: collections.Counter = collections.Counter()

    def record(message, category, filename, lineno, file=None, line=None):
        frames = [f for f in traceback.extract_stack()[:-1] if f.filename.startswith(REPO) and "gpu_probe" not in f.filename]
        sites[" <- ".join(f"{Path(f.filename).relative_to(REPO)}:{f.lineno}" for f in frames[-3:][::-1]) or filename] += 1

    with precision_mode(config.train.precision):
        for step in range(warmup):
            _train_step(config, training_step, step, derived.task, derived.distribution, tokenizer)[0].item()
        torch.cuda.synchronize()
        with warnings.catch_warnings():
            warnings.simplefilter("always")
            warnings.showwarning = record
            torch.cuda.set_sync_debug_mode("warn")
            try:
                for step in range(warmup, warmup + steps):
                    loss, _ = _train_step(config, training_step, step, derived.task, derived.distribution, tokenizer)
                    torch.isfinite(loss)
                    loss.item()  # lengthgen.training reads the loss and its finiteness each step
            finally:
                torch.cuda.set_sync_debug_mode(0)
    return {"syncs_per_step": sum(sites.values()) / steps, "sites": dict(sites.most_common())}


def profile_step(config, steps: int = 4) -> dict:
    """The top CUDA kernels of `steps` steps of `config` in its precision: time, share,
    matrix-product share and how busy the GPU was over the wall time."""
    tokenizer, derived = CharTokenizer(), derive(config)
    model = build_model(config.model, len(tokenizer), config.seeds.weight, derived.input_layout).to(CUDA)
    training_step = TrainingStep(config, model, CUDA, CompiledForward(model) if config.train.compile else None)
    batches = [training_batch(config, derived.task, derived.distribution, tokenizer, s) for s in range(steps + 2)]
    warm = [0, 1] + (second_width_steps(lambda s: training_batch(config, derived.task, derived.distribution,
                                                                 tokenizer, s), batches[:2], steps + 2)
                     if config.train.compile else [])
    with precision_mode(config.train.precision):
        for s in warm:
            training_step(s, batches[s] if s < 2 else training_batch(config, derived.task, derived.distribution,
                                                                     tokenizer, s))
        torch.cuda.synchronize()
        activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
        started = time.perf_counter()
        with torch.profiler.profile(activities=activities) as profiler:
            for s in range(2, steps + 2):
                training_step(s, batches[s])
            torch.cuda.synchronize()
        wall = time.perf_counter() - started
    kernels = [e for e in profiler.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    by_name: collections.Counter = collections.Counter()
    for event in kernels:
        by_name[event.name[:90]] += event.device_time_total if hasattr(event, "device_time_total") else event.cuda_time
    total = sum(by_name.values())
    matmul = sum(t for name, t in by_name.items() if any(k in name.lower() for k in ("gemm", "nvjet", "cutlass", "xmma", "matmul", "sm90")))
    return {"wall_ms_per_step": wall * 1e3 / steps, "kernel_ms_per_step": total / 1e3 / steps,
            "busy_share": total / 1e6 / wall, "matmul_share": matmul / max(total, 1), "kernels_per_step": len(kernels) / steps,
            "top": [(name, t / 1e3 / steps, t / max(total, 1)) for name, t in by_name.most_common(15)]}


def rate(results) -> float:
    """Tokens/s of trials trained together: their tokens between the first and last log
    over that span of the (shared) wall clock."""
    first, last = results[0].train[0], results[0].train[-1]
    tokens = sum(r.train[-1].tokens - r.train[0].tokens for r in results)
    return tokens / (last.wall_s - first.wall_s)


def seed_batch_rate(k: int = 16, steps: int = 120) -> dict:
    config = replace(small_trial("2m", steps, log_every=steps // 6), eval=replace(small_trial("2m", 1, 1).eval, every=0))
    configs = seeds_of(config, k)
    train(configs[0], device="cuda")  # warm-up: CUDA context, kernels' first launches
    alone = rate([train(configs[0], device="cuda")])
    batched = rate(train_seed_batch(configs, device="cuda"))
    return {"k": k, "alone_tokens_per_s": alone, "batch_tokens_per_s": batched, "ratio": batched / alone}


def flex_vs_sdpa(name: str = "seed_robustness", precision: str = "bf16") -> dict:
    config = mode_config(study_trial(name), precision, False)
    out = {}
    for kernel in ("sdpa", "flex"):
        kernel_config = replace(config, model=replace(config.model, attention_kernel=kernel))
        seconds, tokens = time_steps(kernel_config, CUDA, steps=8, warmup=3, runs=2)
        out[kernel] = {"ms_per_step": min(seconds) * 1e3, "tokens_per_s": tokens / min(seconds),
                       "peak_gib": torch.cuda.max_memory_allocated() / 2**30}
        torch.cuda.reset_peak_memory_stats()
    return out


def noise_draws(name: str = "sota_abacus", precision: str = "bf16") -> dict:
    """A noise-started study's step with its noise drawn on the host (copied) and on the GPU
    (train.state_noise_draw), each the best of 2 runs of 6 steps after 2."""
    config = mode_config(study_trial(name), precision, False)
    out = {}
    for draw in ("host", "device"):
        drawn = replace(config, train=replace(config.train, state_noise_draw=draw))
        seconds, tokens = time_steps(drawn, CUDA, steps=6, warmup=2, runs=2)
        out[draw] = {"ms_per_step": min(seconds) * 1e3, "tokens_per_s": tokens / min(seconds)}
    return out


SECTIONS = {
    "syncs": lambda: {"seed_robustness_bf16": sync_sites(mode_config(study_trial("seed_robustness"), "bf16", False)),
                      "small_2m_fp32": sync_sites(small_trial("2m", 100, 10))},
    "profile": lambda: {f"seed_robustness_{p}{' + compile' * c}": profile_step(
        mode_config(study_trial("seed_robustness"), p, c)) for p, c in (("bf16", True), ("bf16", False))},
    "seeds": seed_batch_rate,
    "flex": flex_vs_sdpa,
    "noise": noise_draws,
}


def main(out: Path, names: list[str]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    results = {}
    for name in names or list(SECTIONS):
        started = time.perf_counter()
        try:
            result = SECTIONS[name]()
        except Exception:  # noqa: BLE001 (a developer's probe: report and go on to the next section)
            result = {"error": traceback.format_exc()}
        result = {"seconds": time.perf_counter() - started, **result} if isinstance(result, dict) else result
        results[name] = result
        (out / "probe.json").write_text(json.dumps(results, indent=1, default=str))
        print(f"== {name}", json.dumps(result, indent=1, default=str)[:4000], flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2:])
