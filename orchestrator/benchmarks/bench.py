"""`lg-study bench`: speed ratios, each measured against its reference in the same run.

Absolute times on a shared machine are noise; a ratio of two things measured side
by side is not. Every row prints the two measurements behind it.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from lengthgen.batches import (
    TrainingBatch,
    batch_tensors,
    length_buckets,
    row_lengths,
    training_batch,
)
from lengthgen.config import (
    EvalConfig,
    FormatConfig,
    ModelConfig,
    TaskConfig,
    TrainConfig,
    TrialConfig,
)
from lengthgen.distributions import DISTRIBUTIONS
from lengthgen.evaluation import build_eval_sets, greedy_decode, teacher_forced_argmax
from lengthgen.model import build_model, count_parameters
from lengthgen.model.base import Batch
from lengthgen.model.sizes import SIZES, Dimensions
from lengthgen.tasks import TASKS
from lengthgen.tokenizer import CharTokenizer
from lengthgen.training_step import TrainingStep
from orchestrator.benchmarks.bench_cpu_trial import quickstart_step_rate
from orchestrator.benchmarks.bench_gpu import gpu_rows
from orchestrator.benchmarks.bench_scale import scale
from orchestrator.benchmarks.bench_seed_batch import (
    batching_vs_ulp,
    quickstart_run,
    seed_batch_rows,
)
from orchestrator.benchmarks.bench_study_run import study_run_scale
from orchestrator.benchmarks.measurement import Measurement, best_seconds


def evaluation(questions: int = 1000, digits: int = 50) -> list[Measurement]:
    """Exact match by one teacher-forced pass, and KV-cached greedy decoding, each
    against uncached greedy decoding, tiny decoder, `digits`-digit addition."""
    tokenizer = CharTokenizer()
    config = TrialConfig(model=ModelConfig(pe="rope"), eval=EvalConfig(digits=(digits,), samples=questions))
    model = build_model(config.model, len(tokenizer), 0).eval()
    encoded = build_eval_sets(config, TASKS["addition"](), tokenizer)[0].questions
    tokens = torch.from_numpy(encoded.tokens)
    prompt = encoded.prompt_length
    answer = tokens.shape[1] - prompt
    positions = torch.arange(tokens.shape[1]).expand(*tokens.shape)
    chunks = [(a, min(a + 500, len(tokens))) for a in range(0, len(tokens), 500)]

    def decode(use_cache):
        return lambda: [greedy_decode(model, tokens[a:b, :prompt], answer, positions[a:b], use_cache) for a, b in chunks]

    forced = best_seconds(lambda: [teacher_forced_argmax(model, tokens[a:b], positions[a:b], prompt) for a, b in chunks], 2)
    cached = best_seconds(decode(True), 2)
    uncached = best_seconds(decode(False))
    setting = f"tiny decoder, {digits}-digit addition, {questions} questions"
    return [
        Measurement("exact match: teacher-forced pass vs uncached greedy", uncached / forced, ">= 20",
                    f"{setting}: {forced:.2f} s vs {uncached:.2f} s"),
        Measurement("greedy decoding: KV cache vs uncached", uncached / cached, ">= 5",
                    f"{setting}: {cached:.2f} s vs {uncached:.2f} s"),
    ]


class BareDecoder(nn.Module):
    """The reference: a plain pre-norm causal decoder on SDPA, no positional encoding,
    with the same dimensions as the lg-study model it is compared with."""

    def __init__(self, dims: Dimensions, vocab: int) -> None:
        super().__init__()
        self.dims = dims
        self.embedding = nn.Embedding(vocab, dims.d_model)
        self.layers = nn.ModuleList(
            nn.ModuleDict({
                "norm1": nn.LayerNorm(dims.d_model), "qkv": nn.Linear(dims.d_model, 3 * dims.d_model),
                "out": nn.Linear(dims.d_model, dims.d_model), "norm2": nn.LayerNorm(dims.d_model),
                "up": nn.Linear(dims.d_model, dims.d_ff), "down": nn.Linear(dims.d_ff, dims.d_model),
            })
            for _ in range(dims.n_layers)
        )
        self.norm = nn.LayerNorm(dims.d_model)
        self.head = nn.Linear(dims.d_model, vocab, bias=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embedding(tokens)
        batch, length, d = x.shape
        for layer in self.layers:
            q, k, v = layer["qkv"](layer["norm1"](x)).split(d, dim=-1)
            q, k, v = (t.view(batch, length, self.dims.n_heads, -1).transpose(1, 2) for t in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + layer["out"](y.transpose(1, 2).reshape(batch, length, d))
            x = x + layer["down"](F.gelu(layer["up"](layer["norm2"](x))))
        return self.head(self.norm(x))


def _full_rows(tokens: torch.Tensor) -> TrainingBatch:
    """Token rows trained as a trial trains its rows, every token after the first
    supervised (prompt length 1: the first token predicts the second, and so on)."""
    rows = tokens.numpy()
    answer_mask = np.ones(rows.shape, dtype=bool)
    answer_mask[:, 0] = False
    return TrainingBatch(rows, answer_mask, prompt_lengths=np.ones(len(rows), dtype=np.int64))


def _trial_step(config: TrialConfig, model: nn.Module, tokens: torch.Tensor, forward_batch=None) -> Callable[[], None]:
    """The trial's training step (lengthgen.training_step.TrainingStep) on `model`, over the
    rows `tokens` (their positions drawn once, outside the timing): `forward_batch`
    feeds another model the same rows."""
    step = TrainingStep(config, model, torch.device("cpu"), forward_batch)
    rows = _full_rows(tokens)
    # a reference model reads no positions: it gets the rows alone
    parts = step.parts(0, rows) if forward_batch is None else [(batch_tensors(rows, step.device), ())]
    return lambda: step.update(0, parts)


def _bare_forward_batch(bare: BareDecoder) -> Callable:
    """BareDecoder as a trial's forward_batch: every token predicts the next."""

    def forward_batch(batch: Batch, positions) -> tuple[torch.Tensor, torch.Tensor]:
        return bare(batch.tokens[:, :-1]).flatten(0, 1), batch.tokens[:, 1:].flatten()

    return forward_batch


