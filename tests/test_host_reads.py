"""A training step reads nothing back from its device but the loss.

On a GPU every read of a tensor's value by the host (`.item()`, `bool(tensor)`, a
boolean mask's selection, `nonzero`) waits for every kernel queued before it, so the
host cannot prepare the next step while the GPU trains on this one. lg-study decides on
the host, before the copy, what a step would otherwise read (lengthgen.batches.placed_parts:
the supervised outputs' index, whether rows share their positions, the checks of
learned tables), and the trainer reads the loss once a step.

A CPU has no such wait, but the operations that make one on CUDA are the same:
`DeviceReads` counts them in a step's `update` (forward, backward, optimizer), where
every tensor is on the device. tools/gpu_probe.py's `syncs` section counts the real
synchronisations on a GPU (torch's sync debug mode)."""

from __future__ import annotations

import traceback
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from test_compiled_step import EVERY_PE, MORE, trial
from torch.utils._python_dispatch import TorchDispatchMode

from lengthgen import training_step as training_step_module
from lengthgen.batches import placed_parts, training_batch
from lengthgen.config import derive
from lengthgen.model import build_model
from lengthgen.seed_batch import SeedBatchStep, StackedModels, _seed_parts, seed_rows_agree
from lengthgen.tokenizer import CharTokenizer
from lengthgen.training import TrialRun, phase_model
from lengthgen.training_step import TrainingStep

CPU = torch.device("cpu")
REPO = Path(__file__).resolve().parents[1]
tokenizer = CharTokenizer()

#: aten operations that make a CUDA stream wait for the host to read a value
READING_OPS = {"_local_scalar_dense", "nonzero", "masked_select", "is_nonzero", "equal", "unique_dim",
               "_unique2", "unique_consecutive", "masked_scatter", "masked_scatter_"}
#: aten operations that read their index on the host when it is a boolean mask
MASK_INDEXED_OPS = {"index", "index_put", "index_put_", "_index_put_impl_"}
#: the files whose reads are of host tensors on every device: the progressive loss's loop
#: counts, drawn from a CPU Generator (lengthgen.model.recurrence.progressive_terms)
HOST_TENSORS = ("lengthgen/model/recurrence.py",)


def _boolean(value) -> bool:
    values = value if isinstance(value, (list, tuple)) else [value]
    return any(isinstance(v, torch.Tensor) and v.dtype in (torch.bool, torch.uint8) for v in values)


class DeviceReads(TorchDispatchMode):
    """Counts the operations that read a tensor's value on the host, each at the
    repository line that called it."""

    def __init__(self) -> None:
        super().__init__()
        self.sites: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func._schema.name.split("::")[-1]
        if name in READING_OPS or (name in MASK_INDEXED_OPS and any(_boolean(a) for a in args)):
            frames = [f for f in traceback.extract_stack()[:-1] if f.filename.startswith(str(REPO))
                      and not f.filename.startswith(str(REPO / ".venv")) and "test_host_reads" not in f.filename]
            where = f"{Path(frames[-1].filename).relative_to(REPO)}:{frames[-1].lineno}" if frames else "torch"
            if not where.startswith(HOST_TENSORS):
                self.sites.append(f"{name} at {where}")
        return func(*args, **(kwargs or {}))


@pytest.fixture
def fused_adamw(monkeypatch):
    """The optimizer a CUDA step takes (fused AdamW, which skips a non-finite step on
    the device), here on the CPU: without it the step asks `if torch.isfinite(loss)`."""
    monkeypatch.setitem(training_step_module.ADAMW_OPTIONS, "cpu", {"fused": True})


def _reads_of_update(config, steps: int = 2) -> list[str]:
    derived = derive(config)
    model = build_model(config.model, len(tokenizer), 0, derived.input_layout)
    step = TrainingStep(config, model, CPU)
    reads = DeviceReads()
    for number in range(steps):
        parts = step.parts(number, training_batch(config, derived.task, derived.distribution, tokenizer, number))
        with reads:
            step.update(number, parts)
    return reads.sites


