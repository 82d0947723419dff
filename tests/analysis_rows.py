"""The synthetic results store the analysis tests read (test_analysis_sql and the many
tests that borrow its trials): configs, their canonical JSON and trial ids, a trial's
rows written as a worker writes them, and `build_study`, four configuration groups with
known answers (`Truth`)."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from analysis.query import run_sql_file, sql_file
from orchestrator.store.results_store import write_trial_table
from results_contract import groups

STARTED = datetime(2025, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
STUDY = "synthetic"
LENGTHS = (2, 4, 6, 8)  # trained on 1-4 digits: 2 and 4 in distribution, 6 and 8 not
OOD = (6, 8)
FINAL, EARLY = 100, 50  # evaluation steps; only FINAL counts for the final accuracy


def config(pe: str, weight: int, data: int, lr: float = 1e-05) -> dict:
    """A resolved config shaped like lengthgen's (lr 1e-05: Python and DuckDB write it
    differently, which the group id must survive)."""
    return {
        "task": {"name": "addition", "train_digits": [1, 4]},
        "format": {"reverse": True},
        "data": {"distribution": "uniform_length"},
        "model": {"arch": "decoder", "pe": pe, "size": "tiny"},
        "train": {"lr": lr, "steps": FINAL},
        "eval": {"digits": list(LENGTHS)},
        "seeds": {"weight": weight, "data": data, "eval": 0},
    }


def canonical(cfg: dict) -> str:
    return json.dumps(cfg, sort_keys=True, separators=(",", ":"))


def trial_id(cfg: dict) -> str:
    return text_id(canonical(cfg))


def text_id(text: str) -> str:
    """The trial id of a config's canonical text (trial_id, the text made once)."""
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def write_trial(root: Path, study: str, cfg: dict, final: dict[int, float] | None,
                status: str = "done", early_factor: float = 0.5,
                samples: list[dict] | None = None, group_label: str | None = None,
                grid: dict[tuple[int, int], float] | None = None) -> str:
    """One trial's trials row and, unless ``final`` is None, its train and eval rows:
    accuracy ``final[d]`` at step FINAL and ``early_factor * final[d]`` at step EARLY.
    The row's group is that of its stored config (these configs are no TrialConfig),
    labelled ``group_label`` or its base label."""
    tid = trial_id(cfg)
    write_trial_table(root, study, "trials", tid, [{
        "group_id": groups.group_id(groups.StoredConfig(canonical(cfg))),
        "group_label": group_label or groups.base_label(cfg),
        "status": status, "config_json": canonical(cfg), "n_params": 10, "device": "cpu",
        "started_at": STARTED, "task": cfg["task"]["name"], "pe": cfg["model"]["pe"],
        "size": cfg["model"]["size"], "arch": cfg["model"]["arch"],
        "distribution": cfg["data"]["distribution"], "lr": cfg["train"]["lr"],
        "weight_seed": cfg["seeds"]["weight"], "data_seed": cfg["seeds"]["data"],
        "eval_seed": cfg["seeds"]["eval"], "train_digits": cfg["task"]["train_digits"],
        "train_min_digits": 1, "train_max_digits": 4,
        # only a config that names one: the pinned store's rows stay as they were
        **({"perturb_seed": cfg["seeds"]["perturb"]} if "perturb" in cfg["seeds"] else {}),
    }])
    if final is None:
        return tid
    write_trial_table(root, study, "train", tid, [
        {"step": s, "loss": 1.0 / s, "lr": 1e-3, "tokens": 64 * s, "wall_s": 0.01 * s}
        for s in (30, 60, 90)
    ])
    write_trial_table(root, study, "eval", tid, [  # NaN: a length without questions
        {"step": step, "digits": d, "n": 0 if np.isnan(acc) else 100,
         "correct": 0 if np.isnan(acc) else round(100 * acc * factor),
         "accuracy": acc * factor, "in_distribution": d <= 4}
        for step, factor in ((EARLY, early_factor), (FINAL, 1.0)) for d, acc in final.items()
    ] + [  # eval.grid's cells, at the final step (grid_eval's rows; eval leaves them out)
        {"step": FINAL, "digits": max(cell), "n": 10, "correct": round(10 * acc), "accuracy": acc,
         "in_distribution": max(cell) <= 4, "first_digits": cell[0], "second_digits": cell[1]}
        for cell, acc in (grid or {}).items()
    ])
    if samples is not None:
        write_trial_table(root, study, "samples", tid, samples)
    return tid


