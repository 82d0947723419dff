"""Task registry: the names a study file may use for `task.name`."""

from lengthgen.tasks.addition import Addition
from lengthgen.tasks.base import Task
from lengthgen.tasks.successor import Successor

TASKS: dict[str, type[Task]] = {task.name: task for task in (Addition, Successor)}

__all__ = ["TASKS", "Task"]
