"""Precision and compilation options: the logic runs on CPU (no GPU on this machine)."""

import warnings
from dataclasses import replace

import pytest
import torch

from lengthgen import TrialConfig, train
from lengthgen.config import EvalConfig, TaskConfig, TrainConfig
from lengthgen.model.layers import RMSNorm
from lengthgen.precision import PRECISIONS, autocast, precision_mode
from lengthgen.training import resolve_device
from lengthgen.training_step import adamw_options, build_optimizer

CONFIG = TrialConfig(
    task=TaskConfig(name="successor", train_digits=(1, 2)),
    train=TrainConfig(steps=4, batch_size=4, warmup=1, log_every=2),
    eval=EvalConfig(digits=(2,), samples=4),
)


def test_bf16_autocast_runs_the_forward_in_bfloat16():
    layer = torch.nn.Linear(4, 4)
    with autocast(torch.device("cpu"), "bf16"):
        assert layer(torch.randn(2, 4)).dtype == torch.bfloat16
    with autocast(torch.device("cpu"), "fp32"):
        assert layer(torch.randn(2, 4)).dtype == torch.float32


@pytest.mark.parametrize("precision", sorted(PRECISIONS))
def test_training_in_every_precision_gives_finite_losses(precision):
    config = replace(CONFIG, train=replace(CONFIG.train, precision=precision))
    result = train(config)
    assert result.status == "done"
    assert all(torch.isfinite(torch.tensor(t.loss)) for t in result.train)


def test_device_choice():
    assert resolve_device("cpu") == torch.device("cpu")
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert resolve_device(None).type == expected


@pytest.mark.slow
@pytest.mark.long
def test_compiled_training_equals_eager_training_closely():
    compiled = replace(CONFIG, train=replace(CONFIG.train, compile=True))
    eager_losses = [t.loss for t in train(CONFIG).train]
    compiled_losses = [t.loss for t in train(compiled).train]
    assert compiled_losses == pytest.approx(eager_losses, rel=1e-3)


def _fp32_settings() -> list:
    """Both APIs' view of the TF32 switches (reading the legacy flags raises after an
    inconsistent use of the new strings)."""
    return [torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32,
            torch.backends.cuda.matmul.fp32_precision, torch.backends.cudnn.conv.fp32_precision,
            torch.backends.cudnn.rnn.fp32_precision]


def test_tf32_is_set_for_the_trial_and_restored_after_even_on_error():
    before = _fp32_settings()
    with precision_mode("tf32"):
        assert _fp32_settings() == [True, True, "tf32", "tf32", "tf32"]
    with pytest.raises(RuntimeError, match="a failing trial"), precision_mode("tf32"):
        raise RuntimeError("a failing trial")
    assert _fp32_settings()[:2] == before[:2]
    for precision in ("fp32", "bf16"):
        with precision_mode(precision):
            assert _fp32_settings()[:3] == [False, False, "ieee"]
    assert _fp32_settings()[:2] == before[:2]


def test_tf32_on_the_cpu_trains_the_fp32_numbers_bit_for_bit_and_leaves_the_setting_as_it_was():
    """TF32 is a CUDA setting: on a CPU the trial is the fp32 one; and its identity differs."""
    before = _fp32_settings()
    tf32 = replace(CONFIG, train=replace(CONFIG.train, precision="tf32"))
    assert [t.loss for t in train(tf32).train] == [t.loss for t in train(CONFIG).train]
    assert _fp32_settings() == before
    assert tf32.trial_id != CONFIG.trial_id and '"precision":"tf32"' in tf32.identity_json()
    assert "precision" not in CONFIG.identity_json()


def test_rmsnorm_is_torchs_in_float32_bit_for_bit():
    torch.manual_seed(0)
    ours, theirs = RMSNorm(16), torch.nn.RMSNorm(16)
    with torch.no_grad():
        ours.weight.uniform_(0.5, 1.5)
        theirs.weight.copy_(ours.weight)
    x = torch.randn(3, 5, 16) * 4
    assert torch.equal(ours(x), theirs(x))


def test_rmsnorm_in_bf16_takes_the_fused_path_and_agrees_with_float32():
    torch.manual_seed(0)
    norm = RMSNorm(64)
    with torch.no_grad():
        norm.weight.uniform_(0.5, 1.5)
    x = torch.randn(8, 64) * 3 + 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "Mismatch dtype ... Cannot dispatch to fused implementation"
        low = norm(x.bfloat16())
    assert low.dtype == torch.bfloat16
    # bfloat16 keeps 8 significant bits: a relative error of 2^-8 per rounding, a few roundings
    torch.testing.assert_close(low.float(), norm(x), rtol=2**-6, atol=2**-6)
    x.requires_grad_(True)
    norm(x.bfloat16()).float().sum().backward()
    assert torch.isfinite(x.grad).all() and norm.weight.grad.dtype == torch.float32


def test_a_bf16_step_of_an_rmsnorm_model_runs_every_norm_fused():
    config = replace(CONFIG, model=replace(CONFIG.model, norm="rmsnorm", norm_placement="pre_post"),
                     train=replace(CONFIG.train, precision="bf16", steps=2))
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message="Mismatch dtype")
        assert train(config).status == "done"


def test_adamw_is_fused_on_cuda_only():
    assert adamw_options(torch.device("cuda", 0)) == {"fused": True}
    assert adamw_options(torch.device("cpu")) == {"foreach": True}
    model = torch.nn.Linear(3, 2)
    optimizer = build_optimizer(model, CONFIG.train, torch.device("cpu"))
    # the CPU keeps the numbers its pins were trained with: foreach, never fused
    assert not optimizer.defaults["fused"] and optimizer.defaults["foreach"]


def test_evaluation_runs_in_the_trials_precision(monkeypatch):
    """Greedy decoding and the teacher-forced pass run under the trial's autocast."""
    from lengthgen import training

    seen = []
    evaluate = training.evaluate

    def recording(*args, **kwargs):
        seen.append(torch.is_autocast_enabled("cpu") and torch.get_autocast_dtype("cpu") == torch.bfloat16)
        return evaluate(*args, **kwargs)

    monkeypatch.setattr(training, "evaluate", recording)
    train(replace(CONFIG, train=replace(CONFIG.train, precision="bf16")))
    train(CONFIG)
    assert seen == [True, False]