def _paired_seconds(first: Callable[[], None], second: Callable[[], None], steps: int, rounds: int = 3):
    """Best-of-`rounds` seconds for `steps` calls of each, the two interleaved so that
    both see the same machine load."""
    first(), second()  # warm-up: allocator, kernels
    best = [float("inf"), float("inf")]
    for _ in range(rounds):
        for i, work in enumerate((first, second)):
            best[i] = min(best[i], best_seconds(lambda work=work: [work() for _ in range(steps)]))
    return best


def training_throughput(pes=("nope", "rope", "alibi", "kerple_log", "fire", "t5"), size="2m",
                        batch=16, length=128, steps=3) -> list[Measurement]:
    """Training tokens/s of the lg-study decoder vs the bare SDPA decoder, per PE, both
    trained by the trial's step (its optimizer, schedule and clipping)."""
    vocab = len(CharTokenizer())
    dims = SIZES[size]
    # one more token than the model reads: the last is only predicted
    tokens = torch.randint(0, vocab, (batch, length + 1), generator=torch.Generator().manual_seed(0))
    bare = BareDecoder(dims, vocab)
    bare_step = _trial_step(TrialConfig(), bare, tokens, _bare_forward_batch(bare))
    rows = []
    for pe in pes:
        config = TrialConfig(model=ModelConfig(size=size, pe=pe, max_positions=max(512, length)))
        ours_step = _trial_step(config, build_model(config.model, vocab, 0), tokens)
        ours_s, bare_s = _paired_seconds(ours_step, bare_step, steps)
        target = ">= 0.95" if pe in ("nope", "rope") else ">= 0.8"
        rows.append(Measurement(
            f"training tokens/s: lg-study {pe} vs bare SDPA decoder", bare_s / ours_s, target,
            f"{size} dims, batch {batch} x {length} tokens: {steps * batch * length / ours_s:,.0f} vs "
            f"{steps * batch * length / bare_s:,.0f} tokens/s"))
    return rows


