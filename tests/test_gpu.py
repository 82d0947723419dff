"""The CUDA paths on a GPU (`pytest -m gpu` runs exactly these): a training step of every
positional encoding and position sampler in each architecture, in fp32 and under bf16
autocast, against the CPU loss of the same batch; KV-cached == uncached decoding and
teacher-forced == greedy exact match; a checkpoint saved on the GPU resumed on the GPU
and on the CPU; torch.compile; and a real local Ray run packing four trials on one GPU
(`gpus_per_trial: 0.25`). Where CUDA is absent each test is skipped with its reason
(`pytest -rs` shows it).

`LG_GPU_TESTS_DEVICE=cpu pytest -m gpu` runs the tests' own logic on the CPU (each
device compared with itself, so only the code paths are checked), all but the Ray run,
which needs a GPU that Ray can see.
"""

from __future__ import annotations

import os
from dataclasses import replace

import numpy as np
import pytest
import torch

from lengthgen import TrialConfig, train
from lengthgen.batches import batch_tensors, training_batch
from lengthgen.config import EvalConfig, FormatConfig, ModelConfig, TaskConfig, TrainConfig
from lengthgen.distributions import DISTRIBUTIONS
from lengthgen.evaluation import (
    build_eval_sets,
    eval_generator,
    greedy_decode,
    teacher_forced_argmax,
)
from lengthgen.model import ARCHITECTURES, build_model
from lengthgen.model.position.pe import POSITIONAL_ENCODINGS
from lengthgen.model.position.samplers import POSITION_SAMPLERS, build_position_sampler
from lengthgen.precision import PRECISIONS
from lengthgen.tasks import build_task
from lengthgen.tokenizer import CharTokenizer
from lengthgen.training_step import accumulate_gradients
from orchestrator.mlflow_tracking.group_runs import TRIAL_RUNS
from orchestrator.running.trainable import load_checkpoint, save_checkpoint

DEVICE = torch.device(os.environ.get("LG_GPU_TESTS_DEVICE", "cuda"))
CPU = torch.device("cpu")
NO_CUDA = "no CUDA device: run these on a machine with an NVIDIA GPU (pytest -m gpu)"
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(DEVICE.type == "cuda" and not torch.cuda.is_available(), reason=NO_CUDA),
]
#: losses on two devices agree to this relative tolerance: fp32 (GPU kernels sum in
#: another order), tf32 (10-bit mantissa products), bf16 autocast (8 bits of mantissa)
#: against the CPU's fp32
LOSS_RTOL = {"fp32": 1e-3, "tf32": 1e-2, "bf16": 5e-2}
tokenizer = CharTokenizer()


def trial_config(arch: str, pe: str, positions: str) -> TrialConfig | None:
    """A small trial of each architecture's layout, None where the config refuses the
    combination (e.g. `upe` outside the aligned layout)."""
    model = ModelConfig(arch=arch, size="tiny", pe=pe, positions=positions, max_positions=96)
    train_config, eval_config = TrainConfig(batch_size=16, lr=1e-3), EvalConfig(digits=(3,), samples=4)
    try:
        if ARCHITECTURES[arch].aligned_outputs:
            return TrialConfig(task=TaskConfig(name="multiplication", train_digits=(1, 6)),
                               format=FormatConfig(fixed_length=True, reverse=False, pad=False),
                               model=model, train=train_config, eval=eval_config)
        return TrialConfig(task=TaskConfig(name="addition", train_digits=(1, 8)),
                           format=FormatConfig(index_hints=True), model=model, train=train_config, eval=eval_config)
    except ValueError:
        return None


COMBINATIONS = [(arch, pe, positions) for arch in ARCHITECTURES for pe in POSITIONAL_ENCODINGS
                for positions in POSITION_SAMPLERS if trial_config(arch, pe, positions) is not None]


