"""Many seeds as one program: trials that differ only in their seeds train together
(`train_seed_batch`), each still its own trial.

The K models' weights are stacked as `[K, ...]` tensors and the architecture's own
forward runs once over them, vectorised over the seed dimension (torch.func's
`functional_call` under `vmap`): one batched matmul per layer instead of K small ones,
and one attention call with the seeds folded into its batch
(lengthgen.model.attention_seed_batch).
Everything that makes a seed a seed stays its own:

- initial weights: each seed's model is built exactly as its solo trial builds it,
  then stacked (bit-identical: tests/test_seed_batch.py hashes them);
- data: each seed's own `training_batch` and positions (its data seed), stacked, the
  narrower batches right-padded to the widest; a causal decoder's outputs at a
  column never read later columns, so the padding changes no supervised output;
- loss: the sum of the per-seed means, so no seed's gradient depends on another's;
- optimizer: AdamW over the stacked tensors is elementwise, so each seed's slice of
  its state is that seed's own AdamW state (and is what its checkpoint holds);
- gradient clipping: each seed's norm over its own slices, never a norm across seeds;
- divergence: a gradient that is not finite reaches the seed's own clipping and
  AdamW step as it would alone (a NaN spreads to its weights, an inf's clipping
  coefficient is 0 and inf x 0 is NaN), so a seed diverges at the step it would alone;
  a seed whose loss is not finite stops (`diverged`) and leaves the batch: its slices,
  AdamW state and data go, and the others go on without its cost.

After the first step a batched seed is a numerical replicate of its solo run, not a
copy: batched matmuls round differently from single ones (the first step's losses
and gradients agree within 1e-5 relative on the CPU).

What cannot be batched yet is refused, naming the field (`UNBATCHABLE`)."""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable, Sequence
from functools import partial

import torch
import torch.nn.functional as F
from torch.func import functional_call, vmap
from torch.utils import _pytree as pytree

from lengthgen.batches import placed_parts, training_batch
from lengthgen.config import TrialConfig, derive
from lengthgen.determinism import deterministic
from lengthgen.host_copy import to_device
from lengthgen.model.attention_kernels import sdpa_attend
from lengthgen.model.attention_seed_batch import seed_batch_attend
from lengthgen.model.base import Architecture, Batch, Positions, supervised_outputs
from lengthgen.model.position.attention_bias import ATTENTION_BIASES
from lengthgen.model.position.checks import checked_before
from lengthgen.model.position.stack import rows_agree
from lengthgen.model.recurrence import STATE_INITS
from lengthgen.precision import autocast, precision_mode
from lengthgen.tokenizer import CharTokenizer
from lengthgen.training import (
    Report,
    TrainingStep,
    TrialResult,
    TrialRun,
    diverged_result,
    phase_model,
    resolve_device,
)
from lengthgen.training_step import adamw_options, learning_rate

#: architectures whose forward is proven equal batched and alone, narrower batches
#: padded (tests/test_seed_batch.py): causal decoders, where padding on the right is
#: never read by an earlier column
BATCHED_ARCHITECTURES = ("decoder",)

#: field -> (does this trial use what cannot be batched yet, why)
UNBATCHABLE: dict[str, tuple[Callable[[TrialConfig], bool], str]] = {
    "model.arch": (
        lambda c: c.model.arch not in BATCHED_ARCHITECTURES,
        (f"seed batches train {', '.join(BATCHED_ARCHITECTURES)} models only (a bidirectional stack would "
         f"read the padding of a narrower seed's batch)"),
    ),
    "model.dropout": (
        lambda c: c.model.dropout > 0,
        "dropout under vmap draws one random stream for every seed, not each seed's own (data seed, step) stream",
    ),
    "model.attention_kernel": (
        lambda c: c.model.attention_kernel == "flex", "FlexAttention has no vmap rule",
    ),
    "model.attention_bias": (
        lambda c: ATTENTION_BIASES[c.model.attention_bias].calibrated,
        "a calibrated bias (abc) trains two phases with a bias read from each seed's own first phase",
    ),
    "train.compile": (lambda c: c.train.compile, "a compiled forward is not batched over seeds yet"),
    "train.length_buckets": (
        lambda c: c.train.length_buckets > 1, "each seed's batch splits into buckets of its own widths",
    ),
    "model.state_init": (
        lambda c: STATE_INITS[c.model.state_init] > 0,
        "each seed's state noise is drawn from its own stream at every forward, which vmap cannot give",
    ),
    "train.batch_ramp": (
        lambda c: c.train.batch_ramp is not None, "each seed's optimiser step accumulates micro-batches of its own",
    ),
    "train.progressive_loss_alpha": (
        lambda c: bool(c.train.progressive_loss_alpha), "each seed draws its own loop counts every step",
    ),
}


