"""lengthgen: the science of lg-study (tasks, formats, distributions, models, training,
evaluation). Imports torch and numpy only; usable without Ray or MLflow.

The names below are loaded on first use (PEP 562), so that importing one small
module (`lengthgen.digits`, `lengthgen.tasks`) does not load the model and the trainer.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lengthgen.config import TrialConfig
    from lengthgen.training import Report, TrialResult, train

#: exported name -> the module that defines it
_EXPORTS = {
    "Report": "lengthgen.training",
    "TrialConfig": "lengthgen.config",
    "TrialResult": "lengthgen.training",
    "train": "lengthgen.training",
}

__all__ = ["Report", "TrialConfig", "TrialResult", "train"]


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'lengthgen' has no attribute {name!r}")
    return getattr(import_module(_EXPORTS[name]), name)


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
