"""The table `lg-study run` prints at the end, and `lg-study status` too: a study's trials
by configuration group, summarised where a group has many seed pairs.

One section per configuration group (trials equal but for their seeds), named by the
label the trials rows, the MLflow tags and the report give it (results_contract.groups), one
column per test length. Lengths longer than the training range carry their ratio to its longest length,
the question the table answers: does the model still work at 2x?

A group of at most LISTED_AT_MOST trials lists one row per seed pair, then its mean, the
interval of the mean and the share of trials that succeed; a larger one (or any, with
`--all` listing them) is summarised: its seed pairs and statuses, mean, interval, min -
max, the share that succeeds and its best seed pair. The numbers are variance.sql's and
success.sql's, run over the table's trials only (run_trials.sql narrows them), so the
report prints the same. Only the trials of the run's own grid are shown (a `seeds.until`
study's: every seed planned so far), so trials of another design in the same results
folder never mix in; `status` given a study's name shows every trial in its folder. A
`seeds.until` study gets a second table: per group the target, the half width reached
and why it stopped adding seeds.
"""

from __future__ import annotations

import contextlib
import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.table import Table

#: a trial's seeds (run_trials.sql's columns) and their short names in the table
SEEDS = {"weight_seed": "w", "data_seed": "d", "perturb_seed": "p"}
SEED_WORDS = {"weight_seed": "w = weight init", "data_seed": "d = data order",
              "perturb_seed": "p = one initial weight moved by one ulp (0: none)"}
#: a group with more trials than this is summarised, its seed pairs not listed (--all lists them)
LISTED_AT_MOST = 8


def _cell(value: float | None) -> str:
    if value is None:
        return "-"
    return "nan" if math.isnan(value) else f"{value:.3f}"


def _range(low: float | None, high: float | None) -> str:
    """An interval as one cell (a narrow terminal breaks it at a space, never cuts it)."""
    return "" if low is None or high is None else f"{_cell(low)} - {_cell(high)}"


# --- what the table shows: groups and their trials -----------------------------------------


@dataclass
class Group:
    """One configuration group: its cells under the group columns, its trials in order."""

    cells: tuple[str, ...]
    trials: list[str] = field(default_factory=list)
    #: the group's full label (its trials rows' group_label); its cell shows the short one
    full_label: str = ""


@dataclass
class Layout:
    """The table before any result: its title, group columns and groups (by group id),
    each trial's seeds (SEEDS' keys) and the training ranges."""

    title: str
    columns: list[str]
    groups: dict[str, Group]
    seeds: dict[str, dict[str, int]]
    trained: set[tuple[int, int]]


def study_layout(study, trials) -> Layout:
    """The table of a loaded study (orchestrator.studies.study.Study) over ``trials``, its own
    grid or more (a `seeds.until` study's added seeds): one group column, the label the
    trials rows, the MLflow tags and the report give the group (study.group_label), in
    the order of the study's design."""
    from results_contract.groups import group_id

    groups: dict[str, Group] = {}
    for config in [*study.trials, *trials]:
        groups.setdefault(group_id(config), Group((), full_label=study.group_label(config)))
    _shorten(groups)
    for config in trials:
        groups[group_id(config)].trials.append(config.trial_id)
    seeds = {c.trial_id: {"weight_seed": c.seeds.weight, "data_seed": c.seeds.data,
                          "perturb_seed": c.seeds.perturb} for c in trials}
    title = f"{study.name}{f' (profile {study.profile})' if study.profile else ''}"
    return Layout(title, ["group"], {gid: g for gid, g in groups.items() if g.trials}, seeds,
                  {tuple(c.task.train_digits) for c in trials})


def results_layout(name: str, rows: list[dict[str, Any]]) -> Layout:
    """The table of a study known by name only: every trial of run_trials.sql's ``rows``,
    grouped by their group (one column, its label)."""
    groups: dict[str, Group] = {}
    for row in rows:
        groups.setdefault(row["group_id"], Group((), full_label=row["group_label"])).trials.append(row["trial_id"])
    _shorten(groups)
    seeds = {row["trial_id"]: {key: row[key] for key in SEEDS} for row in rows}
    return Layout(name, ["group"], groups, seeds, {(r["train_low"], r["train_high"]) for r in rows})


def _shorten(groups: dict[str, Group]) -> None:
    """Each group's cell: its short label among these groups (results_contract.groups.short_labels),
    as the report and the MLflow run names give it."""
    from results_contract.groups import short_labels

    short = short_labels(g.full_label for g in groups.values())
    for group in groups.values():
        group.cells = (short[group.full_label],)


# --- what the results say of them ----------------------------------------------------------


