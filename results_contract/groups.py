"""Configuration groups: their ids, labels and run names (stdlib only).

A configuration group is the set of trials whose configs are equal except for the
weight, the data and the perturb seed. Its id and label are computed here and nowhere else: the
code that writes a trial's `trials` row (orchestrator.store.trial_rows) stores them as the
columns group_id and group_label, and the MLflow tags `group` and `group_label`
(orchestrator.running.tune_runner) are the same two values; analysis/sql/staging/groups.sql selects the columns.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import defaultdict
from collections.abc import Iterable
from typing import Any, Protocol

from results_contract import identity


class TrialConfig(Protocol):
    """What a group needs of lengthgen's TrialConfig (results_contract does not import lengthgen)."""

    def identity_json(self) -> str: ...

    def to_dict(self) -> dict[str, Any]: ...


class StoredConfig:
    """A config as a row stores it (its config_json), for rows whose config no longer
    validates as lengthgen's TrialConfig: its identity is the whole stored config. The
    group id it gives is the one rows without group columns used to get (the stored
    config less its weight and data seeds, hashed), so such trials keep their group."""

    def __init__(self, config_json: str) -> None:
        self._tree = json.loads(config_json)

    def identity_json(self) -> str:
        return json.dumps(self._tree, sort_keys=True, separators=(",", ":"))

    def to_dict(self) -> dict[str, Any]:
        return self._tree


#: the settings a label starts with, e.g. ``addition/rope/tiny/uniform_length``
BASE_LABEL = ("task.name", "model.pe", "model.size", "data.distribution")


def group_identity_json(config: TrialConfig) -> str:
    """The trial's identity (``TrialConfig.identity_json``: the fields that differ from
    their defaults) less its weight and data seeds. Built from the identity, as the trial
    id is, so that a config field added later at its default leaves every group id as
    it leaves every trial id; a trial whose weight and data seeds are both at their
    default (0) therefore has ``group_id == trial_id``."""
    # the seeds a group's trials differ by (results_contract.identity: weight, data and
    # perturb; the eval seed is part of the group)
    apart = identity.seeds_apart()
    trial = json.loads(config.identity_json())
    seeds = {k: v for k, v in trial.pop("seeds", {}).items() if k not in apart}
    if seeds:
        trial["seeds"] = seeds
    return json.dumps(trial, sort_keys=True, separators=(",", ":"))


def group_id(config: TrialConfig) -> str:
    """Short stable hash of `group_identity_json`, like the trial id of a trial."""
    return hashlib.sha256(group_identity_json(config).encode()).hexdigest()[:12]


def base_label(config: dict[str, Any]) -> str:
    """task/pe/size/distribution, e.g. ``addition/rope/tiny/uniform_length``."""
    parts = (_at(config, path) for path in BASE_LABEL)
    return "/".join(str(part) for part in parts if part is not None)


def group_labels(configs: Iterable[TrialConfig], shown: Iterable[str] = (),
                 base: TrialConfig | None = None) -> dict[str, str]:
    """group_id -> label for the groups of ``configs`` (a study's trials): the base
    label, then as ``path=value`` in path order every setting whose value differs
    between groups that share the base label, and every setting in which the group
    departs from the study's ``base`` config (what its axes changed, even where all its
    peers changed it alike), e.g. ``successor/learned/tiny/uniform_length
    model.attention_bias=none model.max_positions=32 model.positions=coupled``. The settings in ``shown``
    (a search's searched fields) are named in every label. Seeds apart from the eval
    seed are never named: they are what the trials of one group differ by. Two groups
    never share a label: they differ in a setting, which at least one of them names.
    """
    settings: dict[str, dict[str, str]] = {}
    bases: dict[str, str] = {}
    for config in configs:
        gid = group_id(config)
        if gid not in settings:
            tree = config.to_dict()
            settings[gid], bases[gid] = _settings(tree), base_label(tree)
    departing = _peer_differences(settings, bases)
    if base is not None:
        departures = _departures(settings, base)
        departing = {gid: named | departures[gid] for gid, named in departing.items()}
    labels = {}
    for gid, named in departing.items():
        paths = sorted((named | set(shown)) - set(BASE_LABEL))
        labels[gid] = " ".join([bases[gid], *(f"{p}={settings[gid][p]}" for p in paths if p in settings[gid])])
    return labels


def _settings(tree: dict[str, Any]) -> dict[str, str]:
    return {path: value for path, value in _leaves(tree).items() if path not in {f"seeds.{s}" for s in identity.seeds_apart()}}


def _departures(settings: dict[str, dict[str, str]], base: TrialConfig) -> dict[str, set[str]]:
    """Per group, the settings whose value is not the base config's."""
    reference = _settings(base.to_dict())
    return {gid: {p for p, v in mine.items() if reference.get(p) != v} for gid, mine in settings.items()}


def _peer_differences(settings: dict[str, dict[str, str]], bases: dict[str, str]) -> dict[str, set[str]]:
    """Per group, the settings that differ between the groups sharing its base label."""
    peers: dict[str, list[str]] = defaultdict(list)
    for gid, label in bases.items():
        peers[label].append(gid)
    named = {}
    for gids in peers.values():
        paths = set().union(*(settings[g] for g in gids))
        differing = {p for p in paths if len({settings[g].get(p) for g in gids}) > 1}
        named.update({gid: differing for gid in gids})
    return named