def _without_seeds(config: TrialConfig) -> dict:
    values = config.to_dict()
    values.pop("seeds")
    return values


def check_seed_batch(configs: Sequence[TrialConfig]) -> None:
    """Refuse a seed batch whose trials differ in anything but their seeds, or use what
    cannot be batched yet (ValueError naming the field)."""
    if not configs:
        raise ValueError("a seed batch needs at least one trial")
    first = _without_seeds(configs[0])
    for config in configs[1:]:
        other = _without_seeds(config)
        differing = sorted(
            f"{section}.{key}" for section in first for key in first[section]
            if first[section][key] != other[section][key]
        )
        if differing:
            raise ValueError(f"a seed batch trains trials that differ only in their seeds; trials "
                             f"{configs[0].trial_id} and {config.trial_id} also differ in {', '.join(differing)}")
    for field_name, (refused, why) in UNBATCHABLE.items():
        if refused(configs[0]):
            raise ValueError(f"{field_name} cannot be trained in a seed batch ({why}): "
                             f"use resources.seeds_per_trial: 1 for these trials")


def _pad_stack(tensors: list[torch.Tensor]) -> torch.Tensor:
    """The seeds' tensors stacked on a new first dimension, each right-padded with zeros
    to the largest size of every dimension."""
    shape = [max(sizes) for sizes in zip(*(t.shape for t in tensors), strict=True)]
    padded = []
    for t in tensors:
        pad = [amount for size, full in zip(reversed(t.shape), reversed(shape), strict=True) for amount in (0, full - size)]
        padded.append(F.pad(t, pad) if any(pad) else t)
    return torch.stack(padded)