@dataclass
class Measured:
    """The results of a layout's trials: status and accuracy per trial and length
    (run_table.sql), the group id each trial has in the results, and variance.sql's
    and success.sql's rows by (group id, length) over those trials only."""

    status: dict[str, str]
    accuracy: dict[str, dict[int, float | None]]
    out_of_range: dict[int, set[bool]]
    group_of: dict[str, str]
    variance: dict[tuple[str, int], dict[str, Any]]
    success: dict[tuple[str, int], dict[str, Any]]
    #: trials shown at a checkpoint chosen on long lengths (eval.select best_long_loss)
    chosen: set[str] = field(default_factory=set)


def measured(listed: list[dict], accuracies: list[dict], variance: list[dict], success: list[dict]) -> Measured:
    """``listed``: run_trials.sql's rows (the trials shown); the others the rows of
    run_table.sql, variance.sql and success.sql."""
    shown = {r["trial_id"]: r["group_id"] for r in listed}
    status = {r["trial_id"]: r["status"] for r in listed}
    accuracy: dict[str, dict[int, float | None]] = defaultdict(dict)
    out_of_range: dict[int, set[bool]] = defaultdict(set)
    for r in accuracies:
        if r["trial_id"] in shown and r["digits"] is not None:
            accuracy[r["trial_id"]][r["digits"]] = r["accuracy"]
            out_of_range[r["digits"]].add(not r["in_distribution"])
    chosen = {r["trial_id"] for r in accuracies if r["trial_id"] in shown and r.get("checkpoint") not in (None, "final")}
    return Measured(status, accuracy, out_of_range, shown, {(r["group_id"], r["digits"]): r for r in variance},
                    {(r["group_id"], r["digits"]): r for r in success}, chosen)


# --- the table -----------------------------------------------------------------------------


def summary_table(layout: Layout, results: Measured, show_all: bool = False) -> Table:
    """The table: one section per group, its seed pairs listed or summarised."""
    lengths = sorted(results.out_of_range)
    longest = {high for _, high in layout.trained}
    shown = [key for key in SEEDS if len({s[key] for s in layout.seeds.values()}) > 1]
    title = f"{layout.title}: exact-match accuracy by test length"
    # as wide as its title, so that a narrow table never wraps it
    table = Table(title=title, min_width=len(title))
    # numbers are never cut: in a narrow terminal (or a pipe, 80 columns) the long
    # group labels fold onto more lines instead; no cell of a length is wider than 7
    for key in layout.columns:
        table.add_column(key, overflow="fold")
    if shown:
        table.add_column("seeds", no_wrap=True)
    for n in lengths:
        header = _length_header(n, results.out_of_range[n], longest)
        table.add_column(header, justify="right", no_wrap=True, min_width=max(len(header), 5))
    table.add_column("status", overflow="fold")
    summarised = False
    for number, (gid, group) in enumerate(layout.groups.items()):
        listed = show_all or len(group.trials) <= LISTED_AT_MOST
        summarised |= not listed
        rows = _group_rows(group, layout, results, lengths, shown, listed)
        for index, (label, cells, status) in enumerate(rows):
            table.add_row(*(group.cells if index == 0 else ("",) * len(group.cells)), *((label,) if shown else ()),
                          *cells, status, end_section=index == len(rows) - 1 and number < len(layout.groups) - 1)
    table.caption = _caption(layout, longest, results, shown, summarised)
    return table


def _seed_label(seeds: dict[str, int], shown: list[str]) -> str:
    return " ".join(f"{SEEDS[key]}{seeds[key]}" for key in shown)


def _group_rows(group: Group, layout: Layout, results: Measured, lengths: list[int], shown: list[str],
                listed: bool) -> list[tuple[str, list[str], str]]:
    """A group's rows as (seeds cell, length cells, status): its trials when ``listed``,
    else a line naming its seed pairs and statuses; then its summary."""
    labels = [_seed_label(layout.seeds[t], shown) for t in group.trials]
    rows = []
    if listed:
        for trial_id, label in zip(group.trials, labels, strict=True):
            accuracies = results.accuracy.get(trial_id, {})
            rows.append((label, [_cell(accuracies[n]) if n in accuracies else "" for n in lengths],
                         results.status.get(trial_id, "not run")))
    else:
        pairs = len({(layout.seeds[t]["weight_seed"], layout.seeds[t]["data_seed"]) for t in group.trials})
        counts = Counter(results.status.get(t, "not run") for t in group.trials)
        rows.append((f"{pairs} seed pairs", [""] * len(lengths),
                     ", ".join(f"{n} {status}" for status, n in counts.most_common())))
    gid = next((results.group_of[t] for t in group.trials if t in results.group_of), None)
    if len(group.trials) >= 2 and gid is not None:
        best = dict(zip(group.trials, labels, strict=True))
        rows += _summary_rows([results.variance.get((gid, n)) for n in lengths],
                              [results.success.get((gid, n)) for n in lengths], best,
                              full=len(group.trials) > LISTED_AT_MOST)
    return rows


