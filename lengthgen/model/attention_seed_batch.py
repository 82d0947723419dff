"""The `sdpa` attention kernel for a seed batch (lengthgen.seed_batch): the seed
dimension folded into the batch, so K seeds attend in one kernel call.

Under `torch.func.vmap` scaled_dot_product_attention has no batching rule on the CPU:
vmap runs it once per seed and stacks the results, and its backward fills and copies a
zero gradient per seed (together about a quarter of a quickstart seed batch's step).
Attention has no weights of its own, so the K seeds' queries, keys and values are K
times as many rows of one attention: `FoldedAttention.vmap` reshapes (K, B, ...) into
(K * B, ...), each seed's mask repeated or broadcast to its rows, and calls the same
kernel once. Each row's softmax reads only its own row, so no seed reads another's.
"""

from __future__ import annotations

import torch

from lengthgen.model.attention_kernels import PointwiseBias, dense, sdpa_attend


def _folded(tensor: torch.Tensor, dim: int | None, seeds: int, rows: int) -> torch.Tensor:
    """A (K, b, ...) tensor (seed dimension `dim`, or none: one tensor for every seed) as
    (K * rows, ...), where b is `rows` or 1 (broadcast over the rows)."""
    if dim is None:
        tensor = tensor.expand(seeds, *tensor.shape)
    else:
        tensor = tensor.movedim(dim, 0)
    return tensor.expand(seeds, rows, *tensor.shape[2:]).reshape(seeds * rows, *tensor.shape[2:])


class FoldedAttention(torch.autograd.Function):
    """`sdpa_attend(q, k, v, mask, 0, causal)` whose batching rule folds the seeds into
    the batch. Outside vmap it is `sdpa_attend` itself; its backward recomputes it."""

    @staticmethod
    def forward(q, k, v, mask, causal: bool):
        return sdpa_attend(q, k, v, mask, 0.0, causal)

    @staticmethod
    def setup_context(ctx, inputs, output) -> None:
        q, k, v, mask, causal = inputs
        ctx.save_for_backward(q, k, v, mask)
        ctx.causal = causal

    @staticmethod
    def backward(ctx, grad):
        saved = ctx.saved_tensors
        needs = ctx.needs_input_grad[:4]
        with torch.enable_grad():
            inputs = [None if t is None else t.detach().requires_grad_(need) for t, need in zip(saved, needs)]
            out = sdpa_attend(*inputs, 0.0, ctx.causal)
            wanted = [t for t, need in zip(inputs, needs) if need]
            grads = iter(torch.autograd.grad(out, wanted, grad))
        return (*(next(grads) if need else None for need in needs), None)

    @staticmethod
    def vmap(info, in_dims, q, k, v, mask, causal: bool):
        seeds = info.batch_size
        rows = q.shape[0] if in_dims[0] is None else q.movedim(in_dims[0], 0).shape[1]
        q, k, v = (_folded(t, dim, seeds, rows) for t, dim in zip((q, k, v), in_dims[:3]))
        if mask is not None and (in_dims[3] is not None or mask.shape[0] > 1):
            mask = _folded(mask, in_dims[3], seeds, rows)
        out = sdpa_attend(q, k, v, mask, 0.0, causal)
        return out.view(seeds, rows, *out.shape[1:]), 0


def seed_batch_attend(q, k, v, mask: torch.Tensor | PointwiseBias | None, dropout: float, causal: bool):
    """`sdpa_attend` for a seed batch's forward under vmap (no dropout: a seed batch
    refuses model.dropout > 0)."""
    if dropout:
        raise ValueError("a seed batch has no attention dropout (model.dropout must be 0)")
    return FoldedAttention.apply(q, k, v, dense(mask), causal)
