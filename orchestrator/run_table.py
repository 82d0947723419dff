"""The table `lg-study run` prints at the end: this run's trials by configuration group.

A study's axes say what varies; the table names them as its leading columns, one
section per configuration group (trials equal but for their seeds), one row per seed
pair, one column per test length. Only the trials of the run's own grid (its profile
included) are shown, so trials of another profile in the same results folder never
mix in. Lengths longer than the training range carry their ratio to its longest
length, the question the table answers: does the model still work at 2x?
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

import pyarrow as pa
from rich.table import Table

#: axes that tell trials of one configuration group apart
SEED_AXES = {"seeds.weight": "w", "seeds.data": "d", "seeds.perturb": "p"}


def axis_label(value: Any) -> str:
    """An axis value as a short cell: a block axis {pe: nope, window: 1} reads
    "nope, window=1" (the value alone for the key that names the variant)."""
    if not isinstance(value, dict):
        return _scalar(value)
    return ", ".join(_scalar(v) if key in _NAME_KEYS else f"{key}={_scalar(v)}" for key, v in value.items())


#: keys whose value is itself a name (an encoding, a task), shown without the key
_NAME_KEYS = {"pe", "name", "arch", "distribution", "size"}


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (list, tuple)):
        return "-".join(str(v) for v in value)
    return str(value)


def _cell(value: float | None) -> str:
    if value is None:
        return "-"
    return "nan" if math.isnan(value) else f"{value:.3f}"


def run_table(study, rows: pa.Table) -> Table:
    """`rows`: analysis/run_table.sql over the study's results; `study`: the loaded
    study (orchestrator.study.Study) whose grid ran."""
    by_trial: dict[str, dict[int, float | None]] = defaultdict(dict)
    status: dict[str, str] = {}
    out_of_range: dict[int, set[bool]] = defaultdict(set)
    for r in rows.to_pylist():
        status[r["trial_id"]] = r["status"]
        if r["digits"] is not None:
            by_trial[r["trial_id"]][r["digits"]] = r["accuracy"]
            out_of_range[r["digits"]].add(not r["in_distribution"])
    group_axes = [key for key in (study.axis_values[0] if study.axis_values else {}) if key not in SEED_AXES]
    seed_axes = [key for key in SEED_AXES if study.axis_values and key in study.axis_values[0]]
    longest = {config.task.train_digits[1] for config in study.trials}
    lengths = sorted(out_of_range)

    title = f"{study.name}{f' (profile {study.profile})' if study.profile else ''}: exact-match accuracy by test length"
    # as wide as its title, so that a narrow table never wraps it
    table = Table(title=title, caption=_caption(study, longest, out_of_range), min_width=len(title))
    # numbers are never cut: in a narrow terminal (or a pipe, 80 columns) the long
    # group labels fold onto more lines instead
    for key in group_axes:
        table.add_column(key, overflow="fold")
    if seed_axes:
        table.add_column("seeds", no_wrap=True)
    for n in lengths:
        header = _length_header(n, out_of_range[n], longest)
        table.add_column(header, justify="right", no_wrap=True, min_width=max(len(header), 5))
    table.add_column("status", no_wrap=True)

    groups: dict[tuple, list[tuple[str, dict]]] = defaultdict(list)
    for config, values in zip(study.trials, study.axis_values, strict=True):
        groups[tuple(axis_label(values[k]) for k in group_axes)].append((config.trial_id, values))
    for number, (group, members) in enumerate(groups.items()):
        for index, (trial_id, values) in enumerate(members):
            seeds = " ".join(f"{SEED_AXES[k]}{values[k]}" for k in seed_axes)
            accuracies = by_trial.get(trial_id, {})
            table.add_row(
                *(group if index == 0 else ("",) * len(group)),
                *((seeds,) if seed_axes else ()),
                *(_cell(accuracies.get(n)) if n in accuracies else "" for n in lengths),
                status.get(trial_id, "not run"),
                end_section=index == len(members) - 1 and number < len(groups) - 1,
            )
    return table


def _length_header(n: int, flags: set[bool], longest: set[int]) -> str:
    if flags == {True}:
        return f"{n} ({n / next(iter(longest)):.1f}x)" if len(longest) == 1 else f"{n}*"
    return str(n) if flags == {False} else f"{n}?"


def _caption(study, longest: set[int], out_of_range: dict[int, set[bool]]) -> str:
    trained = sorted({tuple(config.task.train_digits) for config in study.trials})
    ranges = ", ".join(f"{low}-{high}" for low, high in trained)
    parts = [f"trained on {ranges} digits; a length marked (Nx) is N times the longest trained"
             if len(longest) == 1 else f"trained on {ranges} digits (by group); * = longer than trained"]
    if any(len(flags) > 1 for flags in out_of_range.values()):
        parts.append("? = in range for some groups only")
    axes = study.axis_values[0] if study.axis_values else {}
    words = {"seeds.weight": "w = weight init", "seeds.data": "d = data order",
             "seeds.perturb": "p = one initial weight moved by one ulp (0: none)"}
    named = [words[k] for k in SEED_AXES if k in axes]
    parts.append(f"seeds: {', '.join(named)}" if named else "one seed pair per group")
    return "; ".join(parts)