class StackedModels:
    """K models of one architecture as stacked `[K, ...]` parameters and buffers, and
    their forward vectorised over the seed dimension. The solo models keep their own
    tensors: `to_solo` copies a seed's slices into its model (evaluation, checkpoints)."""

    def __init__(self, models: list[Architecture]) -> None:
        self.models = models
        #: the seeds (indices into `models`) whose slices the stack holds, in its order
        self.members = list(range(len(models)))
        self.params = {name: torch.stack([dict(m.named_parameters())[name].detach() for m in models]).requires_grad_()
                       for name, _ in models[0].named_parameters()}
        self.buffers = {name: torch.stack([dict(m.named_buffers())[name] for m in models])
                        for name, _ in models[0].named_buffers()}
        # the architecture's code without weights of its own: `functional_call` lends it each seed's slices
        self.skeleton = copy.deepcopy(models[0]).to("meta")
        self.skeleton.train()
        for module in self.skeleton.modules():
            if getattr(module, "attend", None) is sdpa_attend:
                module.attend = seed_batch_attend  # the seeds folded into one attention call

    def forward_losses(
        self, seeds_parts: list[tuple[Batch, Positions]], device, precision: str, rows_shared: bool | None = None,
    ) -> list[torch.Tensor]:
        """Each member's mean cross entropy over its supervised tokens, from one forward;
        `seeds_parts` are the members' parts, in `members` order. `rows_shared`: whether
        every row of every seed has the same positions, decided on the host
        (`seed_rows_agree`; the parts' positions checked there too); None: read here."""
        models = [self.models[k] for k in self.members]
        inputs = [model.training_inputs(batch, positions) for model, (batch, positions) in zip(models, seeds_parts)]
        if rows_shared is None:
            for model, (_, positions) in zip(models, seeds_parts):
                model.check_positions(positions)
        flat = [pytree.tree_flatten((i.args, i.kwargs)) for i in inputs]
        spec = flat[0][1]
        leaves = [None if leaf is None else _pad_stack([f[0][n] for f in flat]) for n, leaf in enumerate(flat[0][0])]

        def one_seed(params, buffers, *seed_leaves):
            args, kwargs = pytree.tree_unflatten(list(seed_leaves), spec)
            return functional_call(self.skeleton, (params, buffers), args, kwargs)

        dims = (0, 0, *(None if leaf is None else 0 for leaf in leaves))
        all_positions = () if rows_shared is not None else stacked_positions(seeds_parts)
        with autocast(device, precision), self.skeleton.rows_decided(all_positions, rows_shared), checked_before(), \
                warnings.catch_warnings():
            # an op without a batching rule runs once per seed, and vmap says so; attention, the one
            # the quickstart's models had (SDPA on the CPU), is folded over the seeds instead
            warnings.filterwarnings("ignore", message="There is a performance drop", category=UserWarning)
            logits = vmap(one_seed, in_dims=dims)(self.params, self.buffers, *leaves)
        losses = []
        for k, seed_inputs in enumerate(inputs):
            own = logits[k][tuple(slice(0, n) for n in seed_inputs.supervised.shape)]
            seed_logits, targets = supervised_outputs(own, seed_inputs, seeds_parts[k][0].supervised_index)
            losses.append(F.cross_entropy(seed_logits.float(), targets))
        return losses

    @torch.no_grad()
    def to_solo(self, k: int) -> Architecture:
        """Seed k's model holding its current slices."""
        model, at = self.models[k], self.members.index(k)
        for name, parameter in model.named_parameters():
            parameter.copy_(self.params[name][at])
        return model

    @torch.no_grad()
    def keep(self, seeds: list[int]) -> dict[torch.Tensor, torch.Tensor]:
        """Hold the slices of `seeds` (members) only; {old stacked parameter: new one}."""
        rows = torch.tensor([self.members.index(k) for k in seeds], device=next(iter(self.params.values())).device)
        renamed = {}
        for name, old in self.params.items():
            self.params[name] = renamed[old] = old.detach().index_select(0, rows).requires_grad_()
        self.buffers = {name: buffer.index_select(0, rows) for name, buffer in self.buffers.items()}
        self.members = list(seeds)
        return renamed


