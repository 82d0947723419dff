"""lengthgen: the science of lg-study (tasks, formats, distributions, models, training,
evaluation). Imports torch and numpy only; usable without Ray or MLflow."""

from lengthgen.config import TrialConfig
from lengthgen.training import Report, TrialResult, train

__all__ = ["Report", "TrialConfig", "TrialResult", "train"]