def _summary_rows(variance: list[dict | None], success: list[dict | None], labels: dict[str, str],
                  full: bool) -> list[tuple[str, list[str], str]]:
    """The summary of a group at each length, from variance.sql's and success.sql's rows
    (None: no trial measured there): the mean and its interval, min and max and the
    best seed pair when ``full`` (a large group, listed or not), and the trials that
    reach the success threshold. One number a cell, as narrow as an accuracy."""
    found_v = next((r for r in variance if r), None)
    found_s = next((r for r in success if r), None)
    if found_v is None:
        return []

    def numbers(column: str) -> list[str]:
        return [_cell(r[column]) if r and r[column] is not None else "" for r in variance]

    level = f"{found_v['level']:.0%} CI"
    named = [("mean", "mean"), (f"{level} low", "mean_low"), (f"{level} high", "mean_high")]
    if full:
        named += [("min", "min"), ("max", "max")]
    rows = [(label, numbers(column), "") for label, column in named]
    if found_s is not None:
        rows.append((f">= {found_s['threshold']:g}", [f"{r['n_success']}/{r['n_trials']}" if r else ""
                                                      for r in success], ""))
    if full:
        best = labels.get(found_v["best_trial_id"], found_v["best_trial_id"])
        rows.append((f"best {best}", numbers("best_of_n"), ""))
    return rows


def _length_header(n: int, flags: set[bool], longest: set[int]) -> str:
    if flags == {True}:
        return f"{n} ({n / next(iter(longest)):.1f}x)" if len(longest) == 1 else f"{n}*"
    return str(n) if flags == {False} else f"{n}?"


def _caption(layout: Layout, longest: set[int], results: Measured, shown: list[str], summarised: bool) -> str:
    ranges = ", ".join(f"{low}-{high}" for low, high in sorted(layout.trained))
    parts = [f"trained on {ranges} digits; a length marked (Nx) is N times the longest trained"
             if len(longest) == 1 else f"trained on {ranges} digits (by group); * = longer than trained"]
    if len(layout.groups) > 1:
        parts.append("group: the settings that tell the groups apart (lg-study report's key gives each "
                     "group's full label)")
    if any(len(flags) > 1 for flags in results.out_of_range.values()):
        parts.append("? = in range for some groups only")
    parts.append(f"seeds: {', '.join(SEED_WORDS[k] for k in shown)}" if shown else "one seed pair per group")
    if any(len(group.trials) >= 2 for group in layout.groups.values()) and results.variance:
        parts.append("mean over the trials, CI low - high its interval over seeds (variance.sql); >= T: trials "
                     "whose accuracy reaches T, of those measured (success.sql)")
    if results.chosen:
        parts.append(f"{len(results.chosen)} trials show the checkpoint of their lowest long-length validation "
                     "loss, chosen on long lengths (eval.select best_long_loss), not their last step "
                     "(final_accuracy.sql shows both)")
    if summarised:
        parts.append(f"a group of more than {LISTED_AT_MOST} trials is summarised (--all lists them): min and max "
                     "over its trials, best = the seed pair with the highest mean over the lengths")
    return "; ".join(parts)


# --- a seeds.until study: where each group stopped -----------------------------------------


def target_table(target, states, labels: dict[str, str], design_seeds: dict[str, int]) -> Table:
    """Per group of a `seeds.until` study (orchestrator.store.seed_plan: its SeedTarget and
    GroupStates): the weight seeds it has (and how many were added to the design's),
    the interval at the target's length, its half width and why it stopped. ``labels``:
    group id -> the group's name in the main table; ``design_seeds``: group id -> the
    design's weight seeds (empty for a study known by name)."""
    table = Table(title=f"{target.words()}; where each group stopped")
    for name in ("group", "weight seeds", "interval", "half width", "stopped"):
        table.add_column(name, overflow="fold", justify="right" if name == "half width" else "left")
    for state in states:
        design = design_seeds.get(state.group_id)
        added = f" ({state.seeds - design} added)" if design is not None and state.seeds > design else ""
        table.add_row(labels.get(state.group_id) or state.group_label, f"{state.seeds}{added}",
                      _range(state.low, state.high), _cell(state.half_width), stop_reason(target, state))
    return table


def stop_reason(target, state) -> str:
    """Why a group of a `seeds.until` study stopped adding seeds, or that it has not."""
    from orchestrator.store.seed_plan import MAX_REACHED, TARGET_HELD

    if state.state == TARGET_HELD:
        words = f"target held: half width <= {target.half_width:g}"
    elif state.state == MAX_REACHED:
        words = f"max reached: {target.max} weight seeds, " + (
            "no interval" if state.half_width is None else f"half width > {target.half_width:g}")
    else:
        words = f"adding seeds: {state.seeds} of at most {target.max}, target not met yet"
    return words + (f"; {state.unfinished} trials unfinished" if state.unfinished else "")