#: what else a step can do: length buckets, micro-batches, the progressive loss, state noise
STEP_OPTIONS = [
    ("decoder", "rope", {}, {"length_buckets": 3}),
    ("decoder", "rope", {"loops": 2, "input_injection": "loop", "size": "tiny_1l"}, {"progressive_loss_alpha": 0.5}),
    ("decoder", "rope", {"loops": 2, "input_injection": "loop", "size": "tiny_1l", "state_init": "noise"}, {}),
    ("decoder", "alibi", {}, {"grad_clip": 1.0}),
]
CASES = [(a, p, m, {}) for a, p, m in EVERY_PE + MORE] + STEP_OPTIONS


@pytest.mark.parametrize("arch, pe, model, train", CASES,
                         ids=[f"{a}-{p}" + "".join(f"-{k}" for k in {**m, **t}) for a, p, m, t in CASES])
def test_a_training_step_reads_nothing_from_its_device(fused_adamw, arch, pe, model, train):
    config = trial(arch, pe, **model)
    assert config is not None
    config = replace(config, train=replace(config.train, **train)) if train else config
    assert _reads_of_update(config, steps=2) == []


def test_without_the_host_decisions_the_same_step_reads_the_device(fused_adamw):
    """The counter sees what it counts: parts without the host's decisions make the
    forward read the positions and select by the mask on the device."""
    config = trial("decoder", "fire", positions="randomized")
    derived = derive(config)
    model = build_model(config.model, len(tokenizer), 0, derived.input_layout)
    step = TrainingStep(config, model, CPU)
    parts = step.parts(0, training_batch(config, derived.task, derived.distribution, tokenizer, 0))
    bare = [(batch._replace(supervised_index=None, rows_shared=None), positions) for batch, positions in parts]
    with DeviceReads() as reads:
        step.update(0, bare)
    names = {site.split(" at ")[0] for site in reads.sites}
    assert {"_local_scalar_dense", "index", "index_put"} <= names, reads.sites


def test_a_seed_batch_step_reads_nothing_from_its_device_but_its_losses(fused_adamw):
    config = trial("decoder", "fire", positions="randomized")
    configs = [replace(config, seeds=replace(config.seeds, weight=k, data=k)) for k in range(3)]
    solos = [phase_model(c, 0, None, {}, CPU) for c in configs]
    stacked = StackedModels([model for model, _ in solos])
    batch_step = SeedBatchStep(configs[0], stacked, CPU)
    runs = [TrialRun.start(c, tokenizer, CPU, 1, {}) for c in configs]
    host = [_seed_parts(c, run, s, 0, tokenizer) for c, run, (_, s) in zip(configs, runs, solos, strict=True)]
    parts = [placed_parts(model, [part], CPU)[0] for (model, _), part in zip(solos, host, strict=True)]
    shared = seed_rows_agree(stacked.skeleton, host)
    with DeviceReads() as reads:
        # the losses' read, `.tolist()`, copies them to the host without an operation of its own on a CPU
        batch_step.update(0, parts, [True] * 3, shared)
    assert reads.sites == []


@pytest.mark.parametrize("arch, pe, model", EVERY_PE + MORE,
                         ids=[f"{a}-{p}" + "".join(f"-{k}" for k in m) for a, p, m in EVERY_PE + MORE])
def test_the_host_decisions_are_the_ones_the_forward_would_read(arch, pe, model):
    """Placed parts carry the mask's own flat index and the data's own rows decision,
    and a step on them trains the numbers a step without them trains, bit for bit."""
    config = trial(arch, pe, **model)
    derived = derive(config)
    batch = training_batch(config, derived.task, derived.distribution, tokenizer, 0)
    results = []
    for decided in (True, False):
        built = build_model(config.model, len(tokenizer), 0, derived.input_layout)
        step = TrainingStep(config, built, CPU)
        parts = step.parts(0, batch)
        if not decided:
            parts = [(b._replace(supervised_index=None, rows_shared=None), p) for b, p in parts]
        for part, positions in parts if decided else ():
            mask = built.supervised_mask(part)
            assert torch.equal(part.supervised_index, mask.flatten().nonzero().squeeze(1))
            assert part.rows_shared == all(bool((p == p[:1]).all()) for p in built.sequence_positions(positions))
        loss = step.update(0, parts)
        results.append((loss, [p.detach().clone() for p in built.parameters()]))
    (loss, weights), (bare_loss, bare_weights) = results
    assert torch.equal(loss, bare_loss)
    assert all(torch.equal(a, b) for a, b in zip(weights, bare_weights, strict=True))