def bucketing(digits: int = 40, batch: int = 64, buckets: int = 4, steps: int = 3) -> Measurement:
    """Training tokens/s (non-padding tokens) with train.length_buckets `buckets` vs one
    padded batch: tiny decoder, FIRE, 1-`digits`-digit addition reversed with index
    hints, the same batches for both, interleaved."""
    config = TrialConfig(
        task=TaskConfig(name="addition", train_digits=(1, digits)), format=FormatConfig(index_hints=True),
        model=ModelConfig(size="tiny", pe="fire"), train=TrainConfig(batch_size=batch),
        eval=EvalConfig(digits=(digits,), samples=1),
    )
    tokenizer, task = CharTokenizer(), TASKS["addition"]()
    batches = [training_batch(config, task, DISTRIBUTIONS["uniform_length"](), tokenizer, s) for s in range(steps)]
    real = sum(int((b.tokens != tokenizer.pad_id).sum()) for b in batches)
    padded = sum(b.tokens.size for b in batches)
    in_buckets = sum(
        len(rows) * int(row_lengths(b.answer_mask)[rows].max())
        for b in batches for rows in length_buckets(row_lengths(b.answer_mask), buckets)
    )

    def trainer(k: int) -> Callable[[], None]:
        trial = replace(config, train=replace(config.train, length_buckets=k))
        step = TrainingStep(trial, build_model(trial.model, len(tokenizer), 0), torch.device("cpu"))
        order = itertools.cycle(enumerate(batches))
        return lambda: step(*next(order))

    bucketed_s, padded_s = _paired_seconds(trainer(buckets), trainer(1), steps)
    return Measurement(
        f"training tokens/s: length_buckets {buckets} vs 1 (padded)", padded_s / bucketed_s, "report",
        f"tiny decoder, FIRE, batch {batch} of 1-{digits}-digit addition (reversed, index hints): "
        f"{real / bucketed_s:,.0f} vs {real / padded_s:,.0f} real tokens/s; real tokens are "
        f"{real / in_buckets:.0%} of the bucketed rows, {real / padded:.0%} of the padded batch")


def flop_rate(size="2m", batch=16, length=128, steps=4) -> Measurement:
    """Model FLOPs per token x tokens/s, as a share of the matmul rate torch reaches here."""
    vocab = len(CharTokenizer())
    dims = SIZES[size]
    config = TrialConfig(model=ModelConfig(size=size, pe="nope"))
    model = build_model(config.model, vocab, 0)
    tokens = torch.randint(0, vocab, (batch, length + 1))  # the model reads `length` of them
    step = _trial_step(config, model, tokens)
    step()
    seconds = best_seconds(lambda: [step() for _ in range(steps)], 3)
    non_embedding = count_parameters(model) - model.token_embedding.weight.numel()
    # Kaplan et al. 2020 / PaLM App. B: 6N per token for weights, 12 L T d for attention
    per_token = 6 * non_embedding + 12 * dims.n_layers * length * dims.d_model
    model_rate = per_token * steps * batch * length / seconds
    a, b = torch.randn(batch * length, dims.d_model), torch.randn(dims.d_model, dims.d_ff)
    matmul_s = best_seconds(lambda: [a @ b for _ in range(20)], 3)
    matmul_rate = 20 * 2 * a.shape[0] * a.shape[1] * b.shape[1] / matmul_s
    return Measurement("training FLOP rate vs torch matmul rate", model_rate / matmul_rate, "report (aim >= 0.3)",
                       f"d_model {dims.d_model}: {model_rate / 1e9:.1f} vs {matmul_rate / 1e9:.1f} GFLOP/s")