def step_losses(config: TrialConfig, device: torch.device, precision: str, steps: int = 2) -> list[float]:
    """The loss of `steps` training steps (batches 0, 1, ...: the second after one AdamW
    step), with the same weights, batches and positions on any device."""
    torch.manual_seed(0)
    task, distribution = build_task(config.task), DISTRIBUTIONS[config.data.distribution]()
    model = build_model(config.model, len(tokenizer), 0, config.input_layout).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.train.lr)
    sampler, losses = build_position_sampler(config.model), []
    for step in range(steps):
        batch = training_batch(config, task, distribution, tokenizer, step)
        tensors = batch_tensors(batch, device)
        positions = model.sample_positions(tensors.tokens, tensors.prompt_lengths, sampler,
                                           torch.Generator().manual_seed(step), training=True)
        optimizer.zero_grad(set_to_none=True)
        loss = accumulate_gradients(model.forward_batch, [(tensors, positions)], device, precision)
        grads = [p.grad for p in model.parameters() if p.grad is not None]
        assert grads and all(bool(torch.isfinite(g).all()) for g in grads), f"non-finite gradient at step {step}"
        optimizer.step()
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("precision", sorted(PRECISIONS))
@pytest.mark.parametrize("arch, pe, positions", COMBINATIONS, ids=["-".join(c) for c in COMBINATIONS])
def test_training_step_on_the_gpu_matches_the_cpu(arch, pe, positions, precision):
    config = trial_config(arch, pe, positions)
    on_gpu = step_losses(config, DEVICE, precision)
    on_cpu = step_losses(config, CPU, "fp32")
    assert all(np.isfinite(on_gpu)), on_gpu
    assert on_gpu == pytest.approx(on_cpu, rel=LOSS_RTOL[precision])


@pytest.mark.skipif(DEVICE.type != "cuda", reason="FlexAttention has no backward on a CPU (torch 2.13)")
@pytest.mark.parametrize("arch, pe, positions", [("decoder", "alibi", "plain"), ("decoder", "kerple_log", "randomized"),
                                                 ("decoder", "t5", "plain"), ("decoder", "fire", "randomized"),
                                                 ("encoder_decoder", "alibi", "plain"), ("encoder", "t5", "plain")])
def test_a_flex_attention_step_on_the_gpu_matches_the_reference(arch, pe, positions):
    """model.attention_kernel flex (the bias inside the kernel) against sdpa, both on the
    GPU: the losses of two steps, the second after an AdamW step on flex's gradients."""
    config = trial_config(arch, pe, positions)
    flex = replace(config, model=replace(config.model, attention_kernel="flex"))
    assert step_losses(flex, DEVICE, "fp32") == pytest.approx(step_losses(config, DEVICE, "fp32"), rel=1e-4)


def test_a_compiled_bf16_trial_on_the_gpu_compiles_a_bounded_number_of_graphs():
    """train.compile under bf16, with inductor: the losses of the eager trial, and no
    recompile beyond MAX_GRAPHS per value of the shared-rows decision."""
    from torch._dynamo.utils import counters

    from lengthgen.compiled_step import MAX_GRAPHS

    eager = replace(RESUMED, train=replace(RESUMED.train, steps=30, log_every=5, precision="bf16"))
    compiled = replace(eager, train=replace(eager.train, compile=True))
    torch._dynamo.reset()
    counters.clear()
    compiled_losses = [t.loss for t in train(compiled, device=str(DEVICE)).train]
    assert counters["stats"]["unique_graphs"] <= 2 * MAX_GRAPHS
    eager_losses = [t.loss for t in train(eager, device=str(DEVICE)).train]
    assert compiled_losses == pytest.approx(eager_losses, rel=5e-2)


def decoder_config(pe: str, positions: str = "plain") -> ModelConfig:
    return ModelConfig(pe=pe, positions=positions, max_positions=64, randomized_at_eval=positions == "randomized")


@pytest.mark.parametrize("positions", sorted(POSITION_SAMPLERS))
@pytest.mark.parametrize("pe", sorted(POSITIONAL_ENCODINGS))
def test_cached_greedy_equals_uncached_greedy_on_the_gpu(pe, positions):
    cfg = decoder_config(pe, positions)
    model = build_model(cfg, len(tokenizer), weight_seed=3).to(DEVICE).eval()
    rows = torch.randint(3, len(tokenizer), (6, 7 + 9), generator=torch.Generator().manual_seed(0)).to(DEVICE)
    sampled = model.sample_positions(rows, torch.full((6,), 7, device=DEVICE), build_position_sampler(cfg),
                                     torch.Generator().manual_seed(1), training=False)
    cached = greedy_decode(model, rows[:, :7], 9, sampled, use_cache=True)
    uncached = greedy_decode(model, rows[:, :7], 9, sampled, use_cache=False)
    assert cached.device.type == DEVICE.type
    assert torch.equal(cached, uncached)