class SeedBatchStep:
    """The optimizer step of a seed batch: per-seed losses summed, per-seed clipping,
    one AdamW over the stacked tensors (each seed's slice its own state)."""

    def __init__(self, config: TrialConfig, stacked: StackedModels, device: torch.device) -> None:
        self.config, self.stacked, self.device = config, stacked, device
        self.optimizer = self._adamw()

    def _adamw(self) -> torch.optim.AdamW:
        params, train = list(self.stacked.params.values()), self.config.train
        groups = [
            {"params": [p for p in params if p.dim() >= 3], "weight_decay": train.weight_decay},
            {"params": [p for p in params if p.dim() < 3], "weight_decay": 0.0},
        ]
        return torch.optim.AdamW(groups, lr=train.lr, betas=(0.9, 0.98), eps=train.adam_eps,
                                 **adamw_options(self.device))

    def keep(self, seeds: list[int]) -> None:
        """Train `seeds` only from now on: a diverged seed leaves the stack, its AdamW state
        with it, so it costs the batch no more forward, backward or AdamW work."""
        old_rows = {k: at for at, k in enumerate(self.stacked.members)}
        rows = [old_rows[k] for k in seeds]
        renamed = self.stacked.keep(seeds)
        old_state = self.optimizer.state
        self.optimizer = self._adamw()
        for old, new in renamed.items():
            state = old_state.get(old)
            if state:
                index = torch.tensor(rows, device=new.device)
                self.optimizer.state[new] = {key: value.clone() if key == "step" else value.index_select(0, index)
                                             for key, value in state.items()}

    def update(self, step: int, seeds_parts: list, active: list[bool], rows_shared: bool | None = None) -> list[float]:
        """Train every active member on its own parts of batch `step` (both lists in
        `members` order); each member's loss. A seed whose loss is not finite, and every
        inactive one, leaves no gradient. `rows_shared`: as `StackedModels.forward_losses`."""
        for group in self.optimizer.param_groups:
            group["lr"] = learning_rate(self.config, step)
        self.optimizer.zero_grad(set_to_none=True)
        losses = self.stacked.forward_losses(seeds_parts, self.device, self.config.train.precision, rows_shared)
        detached = torch.stack([loss.detach() for loss in losses])
        if any(active):
            # which seeds train is decided on the device, and the losses are read once the
            # step is queued: the host launches the backward while the forward still runs
            # on a GPU, rather than waiting for the losses in between. An untrained seed's
            # loss enters as 0 (no gradient); its slices are zeroed in any case
            trained = torch.isfinite(detached) & to_device(torch.tensor(active), self.device)
            sum(torch.where(trained[at], loss, 0.0) for at, loss in enumerate(losses)).backward()
            self._mask_and_clip(trained)
            self.optimizer.step()
        return detached.tolist()  # the step's one host synchronisation

    @torch.no_grad()
    def _mask_and_clip(self, trained: torch.Tensor) -> None:
        """Zero the gradient slices of untrained seeds (a diverged seed's may be NaN), then
        clip each seed's gradient by its own norm, as `clip_grad_norm_` clips one trial's.
        A trained seed's gradient is left as it is, NaN and inf included: its clipping
        and AdamW step then do what they do alone."""
        grads = [p.grad for p in self.stacked.params.values() if p.grad is not None]
        shape = (-1,) + (1,) * 8
        for g in grads:
            g.masked_fill_(~trained.view(shape[: g.dim()]), 0.0)
        max_norm = self.config.train.grad_clip
        if max_norm <= 0:
            return
        # a scalar parameter (FIRE's c and threshold) stacks as (K,): each seed's slice is one value
        norms = torch.stack([torch.linalg.vector_norm(g.reshape(len(g), -1), dim=1) for g in grads])  # (P, K)
        coefficient = torch.clamp(max_norm / (torch.linalg.vector_norm(norms, dim=0) + 1e-6), max=1.0)
        for g in grads:
            g.mul_(coefficient.view(shape[: g.dim()]))

    def to_solo(self, k: int, optimizer: torch.optim.Optimizer) -> None:
        """Seed k's AdamW state, its slices of the stacked state, in its own optimizer."""
        solo, at = dict(self.stacked.models[k].named_parameters()), self.stacked.members.index(k)
        for name, stacked in self.stacked.params.items():
            state = self.optimizer.state.get(stacked)
            if state:
                optimizer.state[solo[name]] = {
                    key: value.clone() if key == "step" else value[at].clone() for key, value in state.items()
                }

    def from_solo(self, optimizers: list[torch.optim.Optimizer]) -> None:
        """The stacked AdamW state of the seeds' own (resumed) optimizers."""
        solos = [dict(model.named_parameters()) for model in self.stacked.models]
        for name, stacked in self.stacked.params.items():
            states = [optimizer.state.get(solo[name]) for optimizer, solo in zip(optimizers, solos)]
            if all(states):
                self.optimizer.state[stacked] = {
                    key: states[0][key].clone() if key == "step" else torch.stack([s[key] for s in states])
                    for key in states[0]
                }