def data_rate(digits: int = 40, batch: int = 128, batches: int = 20) -> Measurement:
    """Questions built per second vs questions a tiny model trains on per second."""
    hints = {"index_hints": True} if "index_hints" in FormatConfig.__dataclass_fields__ else {}
    config = TrialConfig(
        task=TaskConfig(name="addition", train_digits=(1, digits)), format=FormatConfig(**hints),
        train=TrainConfig(batch_size=batch, steps=3, log_every=3, warmup=1), eval=EvalConfig(digits=(2,), samples=1),
    )
    tokenizer, task = CharTokenizer(), TASKS["addition"]()
    distribution = DISTRIBUTIONS["uniform_length"]()
    build_s = best_seconds(lambda: [training_batch(config, task, distribution, tokenizer, s) for s in range(batches)], 2)
    from lengthgen import train

    train_s = best_seconds(lambda: train(config), 1)
    made, consumed = batches * batch / build_s, 3 * batch / train_s
    return Measurement(f"questions generated/s vs trained on/s ({digits}-digit addition{', index hints' if hints else ''})",
                       made / consumed, ">= 20", f"{made:,.0f} vs {consumed:,.0f} questions/s (tiny model)")


TRIAL_OVERHEAD_STUDY = textwrap.dedent("""\
    name: bench_overhead
    source: "lg-study bench: per-trial orchestration overhead"
    base:
      task: {name: successor, train_digits: [1, 2]}
      model: {size: tiny, pe: nope}
      train: {steps: 1, batch_size: 2, warmup: 1, log_every: 1}
      eval: {digits: [2], samples: 2}
    axes:
      seeds.weight: [0, 1, 2, 3, 4, 5, 6, 7]
    resources: {cpus_per_trial: 1}
    """)


def trial_overhead(trials: int = 8) -> Measurement:
    """Wall time of `lg-study run` on a study of 8 trials that train 1 step, per trial."""
    with tempfile.TemporaryDirectory() as folder:
        study = Path(folder) / "study.yaml"
        study.write_text(TRIAL_OVERHEAD_STUDY)
        command = [sys.executable, "-m", "orchestrator.cli", "run", str(study), "--results", str(Path(folder) / "r")]
        started = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True, env={**os.environ, "RAY_ADDRESS": ""})
        seconds = time.perf_counter() - started
    per_trial = seconds / trials
    # expressed as a ratio to the 1.5 s budget so that every row reads "higher is better"
    return Measurement("per-trial overhead of lg-study run (budget 1.5 s / measured)", 1.5 / per_trial, ">= 1",
                       f"{trials} one-step trials in {seconds:.1f} s, Ray start included: {per_trial:.2f} s per trial")


