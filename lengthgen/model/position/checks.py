"""Whether a forward checks its position indices itself (a host read of the data) or
its caller checked them before it (`Architecture.check_positions`): a compiled forward
cannot read the data without a graph break, and a forward vectorised over a seed batch
(lengthgen.seed_batch) cannot read it at all."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

import torch

_CHECKED_BEFORE: contextvars.ContextVar[bool] = contextvars.ContextVar("positions_checked_before", default=False)


def checks_inside() -> bool:
    """Whether the forward running now checks its indices itself."""
    return not torch.compiler.is_compiling() and not _CHECKED_BEFORE.get()


@contextlib.contextmanager
def checked_before() -> Iterator[None]:
    """Within the block, forwards leave the checks to their caller, who made them."""
    token = _CHECKED_BEFORE.set(True)
    try:
        yield
    finally:
        _CHECKED_BEFORE.reset(token)
