"""Numerical replicates: the initial weights of a weight seed, one of them moved by one ulp.

Summers & Dinneen, "Nondeterminism and Instability in Neural Network Optimization"
(ICML 2021, arXiv 2103.04514, §4) changed one bit of one initial weight and found about
as much run-to-run variability as a new random initialisation: training amplifies the
smallest difference. A trial with `seeds.perturb: k > 0` is such a replicate of its
weight seed. Which weight moves depends on k alone, never on the weight or data seed, so
that perturb seed k means the same site for every weight seed.

The site is drawn uniformly over the entries of the linear weights inside the
transformer layers (attention and feed-forward projections), not over every parameter:
a perturbation must act (a replicate identical to its original measures nothing), and
elsewhere one ulp can vanish. A zero bias moved to 1.4e-45 is absorbed by every sum it
joins; the embedding row of a token the task never uses, or a learned position beyond
the longest question, is never read. Every entry of a layer's projection multiplies a
live activation at every step, so its one-ulp change reaches the gradients at once.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

#: salts the perturbation's random stream, so that it shares no stream with a seed
#: of the same value used elsewhere (batches, questions)
_STREAM = 0x5EED_9E27


def layer_weights(model: nn.Module, layer_types: tuple[type[nn.Module], ...]) -> list[tuple[str, nn.Parameter]]:
    """(name, weight) of every nn.Linear inside a module of ``layer_types``, in module order."""
    found: dict[str, nn.Parameter] = {}
    for name, module in model.named_modules():
        if not isinstance(module, layer_types):
            continue
        for sub_name, sub in module.named_modules():
            if isinstance(sub, nn.Linear):
                found.setdefault(f"{name}.{sub_name}.weight", sub.weight)
    return list(found.items())


def perturbation_site(weights: list[tuple[str, nn.Parameter]], perturb_seed: int) -> tuple[str, int]:
    """(parameter name, flat index) of the entry seed ``perturb_seed`` moves: uniform over
    all entries of ``weights``, from a stream of the perturb seed alone."""
    sizes = np.array([weight.numel() for _, weight in weights], dtype=np.int64)
    entry = int(np.random.default_rng([perturb_seed, _STREAM]).integers(sizes.sum()))
    which = int(np.searchsorted(np.cumsum(sizes), entry, side="right"))
    return weights[which][0], entry - int(sizes[:which].sum())


@torch.no_grad()
def perturb_one_weight(
    model: nn.Module, perturb_seed: int, layer_types: tuple[type[nn.Module], ...]
) -> tuple[str, int] | None:
    """Move the entry ``perturbation_site`` picks to the next float towards +inf (one ulp);
    seed 0 leaves the model alone. Returns the site, or None for seed 0."""
    if perturb_seed == 0:
        return None
    weights = layer_weights(model, layer_types)
    if not weights:
        raise ValueError("seeds.perturb needs a model with linear layers inside its transformer layers")
    name, index = perturbation_site(weights, perturb_seed)
    flat = dict(weights)[name].view(-1)
    flat[index] = torch.nextafter(flat[index], torch.tensor(float("inf"), dtype=flat.dtype))
    return name, index