def report_speed(rows: int = 10_000_000, weight_seeds: int = 5, data_seeds: int = 8) -> Measurement:
    """`lg-study report` over a synthetic study whose `samples` table has `rows` rows."""
    from datetime import datetime, timezone

    import pyarrow as pa
    import pyarrow.parquet as pq

    from analysis.report import build_report
    from orchestrator.store.results_store import SAMPLES_SCHEMA, write_trial_table
    from orchestrator.store.trial_rows import trials_row
    from results_contract.layout import table_path

    trials = weight_seeds * data_seeds
    per_trial = rows // trials
    lengths = (10, 20, 30, 40)
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        rng = np.random.default_rng(0)
        base = TrialConfig(task=TaskConfig(train_digits=(1, 10)), eval=EvalConfig(digits=lengths, samples=per_trial // 4))
        for w in range(weight_seeds):
            for d in range(data_seeds):
                config = replace(base, seeds=replace(base.seeds, weight=w, data=d))
                now = datetime.now(timezone.utc)
                write_trial_table(root, "bench", "trials", config.trial_id,
                                  [trials_row("bench", config, "done", "cpu", now, now, 1)])
                accuracy = rng.uniform(0, 1, len(lengths))
                write_trial_table(root, "bench", "eval", config.trial_id, [
                    {"step": 100, "digits": n, "n": per_trial // 4, "correct": int(a * per_trial // 4),
                     "accuracy": float(a), "in_distribution": n <= 10} for n, a in zip(lengths, accuracy)])
                correct = rng.random(per_trial) < 0.5
                samples = pa.table({
                    "trial_id": pa.array([config.trial_id] * per_trial),
                    "step": np.full(per_trial, 100), "digits": np.repeat(lengths, per_trial // 4 + 1)[:per_trial],
                    "idx": np.arange(per_trial), "cascade": rng.integers(0, 6, per_trial), "correct": correct,
                    "wrong_digits": np.where(correct, 0, rng.integers(1, 4, per_trial)),
                    "first_wrong": pa.array(np.where(correct, 0, rng.integers(0, 40, per_trial)), mask=correct),
                    "target": pa.array(["1234"] * per_trial), "prediction": pa.array(["1235"] * per_trial),
                    "carry_in": pa.array(["0100"] * per_trial),
                    "wrong_places": pa.array(np.where(correct, "0000", "1000")),
                }, schema=SAMPLES_SCHEMA)
                path = table_path(root, "bench", "samples", config.trial_id)
                path.parent.mkdir(parents=True, exist_ok=True)
                pq.write_table(samples, path)
        seconds = best_seconds(lambda: build_report(root, "bench", root / "report"))
    return Measurement("lg-study report on 10M samples rows (budget 5 s / measured)", 5.0 / seconds, ">= 1",
                       f"{trials} trials x {per_trial:,} samples rows: {seconds:.1f} s")


def machine() -> str:
    return (f"{os.cpu_count()} CPUs, torch {torch.__version__} with {torch.get_num_threads()} threads, "
            f"{'CUDA ' + torch.cuda.get_device_name() if torch.cuda.is_available() else 'no GPU'}")


BENCHMARKS: dict[str, Callable[[], list[Measurement] | Measurement]] = {
    "evaluation": evaluation,
    "training": training_throughput,
    "bucketing": bucketing,
    "flops": flop_rate,
    "quickstart_step": quickstart_step_rate,
    "data": data_rate,
    "overhead": trial_overhead,
    "report": report_speed,
    "scale": scale,
    "scale_run": study_run_scale,
    "gpu": gpu_rows,
    "seeds": seed_batch_rows,
    "seed_numbers": batching_vs_ulp,
    "seeds_run": quickstart_run,
}


#: rows that take many minutes here, left out of `lg-study bench` without --only or --all
LONG_ROWS = {
    "scale": "two synthetic stores of 1,000 and 10,000 trials, about 25 minutes here",
    "scale_run": "a real study of 1,000 one-step trials and the commands after it, about 5 minutes here",
    "seed_numbers": "12 quickstart trials of 2,000 steps, alone, one ulp off and in a seed batch, about 13 minutes here",
    "seeds_run": "the quickstart's 16 trials run four times end to end at 200 steps, about 6 minutes here",
}


def default_names() -> list[str]:
    """The rows `lg-study bench` runs without --only: all but LONG_ROWS."""
    return [name for name in BENCHMARKS if name not in LONG_ROWS]


def left_out(names: list[str]) -> list[str]:
    """One line per long row not in ``names``: what it is and the option that runs it."""
    return [f"left out: {name} ({what}); run it with --only {name}, or every row with --all"
            for name, what in LONG_ROWS.items() if name not in names]


def run(names: list[str] | None = None, on_result: Callable[[Measurement], None] | None = None,
        trials: int | None = None, results_root: Path = Path("results")) -> list[Measurement]:
    """Run the benchmarks ``names`` (default_names() for None); ``trials`` sizes the
    scale_run study; the gpu rows record their rates under ``results_root``."""
    results: list[Measurement] = []
    for name in names or default_names():
        if name == "scale_run" and trials is not None:
            outcome = study_run_scale(trials=trials)
        elif name == "gpu":
            outcome = gpu_rows(results_root=results_root)
        else:
            outcome = BENCHMARKS[name]()
        for measurement in outcome if isinstance(outcome, list) else [outcome]:
            results.append(measurement)
            if on_result:
                on_result(measurement)
    return results
