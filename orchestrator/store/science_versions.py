"""Finished trials of another science version: found, refused, or set aside and retrained.

A trial id names a config, and lengthgen's science version (lengthgen.science) names
the code's numbers for it; a finished trial counts as finished only while no science
change since the version that trained it touches its config (`changes_since`). Before
training, `run` looks for the design's trials that finished under a version whose
numbers a later change moved (or before versions were recorded: no `science_version`
in the row). It refuses to go on, naming them, unless asked to retrain them
(`run --retrain-stale`): then each one's files move to
``<study>/_superseded/science-<version>/`` (readable there with the same layout, out of
the views' globs), its MLflow run is re-tagged ``trial_id=<id>@science-<version>`` (kept,
no longer the trial's run), and the trial trains again. Nothing is deleted. Reuse
across studies and resuming a checkpoint follow the same rule.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from lengthgen import TrialConfig
from lengthgen.science import SCIENCE_VERSION, changes_since
from orchestrator.store.results_store import read_trial_row
from results_contract.layout import (
    ARTIFACTS,
    PARTITION_KEY,
    SUPERSEDED,
    TABLES,
    artifact_folder,
    checkpoint_path,
    table_path,
)
from results_contract.trial_status import FINISHED


def version_name(version: int | None) -> str:
    return "none (written before lg-study versioned its science)" if version is None else str(version)


def _version_tag(version: int | None) -> str:
    """The version in a folder or tag name: `science-<version>`, `science-none`."""
    return f"science-{'none' if version is None else version}"


def trial_version(row: dict | None) -> int | None:
    return None if row is None else row.get("science_version")


def still_valid(row: dict | None, config: TrialConfig) -> bool:
    """Whether the numbers of a trial's row still are its config's under this science."""
    return row is not None and not changes_since(trial_version(row), config)


def stale_trials(
    root: Path, study: str, configs: list[TrialConfig], statuses: dict[str, str]
) -> dict[str, int | None]:
    """trial_id -> the science version of each of ``configs`` that finished in ``study``
    under a version whose numbers a later change moved (None: before versions existed)."""
    stale = {}
    for config in configs:
        if statuses.get(config.trial_id) not in FINISHED:
            continue
        row = read_trial_row(root, study, config.trial_id)
        if row is not None and not still_valid(row, config):
            stale[config.trial_id] = trial_version(row)
    return stale


class StaleScience(ValueError):
    """Finished trials of another science version, and no --retrain-stale."""

    def __init__(self, study: str, stale: dict[str, int | None]) -> None:
        versions = sorted({version_name(v) for v in stale.values()})
        shown = ", ".join(sorted(stale)[:10]) + (f" and {len(stale) - 10} more" if len(stale) > 10 else "")
        super().__init__(
            f"{len(stale)} finished trial(s) of study {study} were trained under science version "
            f"{' and '.join(versions)}, and this lg-study's science (version {SCIENCE_VERSION}) gives "
            f"their configs other numbers (lengthgen/science.py says what changed), so they would "
            f"not be comparable with new trials: {shown}. Run again with --retrain-stale to "
            f"retrain them (their old rows move to {study}/{SUPERSEDED}/, their MLflow runs are "
            f"kept under a new trial_id tag), or with --results ELSEWHERE to leave this study as it is"
        )


def superseded_folder(root: Path, study: str, version: int | None) -> Path:
    return Path(root) / study / SUPERSEDED / _version_tag(version)


def set_aside(root: Path, study: str, trial_id: str, version: int | None) -> Path:
    """Move the trial's rows, artifacts and checkpoint under ``superseded_folder`` (same
    layout inside), so the trial can train again; returns that folder. Call it under the
    study's lock."""
    folder = superseded_folder(root, study, version)
    moves = [(table_path(root, study, table, trial_id).parent, folder / table / f"{PARTITION_KEY}={trial_id}")
             for table in TABLES]
    moves.append((artifact_folder(root, study, trial_id), folder / ARTIFACTS / trial_id))
    checkpoint = checkpoint_path(root, study, trial_id)
    moves.append((checkpoint, folder / checkpoint.parent.name / checkpoint.name))
    # the trials row last: until it moves, the trial still reads as finished, never as
    # finished with half its rows gone
    moves.append(moves.pop(0))
    for source, target in moves:
        if source.exists():
            if target.exists():
                shutil.rmtree(target) if target.is_dir() else target.unlink()
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(source), str(target))
    return folder


def superseded_run_tags(trial_id: str, version: int | None) -> dict[str, str]:
    """The tags that take a trial's MLflow run off the trial (tracking finds a trial's
    run by its `trial_id` tag) while keeping it in the experiment."""
    return {"trial_id": f"{trial_id}@{_version_tag(version)}", "superseded_by_science_version": str(SCIENCE_VERSION)}
