"""Task registry: the names a study file may use for `task.name`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lengthgen.tasks.addition import Addition
from lengthgen.tasks.base import Operands, Task
from lengthgen.tasks.multiplication import Multiplication, NBy1
from lengthgen.tasks.parity import Parity
from lengthgen.tasks.successor import Successor

if TYPE_CHECKING:
    from lengthgen.config import TaskConfig

TASKS: dict[str, type[Task]] = {
    task.name: task for task in (Addition, Successor, Parity, NBy1, Multiplication)
}


def build_task(cfg: TaskConfig) -> Task:
    """The task of `cfg`, with its options (e.g. multiplication's multiplier_digits)."""
    return TASKS[cfg.name].from_config(cfg)


__all__ = ["TASKS", "Operands", "Task", "build_task"]
