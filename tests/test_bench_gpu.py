"""The bench's GPU rows (`lg-study bench --only gpu`): skipped with their reason where
CUDA is absent; their measurements checked on the CPU, with the device injected."""

from __future__ import annotations

import pytest
import ray
import torch
from typer.testing import CliRunner

from orchestrator.benchmarks import bench_gpu
from orchestrator.cli import app


def test_without_cuda_every_gpu_row_says_skipped(monkeypatch):
    monkeypatch.setattr(bench_gpu, "cuda_available", lambda: False)
    rows = bench_gpu.gpu()
    assert len(rows) == 4 * len(bench_gpu.GPU_SIZES)
    assert all(r.ratio is None and r.met is None and r.detail == bench_gpu.NO_CUDA for r in rows)
    for size in bench_gpu.GPU_SIZES:
        assert sum(f"({size})" in r.name for r in rows) == 4
    outcome = CliRunner().invoke(app, ["bench", "--only", "gpu"])
    assert outcome.exit_code == 0, outcome.output
    assert outcome.output.count("skipped: no CUDA device") >= 2 * len(rows)  # a line and a table row each


def test_the_rate_of_trials_run_at_once_is_taken_while_all_of_them_train():
    # A: 100 tokens/s over 0-10 s; B: 50 tokens/s over 5-15 s: both train from 5 to 10 s
    a = [(float(t), 100 * t) for t in range(11)]
    b = [(float(t), 50 * (t - 5)) for t in range(5, 16)]
    rate, window = bench_gpu.rate_over_common_window([a, b])
    assert (rate, window) == pytest.approx((150.0, 5.0))
    assert bench_gpu.rate_over_common_window([a[:5], b]) is None  # A finished before B started


@pytest.mark.slow  # a Ray run of three trials and two compiled models: about 40 s
@pytest.mark.long
def test_the_gpu_rows_measure_on_the_cpu_when_given_a_device():
    """Two tiny trials as Ray tasks of half a CPU each, and the compiled step with
    torch.compile's eager backend (no code generation): every row is measured."""
    try:
        rows = bench_gpu.gpu(sizes=("tiny",), trials=2, steps=40, device="cpu",
                         resources={"num_cpus": 0.5}, compile_backend="eager", step_batches=2)
    finally:
        ray.shutdown()
    assert [r.name for r in rows] == [
        "GPU packing: 2 trials at gpus_per_trial 0.5 vs 1 alone (tiny)",
        "GPU training tokens/s: torch.compile vs eager (tiny)",
        "GPU training tokens/s: CUDA graphs (compile reduce-overhead) vs eager (tiny)",
        "GPU training tokens/s: train.deterministic vs default (tiny)",
    ]
    for row in rows:
        assert row.ratio is not None and row.ratio > 0, row
        assert "tokens/s" in row.detail


def test_step_rate_counts_the_real_tokens_of_the_trials_batches(monkeypatch):
    from lengthgen.batches import training_batch
    from lengthgen.distributions import DISTRIBUTIONS
    from lengthgen.tasks import build_task
    from lengthgen.tokenizer import CharTokenizer

    config = bench_gpu.small_trial("tiny", steps=10, log_every=5)
    timed, measure = [], bench_gpu.best_seconds
    monkeypatch.setattr(bench_gpu, "best_seconds", lambda work, repeat=1: timed.append(measure(work, repeat)) or timed[-1])
    rate = bench_gpu.step_rate(config, "cpu", batches=2, rounds=1)
    tokenizer = CharTokenizer()
    batches = [training_batch(config, build_task(config.task), DISTRIBUTIONS[config.data.distribution](),
                              tokenizer, s) for s in range(2)]
    real = sum(int((b.tokens != tokenizer.pad_id).sum()) for b in batches)
    assert real < sum(b.tokens.size for b in batches)  # padding is not counted
    assert rate * timed[-1] == pytest.approx(real)