def train_seed_batch(
    configs: Sequence[TrialConfig],
    on_report: Callable[[int, Report], None] | None = None,
    resume_states: Sequence[dict | None] | None = None,
    device: str | None = None,
) -> list[TrialResult]:
    """Train the trials `configs` (differing only in seeds) as one seed batch; each
    seed's result, as `lengthgen.training.train` gives it alone. `on_report(k, report)`
    receives seed k's reports; `resume_states[k]` is seed k's checkpoint (a solo
    trial's checkpoint, or one this batch wrote: the same form)."""
    check_seed_batch(configs)
    target_device = resolve_device(device)
    states = [state or {} for state in (resume_states or [None] * len(configs))]
    if len({state.get("step", 0) for state in states}) > 1:
        raise ValueError(f"the seeds of a batch resume at one step; their checkpoints are at steps "
                         f"{[state.get('step', 0) for state in states]}: resume them in batches of equal steps")
    train = configs[0].train
    with deterministic(train.deterministic, target_device), precision_mode(train.precision):
        return _train_batch(list(configs), on_report or (lambda k, report: None), states, target_device)


def _train_batch(configs, on_report, states, device) -> list[TrialResult]:
    tokenizer = CharTokenizer()
    runs = [TrialRun.start(c, tokenizer, device, 1, state) for c, state in zip(configs, states)]
    solos: list[tuple[Architecture, TrainingStep]] = [
        phase_model(c, 0, None, state, device) for c, state in zip(configs, states)
    ]
    stacked = StackedModels([model for model, _ in solos])
    batch_step = SeedBatchStep(configs[0], stacked, device)
    batch_step.from_solo([training_step.optimizer for _, training_step in solos])
    results: list[TrialResult | None] = [None] * len(configs)
    step = states[0].get("step", 0)
    while step < configs[0].train.steps and None in results:
        members = stacked.members
        host = [_seed_parts(configs[k], runs[k], solos[k][1], step, tokenizer) for k in members]
        seeds_parts = [placed_parts(solos[k][0], [part], device)[0] for k, part in zip(members, host, strict=True)]
        shared = seed_rows_agree(stacked.skeleton, host)
        losses = dict(zip(members, batch_step.update(step, seeds_parts, [True] * len(members), shared), strict=True))
        step += 1
        for k in members:
            seed_report = partial(on_report, k)
            model, optimizer = solos[k][0], solos[k][1].optimizer
            if not torch.isfinite(torch.tensor(losses[k])):
                results[k] = diverged_result(configs[k], model, device, runs[k].history, step,
                                       runs[k].last_finite_loss, seed_report)
                continue
            if runs[k].evaluates(step):
                stacked.to_solo(k)
                batch_step.to_solo(k, optimizer)
            runs[k].after_step(model, optimizer, 0, step, step - 1, losses[k], None, seed_report)
        training = [k for k in members if results[k] is None]
        if training and len(training) < len(members):
            batch_step.keep(training)
    return [result or runs[k].result(stacked.to_solo(k), step, None) for k, result in enumerate(results)]


def _seed_parts(config, run: TrialRun, training_step: TrainingStep, step: int, tokenizer):
    """Seed batch number `step` of one seed, from its own data seed: (tensors, positions)
    on the host (lengthgen.batches.placed_parts queues them to the device)."""
    task, distribution = derive(config).task, derive(config).distribution
    batch = training_batch(config, task, distribution, tokenizer, step)
    run.tokens_seen += int((batch.tokens != tokenizer.pad_id).sum())
    (parts,) = training_step.host_parts(step, batch)  # one part: train.length_buckets is refused
    return parts


def stacked_positions(seeds_parts: list[tuple[Batch, Positions]]) -> Positions:
    """The seeds' positions as the stacked forward reads them: padded to the widest and
    the seeds' rows one after another."""
    return tuple(_pad_stack([p[n] for _, p in seeds_parts]).flatten(0, 1) for n in range(len(seeds_parts[0][1])))


def seed_rows_agree(skeleton: Architecture, host_parts: list[tuple[Batch, Positions]]) -> bool:
    """Whether every row of every seed has the same positions, read from the host parts
    (free there) so that the stacked forward reads nothing back from the device."""
    return rows_agree(*skeleton.sequence_positions(stacked_positions(host_parts)))