SEQUENTIAL_PES = sorted(pe for pe, encoding in POSITIONAL_ENCODINGS.items() if not encoding.needs_uniform_columns)


@pytest.mark.parametrize("pe", SEQUENTIAL_PES)
def test_teacher_forced_exact_match_equals_greedy_on_the_gpu(pe):
    config = TrialConfig(
        task=TaskConfig(name="successor", train_digits=(1, 3)),
        model=replace(decoder_config(pe), size="tiny"),
        train=TrainConfig(steps=200, batch_size=32, lr=3e-3, warmup=10, log_every=200),
        eval=EvalConfig(digits=(1, 2, 3), samples=48),
    )
    states = []
    train(config, on_report=lambda r: r.checkpoint and states.append(r.checkpoint()), device=str(DEVICE))
    model = build_model(config.model, len(tokenizer), config.seeds.weight)
    model.load_state_dict(states[-1]["model"])
    model = model.to(DEVICE).eval()
    sampler, outcomes = build_position_sampler(config.model), []
    for eval_set in build_eval_sets(config, build_task(config.task), tokenizer):
        questions = eval_set.questions
        tokens = torch.from_numpy(questions.tokens).to(DEVICE)
        prompt = questions.prompt_length
        positions = model.sample_positions(tokens, torch.full((len(tokens),), prompt, device=DEVICE), sampler,
                                           eval_generator(config, eval_set.digits), training=False)
        target = questions.tokens[:, prompt:]
        forced = teacher_forced_argmax(model, tokens, positions, prompt).cpu().numpy()
        greedy = greedy_decode(model, tokens[:, :prompt], target.shape[1], positions).cpu().numpy()
        forced_right = (forced == target).all(axis=1)
        assert np.array_equal(forced_right, (greedy == target).all(axis=1))
        outcomes += forced_right.tolist()
    assert 0 < sum(outcomes) < len(outcomes), f"{sum(outcomes)} of {len(outcomes)} right"


RESUMED = TrialConfig(
    task=TaskConfig(name="successor", train_digits=(1, 2)),
    model=ModelConfig(size="tiny", pe="rope"),
    train=TrainConfig(steps=40, batch_size=16, lr=3e-3, warmup=5, log_every=1),
    eval=EvalConfig(digits=(2, 3), samples=8, every=20),
)


def test_a_checkpoint_saved_on_the_gpu_resumes_on_the_gpu_and_on_the_cpu(tmp_path):
    saved = tmp_path / "trial.pt"

    def keep_first(report):
        if report.checkpoint is not None and not saved.exists():
            save_checkpoint(saved, report.checkpoint())

    whole = train(RESUMED, on_report=keep_first, device=str(DEVICE))
    after = [t.loss for t in whole.train if t.step > 20]
    raw = torch.load(saved, map_location=None, weights_only=True)
    assert raw["step"] == 20 and all(t.device.type == DEVICE.type for t in raw["model"].values())
    # the GPU's embedding backward adds in no fixed order: not bit for bit even on the GPU
    for device, rtol in ((DEVICE, 1e-4), (CPU, 2e-3)):
        resumed = train(RESUMED, resume_state=load_checkpoint(saved, RESUMED), device=str(device))
        assert resumed.device == str(device)
        assert [t.loss for t in resumed.train if t.step > 20] == pytest.approx(after, rel=rtol), device
        assert resumed.summary == pytest.approx(whole.summary, abs=0.2)


def test_torch_compile_trains_like_eager_on_the_gpu():
    eager = replace(RESUMED, train=replace(RESUMED.train, steps=20, log_every=5))
    compiled = replace(eager, train=replace(eager.train, compile=True))
    eager_losses = [t.loss for t in train(eager, device=str(DEVICE)).train]
    compiled_losses = [t.loss for t in train(compiled, device=str(DEVICE)).train]
    assert compiled_losses == pytest.approx(eager_losses, rel=1e-3)


@pytest.mark.parametrize("arch, pe, positions", [("decoder", "rope", "plain"), ("decoder", "fire", "randomized"),
                                                 ("encoder_decoder", "t5", "plain")])
