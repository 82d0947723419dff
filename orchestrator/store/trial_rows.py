"""Rows of the results tables for one trial, and its descriptive columns.

`trials` carries the trial's configuration group (group_id, group_label: results_contract.groups),
the key settings under short names (task, pe, weight_seed, ...) and every other config
leaf under its dotted path with "_" for ".", so that any axis of any study is a column
to group by.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import asdict
from datetime import datetime
from pathlib import Path
from typing import Any

from lengthgen import TrialConfig, TrialResult
from lengthgen.science import SCIENCE_VERSION
from orchestrator.store.results_store import (
    EVAL_SCHEMA,
    TRAIN_SCHEMA,
    read_table_rows,
    read_trial_row,
    write_trial_table,
)
from orchestrator.studies.config_paths import TRIAL_CONFIG
from results_contract import groups, identity
from results_contract.layout import check_path_component

KEY_COLUMNS = {
    "task.name": "task",
    "task.train_digits": "train_digits",
    "format.reverse": "reverse",
    "data.distribution": "distribution",
    "model.arch": "arch",
    "model.size": "size",
    "model.pe": "pe",
    "model.positions": "positions",
    "train.lr": "lr",
    "train.steps": "steps",
    "train.batch_size": "batch_size",
}  # and the seeds': results_contract.identity.seed_columns (seeds.weight -> weight_seed, ...)


def flatten_config(config: dict[str, Any], prefix: str = "") -> dict[str, object]:
    """Nested dict -> dotted keys (``model.pe``); lists become JSON strings."""
    flat: dict[str, object] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(flatten_config(value, f"{name}."))
        elif isinstance(value, (list, tuple)):
            flat[name] = json.dumps(list(value))
        else:
            flat[name] = value
    return flat


def config_columns(config: TrialConfig) -> dict[str, Any]:
    columns: dict[str, Any] = {}
    named = {**KEY_COLUMNS, **identity.seed_columns()}
    for path, value in flatten_config(config.to_dict()).items():
        columns[named.get(path, path.replace(".", "_"))] = value
    # the training range as two integers, so SQL can compare test lengths with it
    columns["train_min_digits"], columns["train_max_digits"] = config.task.train_digits
    return columns


def trials_row(
    study: str,
    config: TrialConfig,
    status: str,
    device: str,
    started_at: datetime,
    finished_at: datetime | None = None,
    n_params: int | None = None,
    error: str | None = None,
    group_label: str | None = None,
) -> dict[str, Any]:
    """The trial's row of `trials`. ``group_label`` names what sets the trial's group
    apart within its study (results_contract.groups.group_labels over the study's trials); a
    trial written outside a study gets its base label."""
    return {
        "study": study,
        "trial_id": config.trial_id,
        "status": status,
        "config_json": config.canonical_json(),
        "group_id": groups.group_id(config),
        "group_label": group_label or groups.base_label(config.to_dict()),
        # which science made its numbers (lengthgen.science): checked by run and reuse
        "science_version": SCIENCE_VERSION,
        **config_columns(config),
        "n_params": n_params,
        "device": device,
        "started_at": started_at,
        "finished_at": finished_at,
        "wall_s": (finished_at - started_at).total_seconds() if finished_at else None,
        "error": error,
    }


def result_rows(result: TrialResult) -> dict[str, list[dict[str, Any]]]:
    """The train, eval and samples rows of a finished (or diverged) trial."""
    final_step = max((step for step, _ in result.eval), default=result.steps)
    long_loss = dict(result.long_loss)
    return {
        "train": [asdict(log) for log in result.train],
        "eval": [{"step": step, **asdict(r), "long_loss": long_loss.get(step)} for step, r in result.eval]
        + [{"step": final_step, "digits": max(g.first, g.second), "n": g.n, "correct": g.correct,
            "accuracy": g.accuracy, "in_distribution": g.in_distribution, "first_digits": g.first,
            "second_digits": g.second}
           for g in result.grid],
        "samples": [{"step": final_step, **asdict(s)} for s in result.samples],
    }


def history_rows(history: dict[str, list]) -> dict[str, list[dict[str, Any]]]:
    """The train and eval rows of a trainer's history (the `history` of a lengthgen
    checkpoint: TrainLog dicts, (step, LengthResult dict) pairs and (step, long-length
    validation loss) pairs)."""
    long_loss = dict(history.get("long_loss", []))
    return {
        "train": [dict(log) for log in history["train"]],
        "eval": [{"step": step, **result, "long_loss": long_loss.get(step)} for step, result in history["eval"]],
    }


def rows_history(train: list[dict[str, Any]], eval: list[dict[str, Any]], step: int) -> dict[str, list]:
    """The trainer's history from a trial's train and eval rows, up to ``step``
    (history_rows reversed)."""
    train_columns = [c for c in TRAIN_SCHEMA.names if c != "trial_id"]
    eval_columns = [c for c in EVAL_SCHEMA.names
                    if c not in ("trial_id", "step", "long_loss", "first_digits", "second_digits")]
    kept = [row for row in eval if row["step"] <= step and row.get("first_digits") is None]  # no grid cells
    return {
        "train": [{c: row[c] for c in train_columns} for row in train if row["step"] <= step],
        "eval": [(row["step"], {c: row[c] for c in eval_columns}) for row in kept],
        "long_loss": sorted({(row["step"], row["long_loss"]) for row in kept if row.get("long_loss") is not None}),
    }


def add_group_columns(root: Path, study: str,
                      label: Callable[[TrialConfig], str] | None = None) -> dict[str, dict[str, str]]:
    """Give the trials rows written before the group columns existed (no group_id)
    their group_id and ``label(config)``, and rows labelled by an older rule
    (results_contract.groups.group_labels) today's label; return trial_id -> the columns set.
    Without ``label`` (`lg-study migrate` without a study file), groups are labelled
    among the study's stored configs.

    Run by the driver under the study lock before it writes anything more into the
    study, and by `lg-study migrate`, so that one study never mixes rows with and
    without the columns (analysis.query refuses to read such a study), nor one group's
    rows two labels. A row without the columns whose config_json no longer validates,
    or no longer gives its trial id, gets the group of its stored config
    (results_contract.groups.StoredConfig: the id such rows always had), labelled among those
    rows.
    """
    check_path_component(study, "study")
    rows = _stored_rows(root, study)
    configs = {trial_id: _config_of(row) for trial_id, (row, _) in rows.items()}
    if label is None:
        labels = groups.group_labels([c for c in configs.values() if c is not None])
        label = functools.partial(_label_of, labels)
    added = {}
    for trial_id, (row, has_columns) in rows.items():
        config = configs[trial_id]
        if config is None:
            continue
        columns = {"group_id": groups.group_id(config), "group_label": label(config)}
        if not has_columns or row["group_label"] != columns["group_label"]:
            added[trial_id] = columns
    unreadable = {t: groups.StoredConfig(row["config_json"]) for t, (row, has_columns) in rows.items()
                  if configs[t] is None and not has_columns}
    stored_labels = groups.group_labels(unreadable.values())
    for trial_id, stored in unreadable.items():
        gid = groups.group_id(stored)
        added[trial_id] = {"group_id": gid, "group_label": stored_labels[gid]}
    for trial_id, columns in added.items():
        write_trial_table(root, study, "trials", trial_id, [{**read_trial_row(root, study, trial_id), **columns}])
    return added


def _label_of(labels: dict[str, str], config: TrialConfig) -> str:
    return labels[groups.group_id(config)]


def _stored_rows(root: Path, study: str) -> dict[str, tuple[dict[str, Any], bool]]:
    """trial_id -> (its trials row, whether the row has the group columns); damaged
    files are left out (the run does their trial again and writes a new row)."""
    return {row["trial_id"]: (row, row.get("group_id") is not None) for row in read_table_rows(root, study, "trials")}


def _config_of(row: dict[str, Any] | None) -> TrialConfig | None:
    """The row's config, if it still validates and still gives the row's trial id."""
    if row is None:
        return None
    try:  # pydantic's ValidationError is a ValueError
        config = TRIAL_CONFIG.validate_python(json.loads(row["config_json"]))
    except ValueError:
        return None
    return config if config.trial_id == row["trial_id"] else None
