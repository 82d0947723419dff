"""The seed batch's attention kernel (lengthgen.model.attention_seed_batch): under vmap
it folds the seeds into the batch and calls the `sdpa` kernel once; each seed's output
and gradients equal that seed's own `sdpa` call, for every form of mask an architecture
hands it (none, one shared by every seed, one per seed, one broadcast over the rows)."""

from __future__ import annotations

import pytest
import torch
from torch.func import vmap

from lengthgen.model.attention_kernels import causal_mask_with, sdpa_attend
from lengthgen.model.attention_seed_batch import FoldedAttention, seed_batch_attend

SEEDS, ROWS, HEADS, LENGTH, HEAD_DIM = 3, 5, 2, 7, 4


def qkv(generator: torch.Generator) -> list[torch.Tensor]:
    return [torch.randn(SEEDS, ROWS, HEADS, LENGTH, HEAD_DIM, generator=generator).requires_grad_() for _ in range(3)]


def additive(shape, generator: torch.Generator, grad: bool = False) -> torch.Tensor:
    """A causal additive mask of random scores (it may need a gradient, as a learned bias does)."""
    return causal_mask_with(torch.randn(*shape, LENGTH, LENGTH, generator=generator)).requires_grad_(grad)


#: mask name -> (mask, its vmap in_dim): none, shared by every seed (one row or a row
#: each), one per seed (one row or a row each, learned: it needs a gradient)
MASKS = {
    "none": lambda g: (None, None),
    "shared, one row": lambda g: (additive((1, 1), g), None),
    "shared, a row each": lambda g: (additive((ROWS, HEADS), g), None),
    "per seed, one row": lambda g: (additive((SEEDS, 1, HEADS), g, grad=True), 0),
    "per seed, a row each": lambda g: (additive((SEEDS, ROWS, 1), g, grad=True), 0),
}


@pytest.mark.parametrize("mask_name", sorted(MASKS))
def test_folded_attention_equals_each_seeds_own_sdpa_forward_and_backward(mask_name):
    generator = torch.Generator().manual_seed(7)
    q, k, v = qkv(generator)
    mask, mask_dim = MASKS[mask_name](generator)
    upstream = torch.randn(SEEDS, ROWS, HEADS, LENGTH, HEAD_DIM, generator=generator)
    folded = vmap(lambda q, k, v, m: seed_batch_attend(q, k, v, m, 0.0, True), in_dims=(0, 0, 0, mask_dim))(q, k, v, mask)
    inputs = [t for t in (q, k, v, mask) if t is not None and t.requires_grad]
    folded_grads = torch.autograd.grad(folded, inputs, upstream)
    alone = torch.stack([
        sdpa_attend(q[s], k[s], v[s], None if mask is None else mask[s] if mask_dim == 0 else mask, 0.0, True)
        for s in range(SEEDS)
    ])
    alone_grads = torch.autograd.grad(alone, inputs, upstream)
    torch.testing.assert_close(folded, alone, rtol=1e-6, atol=1e-6)
    for got, want in zip(folded_grads, alone_grads, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


def test_seeds_on_another_dimension_than_the_first_fold_alike():
    generator = torch.Generator().manual_seed(5)
    q, k, v = qkv(generator)
    mask = additive((SEEDS, 1, HEADS), generator)
    moved = [t.movedim(0, 2) for t in (q, k, v)]  # (B, H, K, T, hd): the seeds on dimension 2
    folded = vmap(lambda q, k, v, m: seed_batch_attend(q, k, v, m, 0.0, True), in_dims=(2, 2, 2, 0))(*moved, mask)
    alone = torch.stack([sdpa_attend(q[s], k[s], v[s], mask[s], 0.0, True) for s in range(SEEDS)])
    torch.testing.assert_close(folded, alone, rtol=1e-6, atol=1e-6)


def test_outside_vmap_it_is_sdpa_and_its_backward_recomputes_sdpas():
    generator = torch.Generator().manual_seed(3)
    q, k, v = (t[0] for t in qkv(generator))
    mask = additive((1, HEADS), generator, grad=True)
    upstream = torch.randn(ROWS, HEADS, LENGTH, HEAD_DIM, generator=generator)
    out = FoldedAttention.apply(q, k, v, mask, False)
    reference = sdpa_attend(q, k, v, mask, 0.0, False)
    assert torch.equal(out, reference)
    got = torch.autograd.grad(out, (q, k, v, mask), upstream)
    want = torch.autograd.grad(reference, (q, k, v, mask), upstream)
    for g, w in zip(got, want, strict=True):
        assert torch.equal(g, w)


def test_a_seed_batch_has_no_attention_dropout():
    q = torch.zeros(1, 1, 2, 4)
    with pytest.raises(ValueError, match="model.dropout"):
        seed_batch_attend(q, q, q, None, 0.1, True)
