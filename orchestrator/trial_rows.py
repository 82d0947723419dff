"""Rows of the results tables for one trial, and its descriptive columns.

`trials` carries the key settings under short names (task, pe, weight_seed, ...)
and every other config leaf under its dotted path with "_" for ".", so that any
axis of any study is a column to group by.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from datetime import datetime
from typing import Any

from lengthgen import TrialConfig, TrialResult

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
    "seeds.weight": "weight_seed",
    "seeds.data": "data_seed",
    "seeds.eval": "eval_seed",
}


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
    for path, value in flatten_config(config.to_dict()).items():
        columns[KEY_COLUMNS.get(path, path.replace(".", "_"))] = value
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
) -> dict[str, Any]:
    return {
        "study": study,
        "trial_id": config.trial_id,
        "status": status,
        "config_json": config.canonical_json(),
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
    return {
        "train": [asdict(log) for log in result.train],
        "eval": [{"step": step, **asdict(r)} for step, r in result.eval],
        "samples": [{"step": final_step, **asdict(s)} for s in result.samples],
    }