def test_a_deterministic_trial_gives_identical_rows_twice_on_the_gpu(arch, pe, positions):
    """train.deterministic: the same trial twice on one GPU, every row equal bit for bit
    (losses, accuracies, each question's prediction)."""
    config = trial_config(arch, pe, positions)
    if config is None:
        pytest.skip(f"{arch} does not take {pe} with {positions} positions")
    config = replace(config, train=replace(config.train, steps=30, log_every=5, deterministic=True),
                     eval=replace(config.eval, samples=32))
    from test_determinism import timeless_rows

    first, second = (timeless_rows(train(config, device=str(DEVICE))) for _ in range(2))
    assert first == second


PACKED_STUDY = """\
name: gpu_packing
source: "tests/test_gpu.py: four trials on one GPU at once"
base:
  task: {name: successor, train_digits: [1, 2]}
  model: {size: tiny, pe: rope}
  train: {steps: 3000, batch_size: 32, warmup: 10, log_every: 300}
  eval: {digits: [2, 3], samples: 16, every: 1000}
axes:
  seeds.weight: [0, 1, 2, 3]
resources: {cpus_per_trial: 1, gpus_per_trial: 0.25}
"""


@pytest.mark.skipif(DEVICE.type != "cuda", reason="the Ray run needs a GPU that Ray can see")
def test_a_study_packs_four_trials_on_one_gpu(tmp_path):
    import mlflow
    import ray
    from typer.testing import CliRunner

    from analysis.query import open_results, run_query
    from orchestrator.cli import app
    from orchestrator.running.tune_runner import start_ray

    study, results = tmp_path / "gpu_packing.yaml", tmp_path / "results"
    study.write_text(PACKED_STUDY)
    ray.shutdown()
    start_ray(None, num_cpus=4, num_gpus=1)  # one GPU: four trials of 0.25 fill it
    try:
        outcome = CliRunner().invoke(app, ["run", str(study), "--results", str(results)])
    finally:
        ray.shutdown()
    assert outcome.exit_code == 0, outcome.output
    with open_results(results, "gpu_packing") as con:
        trials = run_query(con, "select trial_id, status, device, pid, started_at, finished_at from trials").to_pylist()
        counts = {t: run_query(con, f"select count(distinct trial_id) as n from {t}").to_pylist()[0]["n"]
                  for t in ("train", "eval", "samples")}
    assert len(trials) == 4 and {t["status"] for t in trials} == {"done"}
    assert {t["device"] for t in trials} == {"cuda"}
    assert counts == {"train": 4, "eval": 4, "samples": 4}
    assert len({t["pid"] for t in trials}) == 4, "four worker processes"
    # all four trained at once: the last to start started before the first to finish finished
    assert max(t["started_at"] for t in trials) < min(t["finished_at"] for t in trials), trials
    client = mlflow.MlflowClient(f"sqlite:///{results.resolve()}/mlflow.db")
    runs = client.search_runs([client.get_experiment_by_name("gpu_packing").experiment_id],
                              filter_string=TRIAL_RUNS)
    assert len(runs) == 4 and {r.info.status for r in runs} == {"FINISHED"}
    assert {r.data.tags["trial_id"] for r in runs} == {t["trial_id"] for t in trials}


def test_state_noise_drawn_on_the_device_is_there_and_repeatable():
    """train.state_noise_draw device: the noise comes from the GPU's own generator (no host
    draw, no copy), and the same seed gives the same training twice."""
    from pathlib import Path

    from lengthgen.config import derive
    from lengthgen.model.recurrence import STATE_NOISE_DRAWS, state_noise
    from lengthgen.training_step import TrainingStep
    from orchestrator.studies.study import load_study

    noise = state_noise((2, 3, 4), 0.02, STATE_NOISE_DRAWS["device"](7, DEVICE))
    assert noise.device.type == DEVICE.type
    config = load_study(Path(__file__).resolve().parents[1] / "studies" / "sota_abacus.yaml", "cpu").trials[0]
    config = replace(config, train=replace(config.train, state_noise_draw="device", batch_size=8, batch_ramp=None))
    task, distribution, _, layout = derive(config)

    def losses() -> list[float]:
        model = build_model(config.model, len(tokenizer), config.seeds.weight, layout).to(DEVICE)
        step = TrainingStep(config, model, DEVICE)
        return [step(s, training_batch(config, task, distribution, tokenizer, s)).item() for s in range(2)]

    assert losses() == losses()