def random_samples(rng: np.random.Generator, n: int = 40) -> list[dict]:
    """Questions at the final step (and a few at EARLY, which must be ignored) with
    random cascade lengths; long cascades are rare and answered worse."""
    rows = []
    for step in (EARLY, FINAL):
        for d in LENGTHS:
            for idx in range(n if step == FINAL else 3):
                cascade = int(rng.choice(4, p=[0.3, 0.45, 0.2, 0.05]))
                correct = bool(rng.random() < 0.9 - 0.2 * cascade - 0.05 * d)
                carried = rng.random(d + 1) < 0.4 * (cascade > 0)
                wrong = np.arange(d + 1) == (d + 1 if correct else rng.integers(0, d + 1))
                rows.append({"step": step, "digits": d, "idx": idx, "cascade": cascade,
                             "correct": correct, "wrong_digits": 0 if correct else 1,
                             "first_wrong": None if correct else 0,
                             "target": "1" * (d + 1), "prediction": "1" * (d + 1),
                             "carry_in": "".join("1" if c else "0" for c in carried),
                             "wrong_places": "".join("1" if w else "0" for w in wrong)})
    return rows


class Truth:
    """What was written, for the numpy side: trial -> (group name, seeds, final acc)."""

    def __init__(self) -> None:
        self.trials: dict[str, dict] = {}
        self.samples: dict[str, list[dict]] = {}

    def add(self, name: str, cfg: dict, final: dict[int, float], samples=None) -> None:
        self.trials[trial_id(cfg)] = {"group": name, "cfg": cfg, "w": cfg["seeds"]["weight"],
                                      "d": cfg["seeds"]["data"], "final": final}
        if samples is not None:
            self.samples[trial_id(cfg)] = samples

    def group(self, name: str) -> dict[str, dict]:
        return {t: v for t, v in self.trials.items() if v["group"] == name}


def build_study(root: Path) -> Truth:
    """Four configuration groups and a failed trial:

    cross  fire, lr 1e-05: 3 weight x 4 data seeds, random accuracies with weight and
           data effects, random samples
    exact  rope: 3 weight x 2 data seeds; OOD accuracy depends on the weight seed only
           (0.95, 0.5, 0.1), so the weight seed explains all the variance and W = 1
    many   nope: 33 weight seeds, one data seed (not crossed; 32 degrees of freedom)
           in-distribution accuracy 0.985 (below the 99 % grokking threshold), plus a
           failed trial without results, which every file must leave out
    lr     fire, lr 3e-4: 2 weight seeds; shares task/pe/size/distribution with cross,
           so both labels name train.lr; it "groks" at the early step already
    """
    rng = np.random.default_rng(7)
    truth = Truth()
    cross_label, lr_label = (f"addition/fire/tiny/uniform_length train.lr={lr}" for lr in ("0.00001", "0.0003"))
    weight_effect, data_effect = [0.7, 0.3, 0.5], [0.1, -0.1, 0.05, -0.05]
    grid_rng = np.random.default_rng(11)  # its own draws: the other numbers stay as they were
    for w in range(3):
        for d in range(4):
            cfg = config("fire", w, d)
            final = {2: 1.0, 4: 1.0}
            final.update({n: float(np.clip(weight_effect[w] + data_effect[d]
                                           + rng.normal(0, 0.08), 0, 1)) for n in OOD})
            samples = random_samples(rng)
            grid = {(i, j): float(grid_rng.uniform(0, 1 if max(i, j) <= 4 else 0.5)) for i in (2, 6) for j in (2, 4, 6)}
            write_trial(root, STUDY, cfg, final, samples=samples, group_label=cross_label, grid=grid)
            truth.add("cross", cfg, final, samples)
    for w, level in enumerate([0.95, 0.5, 0.1]):
        for d in range(2):
            cfg = config("rope", w, d)
            final = {2: 1.0, 4: 1.0, 6: level, 8: level}
            samples = random_samples(rng)
            write_trial(root, STUDY, cfg, final, samples=samples)
            truth.add("exact", cfg, final, samples)
    for w in range(33):
        cfg = config("nope", w, 0)
        final = {2: 0.985, 4: 0.985, 6: float(rng.uniform(0, 0.3)), 8: float(rng.uniform(0, 0.1))}
        write_trial(root, STUDY, cfg, final)
        truth.add("many", cfg, final)
    write_trial(root, STUDY, config("nope", 99, 0), None, status="failed")
    for w in range(2):
        cfg = config("fire", w, 0, lr=3e-4)
        final = {2: 1.0, 4: 1.0, 6: 0.2 * w, 8: 0.0}
        write_trial(root, STUDY, cfg, final, early_factor=1.0, group_label=lr_label)
        truth.add("lr", cfg, final)
    return truth


def run(con, name: str, **params) -> list[dict]:
    """The rows of question file `name` (e.g. "variance") on ``con``, each parameter as text."""
    return run_sql_file(con, sql_file(f"{name}.sql"),
                        {k: str(v) for k, v in params.items()}).to_pylist()
