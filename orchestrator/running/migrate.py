"""`lg-study migrate`: results that an earlier lg-study wrote, brought up to date.

Group columns. Trials rows written before each row stored its configuration group
(issue 13) get group_id and group_label, as the next `lg-study run` of their study
would give them (orchestrator.store.trial_rows.add_group_columns), and their MLflow runs the
same tags; analysis.query refuses to read a study until then.

A profile's trials out of the unprofiled folder.

Before profiles were kept apart, `lg-study run --profile P` wrote its trials into
``<results>/<study>/`` and MLflow experiment ``<study>``, beside the unprofiled run's.
Migrating moves the trials of P's design found there (every status, with their
checkpoints and artifacts, so an interrupted trial still resumes) into P's own root
(results_contract.layout.profile_root) and deletes their runs from experiment ``<study>``; the
next `lg-study run --profile P` makes their runs in experiment ``<study>/<P>`` from the
moved rows, as it does for any finished trial without a run, and trains only what was
unfinished. A trial of both designs is copied, not moved. A trial the profile's root
already holds finished stays as it is there.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from orchestrator.mlflow_tracking.mlflow_store import SerializedClient
from orchestrator.mlflow_tracking.tracking import StudyTracker
from orchestrator.running.seed_answers import planned_trials
from orchestrator.store.compaction import extract_trials
from orchestrator.store.results_store import read_trial_statuses
from orchestrator.store.study_locks import study_lock
from orchestrator.store.trial_rows import add_group_columns
from orchestrator.studies.study import Study, StudyError
from results_contract.layout import (
    TABLES,
    artifact_folder,
    checkpoint_path,
    list_studies,
    results_roots,
    table_path,
)
from results_contract.trial_status import FINISHED


@dataclass
class Migrated:
    #: trial ids moved into the profile's root
    moved: list[str] = field(default_factory=list)
    #: in the unprofiled design too: copied, and kept in the unprofiled folder
    copied: list[str] = field(default_factory=list)
    #: already finished in the profile's root: only removed from the unprofiled folder
    dropped: list[str] = field(default_factory=list)
    #: MLflow runs deleted from the unprofiled experiment
    deleted_runs: int = 0


def migrate_group_columns(results: Path, tracking_uri: str, study: Study | None = None) -> dict[str, int]:
    """Add the group columns to the rows that lack them in every study under
    ``results`` and its profiles' roots; return "<root>/<study>" -> rows upgraded. The
    rows of ``study`` (when given) get its labels, others labels among their study's
    configs. Raises StudyBusy while a study is being run."""
    upgraded = {}
    roots = results_roots(results)
    for root in roots:
        for name in list_studies(root):
            # a profile's design differs from the study file's: its rows are labelled among themselves
            label = study.group_label if study is not None and (root, name) == (roots[0], study.name) else None
            with study_lock(root, name):
                added = add_group_columns(root, name, label)
            if added:
                _retag(tracking_uri, _experiment(root, name), added)
                upgraded[str(root / name)] = len(added)
    return upgraded


def _experiment(root: Path, study: str) -> str:
    """The MLflow experiment of a study folder: its name, or <study>/<profile>."""
    profiles = results_roots(root)[1:]
    return f"{study}/{root.name}" if Path(root).resolve() in profiles else study


def _retag(tracking_uri: str, experiment: str, added: dict[str, dict[str, str]]) -> None:
    """The runs' tags `group` and `group_label` become the rows' columns, as a run does;
    an experiment that does not exist is not made."""
    if SerializedClient(tracking_uri).get_experiment_by_name(experiment) is None:
        return
    StudyTracker(tracking_uri, experiment).tag_trial_runs(
        {trial_id: {"group": columns["group_id"], "group_label": columns["group_label"]}
         for trial_id, columns in added.items()})


def design(study: Study, results_root: Path) -> set[str]:
    """The trial ids of a grid study's design (with a `seeds.until` target: the seeds
    planned so far by the rows under ``results_root``)."""
    if study.spec.search is not None:
        raise StudyError(study.file, "--profile", "a search keeps its points in optuna.db and cannot "
                         "be migrated; run the profile again (its finished trials are reused)")
    if study.spec.seeds.until is not None:
        return {t.trial_id for t in planned_trials(study, results_root)}
    return {t.trial_id for t in study.trials}


def migrate_profile(profiled: Study, unprofiled: Study, results: Path, tracking_uri: str) -> Migrated:
    """Move ``profiled``'s trials from ``results``'s unprofiled folder of the study into
    the profile's root; raises StudyBusy while either is being run."""
    results = Path(results).resolve()
    target = profiled.results_root(results)
    name = profiled.name
    done = Migrated()
    with study_lock(results, name), study_lock(target, name):
        written = read_trial_statuses(results, name)
        wanted = sorted(design(profiled, results) & set(written))
        shared = design(unprofiled, results)
        there = read_trial_statuses(target, name)
        # the trials that move leave the compacted files first: their rows are then
        # their own files, which move (or go) whole
        extract_trials(results, name, wanted)
        for trial_id in wanted:
            keep = trial_id in shared
            if there.get(trial_id) in FINISHED:
                if not keep:
                    _remove(results, name, trial_id)
                    done.dropped.append(trial_id)
                continue
            _transfer(results, target, name, trial_id, keep)
            (done.copied if keep else done.moved).append(trial_id)
        gone = set(done.moved) | set(done.dropped)
        if gone:
            tracker = StudyTracker(tracking_uri, unprofiled.experiment)
            for trial_id, runs in tracker.runs_by_trial().items():
                for run in runs if trial_id in gone else []:
                    tracker.client.delete_run(run["run_id"])
                    done.deleted_runs += 1
    return done


def _paths(root: Path, study: str, trial_id: str) -> list[Path]:
    """Everything of one trial under a study folder: its checkpoint, artifact folder and
    table partitions, `trials` last (its status is what says the trial is there)."""
    partitions = [table_path(root, study, table, trial_id).parent for table in (*TABLES[1:], TABLES[0])]
    return [checkpoint_path(root, study, trial_id), artifact_folder(root, study, trial_id), *partitions]


def _transfer(source: Path, target: Path, study: str, trial_id: str, keep: bool) -> None:
    for old, new in zip(_paths(source, study, trial_id), _paths(target, study, trial_id), strict=True):
        if not old.exists():
            continue
        new.parent.mkdir(parents=True, exist_ok=True)
        if new.is_dir():
            shutil.rmtree(new)  # an unfinished attempt of the profile's own, replaced
        if keep:
            (shutil.copytree if old.is_dir() else shutil.copy2)(old, new)
        else:
            os.replace(old, new)


def _remove(root: Path, study: str, trial_id: str) -> None:
    for path in _paths(root, study, trial_id):
        if path.is_dir():
            shutil.rmtree(path)
        else:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
