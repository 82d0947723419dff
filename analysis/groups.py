"""Configuration groups in Python, for MLflow tags and run names (stdlib only).

A configuration group is the set of trials whose resolved configs are equal except for
the weight and the data seed. views.sql computes the same ``group_id`` in SQL (view
``groups``); a test checks that the two agree.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any


def group_config_json(config: dict[str, Any]) -> str:
    """The canonical JSON of ``config`` with its seeds cut down to the eval seed.

    Canonical as ``TrialConfig.canonical_json``: sorted keys, no spaces. views.sql
    makes the same text by editing config_json's ``"seeds"`` object.
    """
    seeds = config.get("seeds", {})
    kept = {"eval": seeds["eval"]} if "eval" in seeds else {}
    return json.dumps({**config, "seeds": kept}, sort_keys=True, separators=(",", ":"))


def group_id(config: dict[str, Any]) -> str:
    """Short stable hash of the seedless config, like the trial id of a trial."""
    return hashlib.sha256(group_config_json(config).encode()).hexdigest()[:12]


def base_label(config: dict[str, Any]) -> str:
    """task/pe/size/distribution, e.g. ``addition/rope/tiny/uniform_length``.

    views.sql adds the settings that tell apart groups sharing these four; a single
    trial cannot know them, so the MLflow tag carries this part only.
    """
    parts = (
        config.get("task", {}).get("name"),
        config.get("model", {}).get("pe"),
        config.get("model", {}).get("size"),
        config.get("data", {}).get("distribution"),
    )
    return "/".join(str(part) for part in parts if part is not None)


def run_name(config: dict[str, Any]) -> str:
    """What the trial is, e.g. ``rope-tiny-addition-w0-d3`` (pe, size, task, seeds)."""
    seeds = config.get("seeds", {})
    return "-".join(
        [
            str(config.get("model", {}).get("pe")),
            str(config.get("model", {}).get("size")),
            str(config.get("task", {}).get("name")),
            f"w{seeds.get('weight')}",
            f"d{seeds.get('data')}",
        ]
    )