def test_without_cuda_every_paper_scale_row_says_skipped_and_why(monkeypatch):
    from orchestrator.benchmarks import bench_gpu_studies

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    rows = bench_gpu_studies.paper_scale()
    assert len(rows) == len(bench_gpu_studies.PAPER_SCALE_STUDIES) * len(bench_gpu_studies.MODES) == 20
    assert all(r.ratio is None and r.detail.startswith("skipped: no CUDA device") for r in rows)
    assert "GPU seed_robustness: bf16 + compile speed vs fp32" in [r.name for r in rows]


def test_the_paper_scale_rows_measure_on_the_cpu_and_record_the_studys_own_mode(tmp_path):
    """A tiny stand-in for sota_coupling's first trial (which trains in bf16), timed on the
    CPU in every mode; the bf16 rate is recorded, and the GPU-hours quoted from it."""
    from dataclasses import replace

    from lengthgen.config import EvalConfig, TaskConfig, TrainConfig, TrialConfig
    from orchestrator.benchmarks import bench_gpu_studies
    from orchestrator.studies.study import load_study
    from orchestrator.studies.study_scale import (
        read_rates,
        shape_id,
        study_cost_words,
        study_size_words,
    )

    tiny = TrialConfig(task=TaskConfig(name="addition", train_digits=(1, 4)),
                       train=TrainConfig(steps=100, batch_size=8, warmup=1, precision="bf16"),
                       eval=EvalConfig(digits=(2,), samples=4))
    longer = replace(tiny, task=TaskConfig(name="addition", train_digits=(1, 6)))
    rows = bench_gpu_studies.paper_scale(("sota_coupling",), steps=2, warmup=1, runs=2, device="cpu",
                                         results_root=tmp_path, trials={"sota_coupling": [tiny, longer, tiny]},
                                         compile_backend="eager")
    other_shape = "GPU sota_coupling: tiny on 1-6 digits vs its first trial"
    assert [r.name for r in rows] == [*bench_gpu_studies.row_names(("sota_coupling",)), other_shape]
    assert rows[0].ratio == 1.0 and all(r.ratio > 0 for r in rows)
    assert all("ms/step" in r.detail and "tokens/s" in r.detail and "TFLOP/s" in r.detail for r in rows)
    (shapes,) = read_rates(tmp_path)["cpu device"].values()
    assert set(shapes) == {shape_id(tiny), shape_id(longer)}
    assert all((r.precision, r.compile) == ("bf16", False) and r.flops_per_s > 0 for r in shapes.values())
    words = study_cost_words([tiny, longer, tiny], {"cpu device": shapes})
    assert "GPU-hours on an cpu device at the rates measured there for its 2 trial shapes" in words
    assert "estimate" not in words
    # the real study's trials are of neither shape: no rate of these carries to them
    real = study_size_words(load_study(bench_gpu_studies.STUDIES / "sota_coupling.yaml"), tmp_path)
    assert "(an estimate" in real and "cpu device" not in real


def test_bench_records_the_gpu_rates_under_its_results_option(monkeypatch, tmp_path):
    """`lg-study bench --only gpu --results DIR` records the rates where `validate --results
    DIR` reads them (docs/how-to/gpu.md), not under ./results."""
    from orchestrator.benchmarks import bench_gpu_studies

    roots = []
    monkeypatch.setattr(bench_gpu, "gpu", list)
    monkeypatch.setattr(bench_gpu_studies, "paper_scale", lambda results_root: roots.append(results_root) or [])
    outcome = CliRunner().invoke(app, ["bench", "--only", "gpu", "--results", str(tmp_path)])
    assert outcome.exit_code == 0, outcome.output
    assert roots == [tmp_path]