#: what joins the settings of a short label, e.g. ``nope · windowed``
SHORT_SEPARATOR = " · "
_NAMED = re.compile(r"(\S+?)=(.*?)(?= \S+?=|$)")


def label_settings(label: str) -> dict[str, str]:
    """The settings a full group label names: its base's parts (BASE_LABEL's paths) and its
    ``path=value`` settings, e.g. ``{"model.pe": "nope", "model.attention_bias": "windowed", ...}``."""
    base, _, named = label.partition(" ")
    parts = base.split("/")
    settings = dict(zip(BASE_LABEL, parts)) if len(parts) == len(BASE_LABEL) else {"base": base}
    settings.update(dict(_NAMED.findall(named)))
    return settings


def short_labels(labels: Iterable[str]) -> dict[str, str]:
    """Full group label -> short label for the groups shown together (a study's): only the
    settings that tell these groups apart, their values joined by `SHORT_SEPARATOR`, e.g.
    ``nope · windowed``. Built from the full labels alone (every trials row stores its own),
    so the report, the run table and the MLflow run names give a group the same short label
    from the same groups.

    Of the settings whose value differs between the groups, as few are kept as keep every
    label distinct and none empty: settings are dropped while that holds, numbers and other
    non-text values first (``max_positions=32`` beside ``coupled``), then the base's parts
    (task, pe, size, distribution), then the rest, each in path order; the base's parts are
    shown first. A setting a label does not name is at the study's common value and shows
    nothing. Text values show as they are, others as ``name=value``. One group: its base
    label."""
    labels = list(dict.fromkeys(labels))
    settings = {label: label_settings(label) for label in labels}
    paths = sorted({p for s in settings.values() for p in s})
    differing = [p for p in paths if len({s.get(p) for s in settings.values()}) > 1]
    if not differing:
        return {label: label.partition(" ")[0] for label in labels}
    kept = list(differing)
    for path in sorted(differing, key=lambda p: (_is_text(settings, p), p not in BASE_LABEL, p)):
        trial = [p for p in kept if p != path]
        if _tells_apart(settings, trial):
            kept = trial
    kept.sort(key=lambda p: (BASE_LABEL.index(p) if p in BASE_LABEL else len(BASE_LABEL), p))
    names = {p: _short_name(p, kept) for p in kept}
    return {label: SHORT_SEPARATOR.join(_shown(names[p], s[p]) for p in kept if p in s)
            for label, s in settings.items()}


def _tells_apart(settings: dict[str, dict[str, str]], paths: list[str]) -> bool:
    keys = [tuple(s.get(p) for p in paths) for s in settings.values()]
    return len(set(keys)) == len(keys) and all(any(v is not None for v in key) for key in keys)


def _is_text(settings: dict[str, dict[str, str]], path: str) -> bool:
    """Whether every value of ``path`` is text (a label writes other values as JSON)."""
    values = [s[path] for s in settings.values() if path in s]
    return all(not _is_json(v) for v in values)


def _is_json(value: str) -> bool:
    try:
        return not isinstance(json.loads(value), str)
    except ValueError:
        return False


def _short_name(path: str, kept: list[str]) -> str:
    """The path's last part, or the whole path where two kept paths end alike."""
    leaf = path.rsplit(".", 1)[-1]
    return leaf if sum(p.rsplit(".", 1)[-1] == leaf for p in kept) == 1 else path


def _shown(name: str, value: str) -> str:
    return f"{name}={value}" if _is_json(value) else value


def run_name(config: dict[str, Any], short_label: str | None = None) -> str:
    """What the trial is: its group's short label (`short_labels`, where the study's other
    groups are known) and its seeds, e.g. ``nope · windowed · w0 d3``; without one, pe,
    size, task and seeds, e.g. ``rope-tiny-addition-w0-d3``."""
    seeds = config.get("seeds", {})
    if short_label is not None:
        perturb = f" p{seeds['perturb']}" if seeds.get("perturb") else ""
        return f"{short_label}{SHORT_SEPARATOR}w{seeds.get('weight')} d{seeds.get('data')}{perturb}"
    return "-".join(
        [
            str(config.get("model", {}).get("pe")),
            str(config.get("model", {}).get("size")),
            str(config.get("task", {}).get("name")),
            f"w{seeds.get('weight')}",
            f"d{seeds.get('data')}",
            # a numerical replicate only: unperturbed trials keep the names they had
            *([f"p{seeds['perturb']}"] if seeds.get("perturb") else []),
        ]
    )


def _at(config: dict[str, Any], path: str) -> Any:
    node: Any = config
    for part in path.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return node


def _leaves(tree: dict[str, Any], prefix: str = "") -> dict[str, str]:
    """Dotted path -> value as a label shows it: text as is, anything else (numbers,
    booleans, whole lists) as compact JSON."""
    found: dict[str, str] = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            found.update(_leaves(value, f"{prefix}{key}."))
        else:
            found[f"{prefix}{key}"] = (
                value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
            )
    return found
