"""A study that cannot run on this Ray cluster says why in the user's terms
(orchestrator.studies.study_scale): what a trial asks against what the cluster has, the study's
size in training FLOPs and GPU-hours at a stated rate, and the profiles that run here
with the times the study file says were measured; a wrong `measured` entry is refused."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from lengthgen.batch_ramp import micro_batches
from lengthgen.model import build_model, count_parameters
from lengthgen.tokenizer import CharTokenizer
from orchestrator.studies.study import StudyError, load_study
from orchestrator.studies.study_scale import QUOTED_RATE, cannot_run_words, steps_flops, trial_cost

STUDIES = Path(__file__).parents[1] / "studies"


def test_the_paper_scale_study_names_its_needs_the_cluster_its_size_and_its_cpu_profiles():
    words = cannot_run_words(load_study(STUDIES / "seed_robustness.yaml"), {"CPU": 2.0})
    assert "each trial asks for 4 CPUs and 1 GPU" in words and "this Ray cluster has 2 CPUs and no GPU" in words
    assert "15 trials of 50,000 steps" in words and "GPU-hours at a sustained 100 TFLOP/s" in words
    assert "--profile cpu: 15 trials, 1 CPU and no GPU each; measured: 15 trials in 44 min 15 s" in words
    assert "--profile cpu_perturbed: 30 trials" in words and "--profile ten_weight_seeds" not in words
    assert f"lg-study run {STUDIES / 'seed_robustness.yaml'} --profile cpu" in words


def test_a_study_with_no_profile_that_fits_says_so(tmp_path: Path):
    text = (STUDIES / "seed_robustness.yaml").read_text().replace("resources.gpus_per_trial: 0", "resources.gpus_per_trial: 1")
    path = tmp_path / "gpu_only.yaml"
    path.write_text(text)
    words = cannot_run_words(load_study(path), {"CPU": 2.0})
    assert "None of its profiles (ten_weight_seeds, cpu, cpu_perturbed, bf16) runs on this cluster" in words


def test_a_trials_flops_count_its_models_parameters_and_its_batches_tokens():
    study = load_study(STUDIES / "quickstart.yaml")
    config = study.trials[0]
    cost = trial_cost(config)
    assert cost.parameters == count_parameters(build_model(config.model, len(CharTokenizer()), 0))
    assert cost.tokens_per_step >= config.train.batch_size * (2 * 4 + 3)  # 4-digit successor: n, "=", n + 1
    assert cost.flops > 6 * (cost.parameters - 64 * len(CharTokenizer())) * cost.tokens_per_step * config.train.steps
    assert QUOTED_RATE == 100e12


def test_the_flops_of_some_steps_count_the_micro_batches_a_batch_ramp_gives_them():
    """A rate timed over a ramped trial's first steps (one micro-batch each) divides those
    steps' FLOPs, not the trial's mean step's: sota_abacus's mean step trains 11.5
    micro-batches, and the mean once gave its GPU rows 522 TFLOP/s in fp32."""
    config = load_study(STUDIES / "sota_abacus.yaml", "cpu").trials[0]
    train, cost = config.train, trial_cost(config)
    assert steps_flops(config, 0, train.steps, cost) == pytest.approx(cost.flops)
    micro = cost.flops / sum(micro_batches(train.batch_ramp, train.batch_size, train.steps, s) for s in range(train.steps))
    assert steps_flops(config, 3, 13, cost) == pytest.approx(10 * micro)
    last = steps_flops(config, train.steps - 1, train.steps, cost)
    assert last == pytest.approx(micro * train.batch_ramp.to / train.batch_size)
    plain = load_study(STUDIES / "quickstart.yaml").trials[0]
    assert steps_flops(plain, 3, 13) == pytest.approx(trial_cost(plain).flops * 10 / plain.train.steps)


def test_measured_must_name_a_profile(tmp_path: Path):
    path = tmp_path / "wrong.yaml"
    path.write_text((STUDIES / "quickstart.yaml").read_text().replace("  cpu: \"16 trials", "  gpu: \"16 trials"))
    with pytest.raises(StudyError, match="measured: gpu is no profile of this study; valid: default, cpu, smoke"):
        load_study(path)


def test_a_looped_models_flops_count_its_layers_once_per_loop():
    """One layer looped 4 times computes as 4 layers of the same width, though it has the
    parameters of one (model.loops)."""

    config = load_study(STUDIES / "sota_abacus.yaml", "cpu").trials[0]
    one = replace(config, model=replace(config.model, size="tiny_1l", loops=1, input_injection="none"),
                  train=replace(config.train, progressive_loss_alpha=0.0))
    looped = replace(one, model=replace(one.model, loops=4, input_injection="loop"))
    model = build_model(one.model, len(CharTokenizer()), 0)
    layer = sum(p.numel() for p in model.blocks.parameters())
    extra = trial_cost(looped).flops - trial_cost(one).flops
    tokens = trial_cost(one).tokens_per_step * one.train.steps
    assert trial_cost(looped).parameters == trial_cost(one).parameters
    assert extra > 3 * 6 * layer * tokens  # three more passes through the layer's weights


def test_parameter_ranges_read_from_the_smallest_to_the_largest():
    from orchestrator.studies.study_scale import _millions

    assert _millions([120_456_000, 9_800_000]) == "9.8 M to 120 M"
    assert _millions([25_300_000]) == "25.3 M"


def test_gpu_hours_come_from_a_measured_rate_when_the_results_folder_records_one(tmp_path: Path):
    from typer.testing import CliRunner

    from orchestrator.cli import app
    from orchestrator.studies.study_scale import (
        FIRST_TRIAL_SHAPE,
        MeasuredRate,
        read_rates,
        record_rate,
    )

    study = load_study(STUDIES / "seed_robustness.yaml")
    estimated = cannot_run_words(study, {"CPU": 2.0}, tmp_path)
    assert "about 10.5 GPU-hours at a sustained 100 TFLOP/s (an estimate" in estimated
    rate = MeasuredRate(flops_per_s=250e12, ms_per_step=40.0, precision="bf16", compile=True,
                        measured_at="2026-11-26", torch_version="2.11.0+cu130")
    record_rate(tmp_path, "NVIDIA H200", "seed_robustness", FIRST_TRIAL_SHAPE, rate)
    record_rate(tmp_path, "NVIDIA H200", "seed_robustness/cpu", FIRST_TRIAL_SHAPE, replace(rate, flops_per_s=1e12))
    assert read_rates(tmp_path)["NVIDIA H200"]["seed_robustness"] == {FIRST_TRIAL_SHAPE: rate}
    measured = cannot_run_words(study, {"CPU": 2.0}, tmp_path)
    # 3.8e18 FLOPs at 250 TFLOP/s: 4.2 hours
    assert ("4.2 GPU-hours on an NVIDIA H200 at the 250 TFLOP/s measured there (bf16 + compile, 40 ms/step; "
            "lg-study bench --only gpu, 2026-11-26, torch 2.11.0+cu130)") in measured
    assert "estimate" not in measured
    outcome = CliRunner().invoke(app, ["validate", str(STUDIES / "seed_robustness.yaml"), "--results", str(tmp_path)])
    assert outcome.exit_code == 0, outcome.output
    assert "4.2 GPU-hours on an NVIDIA H200" in " ".join(outcome.output.split())
    other = CliRunner().invoke(app, ["validate", str(STUDIES / "seed_robustness.yaml"),
                                     "--results", str(tmp_path / "elsewhere")])
    assert "(an estimate" in " ".join(other.output.split())


def test_a_rate_carries_only_to_trials_of_the_shape_it_measured(tmp_path: Path):
    """model_size crosses four model sizes with four training lengths: a rate measured on
    its first trial (2m on 1-10 digits) prices the trials of that shape only, and the
    others are named and estimated; once every shape is measured, nothing is estimated."""
    from orchestrator.studies.study_scale import (
        MeasuredRate,
        record_rate,
        shape_id,
        study_size_words,
    )

    study = load_study(STUDIES / "model_size.yaml")
    shapes = list({shape_id(t): t for t in study.trials})
    assert len(shapes) == 16 and len(study.trials) == 48
    rate = MeasuredRate(flops_per_s=50e12, ms_per_step=10.0, precision="fp32", compile=False,
                        measured_at="2026-11-27", torch_version="2.11.0+cu130")
    record_rate(tmp_path, "NVIDIA H100", "model_size", shapes[0], rate)
    words = " ".join(study_size_words(study, tmp_path).split())
    assert "for its 3 trials of the shapes measured there, plus about" in words
    assert "for its other 45 trials, whose shapes (2m on 1-20 digits, 2m on 1-30 digits" in words
    assert "and 11 more) were not measured on it" in words
    for shape in shapes[1:]:
        record_rate(tmp_path, "NVIDIA H100", "model_size", shape, rate)
    everything = " ".join(study_size_words(study, tmp_path).split())
    assert "estimate" not in everything and "at the rates measured there for its 16 trial shapes (50-50 TFLOP/s" in everything


def test_a_rates_file_written_before_shapes_reads_as_the_first_trials(tmp_path: Path):
    import json

    from orchestrator.studies.study_scale import (
        FIRST_TRIAL_SHAPE,
        RATES_FILE,
        read_rates,
        study_size_words,
    )

    rate = {"flops_per_s": 35e12, "ms_per_step": 145.0, "precision": "fp32", "compile": False,
            "measured_at": "2026-11-27", "torch_version": "2.11.0+cu130"}
    (tmp_path / RATES_FILE).write_text(json.dumps({"NVIDIA H100 80GB HBM3": {"seed_robustness": rate}}))
    assert read_rates(tmp_path)["NVIDIA H100 80GB HBM3"]["seed_robustness"][FIRST_TRIAL_SHAPE].flops_per_s == 35e12
    words = " ".join(study_size_words(load_study(STUDIES / "seed_robustness.yaml"), tmp_path).split())
    assert "30.1 GPU-hours on an NVIDIA H100 80GB HBM3 at the 35 TFLOP/s measured there" in words
