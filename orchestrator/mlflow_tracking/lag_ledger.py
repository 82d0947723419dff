"""How far a study's MLflow runs lag its rows, kept in the study's folder so that
`lg-study status` can say it without asking MLflow (which may be the thing that is down),
and so that the next run knows what it still owes MLflow.

The driver's MLflow syncer (orchestrator.mlflow_tracking.syncer) writes it while runs
lag (``<root>/<study>/_mlflow_lag.json``) and deletes it once they caught up. Standard
library only: `status` reads it without importing MLflow.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from results_contract.layout import MLFLOW_LAG


@dataclass
class Lag:
    """What a study's MLflow runs miss of its rows."""

    #: the tracking URI the runs belong to
    tracking_uri: str
    #: the trials whose rows are not all in their MLflow runs yet
    trials: list[str] = field(default_factory=list)
    #: study-wide MLflow writes still owed, in order: [job name, its arguments, "before"
    #: or "after" the trials' syncs] (orchestrator.mlflow_tracking.syncer.JOBS)
    jobs: list[list] = field(default_factory=list)
    #: since when the server has failed every call (ISO 8601, UTC), "" while it answers
    down_since: str = ""
    #: why its last call failed, in a few words
    reason: str = ""

    @property
    def behind(self) -> bool:
        return bool(self.trials or self.jobs)


def lag_path(root: Path, study: str) -> Path:
    return Path(root) / study / MLFLOW_LAG


def read_lag(root: Path, study: str) -> Lag | None:
    """The study's lag as its driver last wrote it, or None (caught up, or never behind).
    A file that cannot be read counts as none: the next run's start-up sync compares
    every run with its rows anyway (mlflow_sync.sync_study)."""
    try:
        data = json.loads(lag_path(root, study).read_text())
        return Lag(**data)
    except (OSError, ValueError, TypeError):
        return None


def write_lag(root: Path, study: str, lag: Lag) -> None:
    """Write ``lag`` (temporary name, then rename), or remove the file when nothing lags.
    Best effort: a disk too full for this small file is told by the rows' own writes."""
    path = lag_path(root, study)
    with contextlib.suppress(OSError):
        if not lag.behind:
            path.unlink(missing_ok=True)
            return
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(asdict(lag), indent=1))
        os.replace(tmp, path)