def test_a_compiled_warm_up_of_one_width_adds_a_step_of_another():
    """The symbolic-width graph compiles at a forward's second width: a warm-up that saw
    one width (sota_abacus's batches are nearly all 62 wide) gets one step of another,
    so that compilation is not timed; one that saw two gets none."""
    from types import SimpleNamespace

    from orchestrator.benchmarks.bench_gpu_studies import second_width_steps

    widths = {10: 62, 11: 62, 12: 63, 13: 64}
    batch = lambda step: SimpleNamespace(tokens=torch.zeros(4, widths.get(step, 62)))
    assert second_width_steps(batch, [batch(0), batch(1)], first=10) == [12]
    assert second_width_steps(batch, [batch(0), batch(12)], first=10) == []
    assert second_width_steps(batch, [batch(0)], first=20, tries=5) == []


def test_own_mode_rows_time_and_record_every_shape_once(tmp_path):
    """What a study's GPU-hours come from: each of its trial shapes timed once in the
    mode its study file sets, and recorded (tiny stand-ins, on the CPU)."""
    from dataclasses import replace

    from lengthgen.config import EvalConfig, TaskConfig, TrainConfig, TrialConfig
    from orchestrator.benchmarks.bench_gpu_studies import own_mode_rows
    from orchestrator.studies.study_scale import read_rates, shape_id

    tiny = TrialConfig(task=TaskConfig(name="addition", train_digits=(1, 4)),
                       train=TrainConfig(steps=100, batch_size=8, warmup=1), eval=EvalConfig(digits=(2,), samples=4))
    seeded = replace(tiny, seeds=replace(tiny.seeds, weight=1))
    longer = replace(tiny, task=TaskConfig(name="addition", train_digits=(1, 6)))
    rows = own_mode_rows("quickstart", steps=2, warmup=1, results_root=tmp_path, device="cpu",
                         trials=[tiny, seeded, longer])
    assert [r.name for r in rows] == [f"GPU quickstart: tiny on 1-4 digits, {shape_id(tiny)}",
                                      f"GPU quickstart: tiny on 1-6 digits, {shape_id(longer)}"]
    assert all("(2 steps after 1, fp32)" in r.detail for r in rows)
    (shapes,) = read_rates(tmp_path)["cpu device"].values()
    assert set(shapes) == {shape_id(tiny), shape_id(longer)}


def test_a_profile_training_a_timed_mode_of_the_same_shape_gets_that_modes_rate(tmp_path, monkeypatch):
    """seed_robustness's `bf16` profile trains its first trial's shape in bf16 + compile,
    a mode the rows time: its rate is recorded for the profile, so `validate --profile
    bf16` quotes it; a profile of another shape (`small`) gets none."""
    from orchestrator.benchmarks import bench_gpu_studies
    from orchestrator.studies.study import load_study
    from orchestrator.studies.study_scale import read_rates, study_size_words

    (tmp_path / "tiny.yaml").write_text("""\
name: tiny
base:
  task: {name: addition, train_digits: [1, 3]}
  model: {arch: decoder, size: tiny, pe: rope}
  train: {steps: 100, batch_size: 8, warmup: 1}
  eval: {digits: [2], samples: 4}
axes:
  seeds.weight: [0, 1]
profiles:
  bf16: {train.precision: bf16}
  small: {train.batch_size: 4}
""")
    monkeypatch.setattr(bench_gpu_studies, "STUDIES", tmp_path)
    bench_gpu_studies.paper_scale(("tiny",), steps=1, warmup=1, runs=1, device="cpu", results_root=tmp_path / "results",
                                  compile_backend="eager")
    rates = read_rates(tmp_path / "results")["cpu device"]
    assert set(rates) == {"tiny", "tiny/bf16"}
    ((_, bf16),) = rates["tiny/bf16"].items()
    assert (bf16.precision, bf16.compile) == ("bf16", False)
    words = study_size_words(load_study(tmp_path / "tiny.yaml", "bf16"), tmp_path / "results")
    assert "measured there (bf16" in words and "estimate" not in words
