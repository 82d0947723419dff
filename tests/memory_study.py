"""An in-memory study for the statistics tests: tables `trials` and `eval` hold the rows
the results store would write, and the real views of analysis/sql/staging run on top,
so hundreds of simulated studies (a coverage simulation's 480,000 trials) cost no
Parquet files. `Study.add` adds a trial, `Study.add_grid` a crossed grid of them,
`connect` gives DuckDB with the analysis views; `run` runs a question file there."""

from __future__ import annotations

import functools
import itertools
import json

import duckdb
import numpy as np
import pyarrow as pa
from analysis_rows import canonical, config, text_id

from analysis.query import (
    DERIVED_FILES,
    DERIVED_VIEWS,
    _statements_by_view,
    prepare_connection,
)
from analysis.sql_layers import FILE_VIEWS_FILE
from results_contract import groups, identity


class Study:
    """Trials of a study as rows; ``connect`` gives DuckDB with the analysis views."""

    def __init__(self) -> None:
        self.trials: list[dict] = []
        self.evals: list[dict] = []
        self.samples: list[dict] = []
        self.group_keys: dict[str, str] = {}  # trial id -> its config less the seeds apart

    def add(self, cfg: dict, accuracy: dict[int, float], n: int = 100, status: str = "done",
            correct: dict[int, int] | None = None) -> None:
        self._append(cfg, canonical(cfg), _without_seeds_apart(cfg), accuracy, n, status, correct)

    def add_grid(self, cfg: dict, y: np.ndarray, lengths: tuple[int, ...] = (6,)) -> None:
        """Trial (w, d) of a crossed grid, `cfg` with weight seed w and data seed d, scores
        y[w, d] at every length: `add` of each cell, with the group's JSON made once and
        each cell's seeds written into it (the coverage simulations add 480,000 trials,
        whose JSON, made whole for each, was 60 % of a 24 x 20 simulation)."""
        seeds = cfg["seeds"]
        whole, key = canonical(cfg), _without_seeds_apart(cfg)
        before, after = whole.split(canonical(seeds))  # the seeds' text is there once
        for w, d in itertools.product(range(y.shape[0]), range(y.shape[1])):
            cell_seeds = {**seeds, "weight": w, "data": d}
            text = before + _canonical_seeds(tuple(sorted(cell_seeds.items()))) + after
            self._append({"seeds": cell_seeds}, text, key, dict.fromkeys(lengths, float(y[w, d])))

    def _append(self, cfg: dict, text: str, group_key: str, accuracy: dict[int, float], n: int = 100,
                status: str = "done", correct: dict[int, int] | None = None) -> None:
        tid = text_id(text)
        self.group_keys[tid] = group_key
        self.trials.append({
            "study": "sim", "trial_id": tid, "status": status, "config_json": text,
            "weight_seed": cfg["seeds"]["weight"], "data_seed": cfg["seeds"]["data"],
            "train_min_digits": 1, "train_max_digits": 4})
        for digits, acc in accuracy.items():
            right = (correct or {}).get(digits, round(acc * n))
            self.evals.append({"study": "sim", "trial_id": tid, "step": 100, "digits": digits,
                               "n": n, "correct": right, "accuracy": acc,
                               "in_distribution": digits <= 4})

    def grouped_trials(self) -> list[dict]:
        """The trials rows with the group columns `lg-study migrate` gives rows of
        configs that are no TrialConfig (results_contract.groups.StoredConfig). Trials
        whose configs differ only in the seeds apart share a group: its id and label are
        computed once, from its first trial (simulated studies have 480,000 trials)."""
        first: dict[str, groups.StoredConfig] = {}
        member_of = {}
        for row in self.trials:
            key = self.group_keys[row["trial_id"]]
            if key not in first:
                first[key] = groups.StoredConfig(row["config_json"])
            member_of[row["trial_id"]] = key
        ids = {key: groups.group_id(stored) for key, stored in first.items()}
        labels = groups.group_labels(first.values())
        return [{**row, "group_id": ids[member_of[row["trial_id"]]],
                 "group_label": labels[ids[member_of[row["trial_id"]]]]} for row in self.trials]

    def connect(self) -> duckdb.DuckDBPyConnection:
        tables = {"trials": self.grouped_trials(), "eval": self.evals, "samples": self.samples}
        return connect_tables({name: pa.Table.from_pylist(rows) for name, rows in tables.items() if rows})


def connect_tables(tables: dict[str, pa.Table]) -> duckdb.DuckDBPyConnection:
    """DuckDB with the analysis views over ``tables`` (trials, eval, samples: name ->
    rows), each with the columns a real study's table has (those not given null), and
    the results tables not given empty: the same views, in the same order, as a study's."""
    con = duckdb.connect()
    prepare_connection(con)
    empties = _statements_by_view(con, ("empty_tables.sql",))
    views = _statements_by_view(con, (FILE_VIEWS_FILE, *DERIVED_FILES))
    for table in ("train", "samples"):
        if table not in tables:
            con.execute(empties[table])
    for table, rows in tables.items():
        con.execute(empties[table].replace(f"view {table}", f"view empty_{table}", 1))
        con.register(f"new_{table}", rows)
        con.execute(f"create table {table} as select * from empty_{table} union all by name select * from new_{table}")
    con.execute(empties["grid_eval"])  # no grid cells: over the eval table above
    for view in DERIVED_VIEWS:
        con.execute(views[view])
    return con


@functools.cache
def _canonical_seeds(items: tuple[tuple[str, int], ...]) -> str:
    """The canonical JSON of a seeds dict, made once per seeds (each grid repeats them)."""
    return canonical(dict(items))


def _without_seeds_apart(cfg: dict) -> str:
    """A config less the seeds its group's trials differ by (as group_identity_json)."""
    apart = identity.seeds_apart()
    return json.dumps({**cfg, "seeds": {k: v for k, v in cfg.get("seeds", {}).items() if k not in apart}},
                      sort_keys=True)


def group_config(pe: str, w: int, d: int, group: int = 0) -> dict:
    """The test config with its own train.steps per `group` (one group per value)."""
    cfg = config(pe, w, d)
    cfg["train"]["steps"] = 100 + group
    return cfg


def crossed_study(tables: list[np.ndarray], lengths: tuple[int, ...] = (6,)) -> Study:
    """One configuration group per table, trial (w, d) scoring table[w, d] at every length."""
    study = Study()
    for g, y in enumerate(tables):
        study.add_grid(group_config("fire", 0, 0, g), y, lengths)
    return study


def normal_tables(rng, count: int, a: int, b: int, sigma2: tuple[float, float, float],
                  mean: float = 0.5) -> list[np.ndarray]:
    """y = mean + u_w + v_d + e_wd with variances sigma2 = (weight, data, residual)."""
    sw, sd, se = np.sqrt(sigma2)
    return [mean + rng.normal(0, sw, (a, 1)) + rng.normal(0, sd, (1, b))
            + rng.normal(0, se, (a, b)) for _ in range(count)]
