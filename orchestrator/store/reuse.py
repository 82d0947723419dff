"""Content-addressed trials: one finished under the same results folder, in another
study or another profile, is reused rather than trained again.

A trial's id hashes its whole config (lengthgen.config), so the same id is the same
training run wherever it was asked for. Reusing copies the trial's rows of `train`,
`eval` and `samples` and its artifact files into this study's folder, then its
`trials` row last (its status is what makes the trial finished here), with this
study's `study`, `group_id` and `group_label`, the config columns as this version
writes them, and `reused_from` naming the MLflow experiment it trained in (`<study>` or
`<study>/<profile>`). The driver then makes the trial's run in this study's
experiment from those rows, as it does for any finished trial without one
(mlflow_sync.sync_study), and tags it `reused_from`. So every study folder holds all of
its own rows, and a query over one study, or over all, reads each trial once per study
that asked for it; nothing is trained twice. `lg-study run --no-reuse` trains again.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from lengthgen import TrialConfig
from orchestrator.store.results_store import (
    read_trial_row,
    read_trial_rows,
    read_trial_statuses,
    write_trial_table,
)
from orchestrator.store.science_versions import still_valid
from orchestrator.store.trial_rows import config_columns
from orchestrator.studies.study import Study
from results_contract import groups
from results_contract.experiments import experiment_name
from results_contract.layout import PROFILES, artifact_folder, list_studies, results_roots
from results_contract.trial_status import FINISHED

#: the trials column (and MLflow tag) naming the experiment a reused trial trained in
REUSED_FROM = "reused_from"
ROW_TABLES = ("train", "eval", "samples")


@dataclass(frozen=True)
class Source:
    """A study folder under the same results folder that holds a finished trial."""

    root: Path
    study: str

    @property
    def experiment(self) -> str:
        profile = self.root.name if self.root.parent.name == PROFILES else None
        return experiment_name(self.study, profile)


def finished_elsewhere(root: Path, study: str, configs: list[TrialConfig]) -> dict[str, Source]:
    """trial_id -> the first other study folder (the unprofiled ones first, then each
    profile's; by name) under ``root``'s results folder where the trial of each of
    ``configs`` is finished, with numbers that this science version still gives its
    config (lengthgen.science: a later change may have moved them)."""
    here = (Path(root).resolve(), study)
    found: dict[str, Source] = {}
    for other_root in results_roots(root):
        for name in list_studies(other_root):
            if (other_root, name) == here:
                continue
            statuses = read_trial_statuses(other_root, name)  # its own files and its compacted rows
            for config in configs:
                trial_id = config.trial_id
                if trial_id in found or statuses.get(trial_id) not in FINISHED:
                    continue
                row = read_trial_row(other_root, name, trial_id)
                if row is not None and row["status"] in FINISHED and still_valid(row, config):
                    found[trial_id] = Source(other_root, name)
    return found


def reuse_trials(root: Path, study: Study, sources: dict[str, Source]) -> dict[str, str]:
    """Copy each trial's rows and artifacts from its source into ``study``'s folder under
    ``root``; return trial_id -> the experiment it trained in. A trial whose source is no
    longer finished (restarted meanwhile) is left to train."""
    configs = {config.trial_id: config for config in study.trials}
    reused = {}
    for trial_id, source in sources.items():
        row = read_trial_row(source.root, source.study, trial_id)
        if row is None or row["status"] not in FINISHED or not still_valid(row, configs[trial_id]):
            continue
        for table in ROW_TABLES:
            rows = read_trial_rows(source.root, source.study, table, trial_id)
            if rows:
                write_trial_table(root, study.name, table, trial_id, rows)
        artifacts = artifact_folder(source.root, source.study, trial_id)
        if artifacts.is_dir():
            shutil.copytree(artifacts, artifact_folder(root, study.name, trial_id), dirs_exist_ok=True)
        config = configs[trial_id]
        origin = row.get(REUSED_FROM) or source.experiment  # where it trained, through any chain
        write_trial_table(root, study.name, "trials", trial_id, [{
            **row,
            **config_columns(config),
            "study": study.name,
            "config_json": config.canonical_json(),
            "group_id": groups.group_id(config),
            "group_label": study.group_label(config),
            REUSED_FROM: origin,
        }])
        reused[trial_id] = origin
    return reused