# --- reading it all ------------------------------------------------------------------------


@dataclass
class StudySummary:
    """What `run` and `status` print of a study: the table's layout and results, and a
    `seeds.until` study's target and group states (orchestrator.store.seed_plan) with the
    design's weight seeds per group."""

    layout: Layout
    results: Measured
    target: Any = None
    states: list = field(default_factory=list)
    design_seeds: dict[str, int] = field(default_factory=dict)

    def tables(self, show_all: bool = False) -> list[Table]:
        """The table, and a `seeds.until` study's where-each-group-stopped table."""
        tables = [summary_table(self.layout, self.results, show_all)]
        if self.target is not None:
            labels = {gid: ", ".join(g.cells) for gid, g in self.layout.groups.items() if any(g.cells)}
            tables.append(target_table(self.target, self.states, labels, self.design_seeds))
        return tables

    def text(self, output_format: str) -> str:
        """The summary's rows (``rows``) as csv, json or markdown text."""
        import pyarrow as pa

        from analysis.query import to_csv, to_json, to_markdown

        text = {"csv": to_csv, "json": to_json, "markdown": to_markdown}[output_format](pa.Table.from_pylist(self.rows()))
        return text if text.endswith("\n") else text + "\n"

    def rows(self) -> list[dict[str, Any]]:
        """One row per group and test length: the numbers of the table's summary rows."""
        rows = []
        for group in self.layout.groups.values():
            gid = next((self.results.group_of[t] for t in group.trials if t in self.results.group_of), None)
            for n in sorted(self.results.out_of_range):
                variance, success = self.results.variance.get((gid, n)), self.results.success.get((gid, n))
                if variance is None:
                    continue
                rows.append(_summary_record(self.layout, group, n, variance, success or {}))
        return rows


def _summary_record(layout: Layout, group: Group, digits: int, variance: dict, success: dict) -> dict[str, Any]:
    seeds = [layout.seeds[t] for t in group.trials]
    best = layout.seeds.get(variance["best_trial_id"])
    return {
        **dict(zip(layout.columns, group.cells, strict=True)),
        "group_label": group.full_label,
        "group_id": variance["group_id"],
        "digits": digits,
        "seed_pairs": len({(s["weight_seed"], s["data_seed"]) for s in seeds}),
        "n_trials": variance["n_trials"],
        **{key: variance[key] for key in ("mean", "mean_low", "mean_high", "level", "min", "max")},
        **{key: success.get(key) for key in ("n_success", "p_success", "p_success_low", "p_success_high", "threshold")},
        "best": _seed_label(best, list(SEEDS)) if best else None,
        "best_trial_id": variance["best_trial_id"],
        "best_of_n": variance["best_of_n"],
    }


def read_summary(results_root: Path, name: str, study=None, connection=None) -> StudySummary:
    """The summary of study ``name`` under ``results_root`` (a profile's root for a
    profile). With the loaded ``study``: the trials of its grid, or for a `seeds.until`
    study those planned so far (orchestrator.running.seed_answers.planned_trials); by name: every
    trial in its folder, and the target its last `seeds.until` run left, if any. ``connection``:
    a connection open on the study already (status's), else one is opened. Raises
    LookupError when the study has no results, QueryError for SQL DuckDB refused."""
    from analysis.query import open_results, run_sql_file, sql_file
    from orchestrator.running import seed_answers
    from orchestrator.store import seed_plan

    until = study is not None and study.spec.seeds.until is not None
    targeted = seed_answers.seed_states(results_root, name, study) if until or study is None else None
    trials = None if study is None else seed_answers.planned_trials(study, results_root) if until else study.trials
    target = targeted[0] if targeted else None
    threshold = {"threshold": str(target.threshold)} if target is not None and target.threshold is not None else {}
    with contextlib.nullcontext(connection) if connection else open_results(results_root, name) as con:
        listed = run_sql_file(con, sql_file("run_trials.sql"),
                              None if trials is None else {"trial_ids": ",".join(t.trial_id for t in trials)})
        accuracies = run_sql_file(con, sql_file("run_table.sql"))
        variance = run_sql_file(con, sql_file("variance.sql"), {"resamples": "0"})  # no bootstrap: not shown
        success = run_sql_file(con, sql_file("success.sql"), threshold)
    listed_rows = listed.to_pylist()
    layout = results_layout(name, listed_rows) if study is None else study_layout(study, trials)
    results = measured(listed_rows, accuracies.to_pylist(), variance.to_pylist(), success.to_pylist())
    if targeted is None:
        return StudySummary(layout, results)
    design = {} if study is None else {gid: len(d.seeds) for gid, d in seed_plan.design_groups(study.trials).items()}
    return StudySummary(layout, results, target, targeted[1], design)
